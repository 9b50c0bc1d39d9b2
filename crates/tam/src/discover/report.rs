//! The result of a discovery: the model, and the evidence behind every field of it.

use super::accumulate::{Accumulator, NullThread, StageStats};
use super::blocking::{self, BlockingReport};
use super::classify::{classify, MEASURED};
use super::procfs::USER_HZ;
use super::Options;
use crate::model::{Model, Resource, Scheduling, Stage, Usage};
use serde::Serialize;
use std::collections::BTreeMap;

/// What was measured for one stage and what it was classified as.
#[derive(Debug, Clone, Serialize)]
pub struct StageEvidence {
    /// Stage name.
    pub name: String,
    /// `general` (bounded) or `on_demand`.
    pub scheduling: String,
    /// `cpu`, `io`, `network` → `true`, `false` or `unknown`.
    pub resources: BTreeMap<String, String>,
    /// Share of the tree's CPU time.
    pub cpu_share: f64,
    /// Share of the tree's disk bytes.
    pub io_share: f64,
    /// Share of the tree's TCP bytes.
    pub network_share: f64,
    /// Fraction of active thread-intervals with disk I/O, and with network traffic.
    pub io_hit: f64,
    /// See `io_hit`.
    pub network_hit: f64,
    /// Correlation of thread count with the connection count.
    pub follows_connections: Option<f64>,
    /// The raw totals and thread counts over time.
    pub stats: StageStats,
}

/// Everything `tam discover` found.
#[derive(Debug, Clone, Serialize)]
pub struct Discovery {
    /// The model (also as TOML in [`Discovery::to_toml`]).
    #[serde(skip)]
    pub model: Model,
    /// Per-stage evidence, busiest first.
    pub stages: Vec<StageEvidence>,
    /// Busy threads that matched no annotation (the paper's "NULL stage overly active").
    pub null_alerts: Vec<NullThread>,
    /// Established connections of the tree at each snapshot.
    pub connections: Vec<usize>,
    /// Tree totals: CPU ticks, disk bytes, TCP bytes.
    pub totals: [u64; 3],
    /// Seconds sampled.
    pub elapsed_s: f64,
    /// Seconds requested.
    pub requested_s: f64,
    /// Sampling interval, seconds.
    pub interval_s: f64,
    /// The extensive threshold.
    pub threshold: f64,
    /// The target exited before the end: the result holds what was gathered until then.
    pub target_exited: bool,
    /// Blocking probes and their inference (when run).
    pub blocking: Option<BlockingReport>,
    /// Why probing failed, if it did.
    pub blocking_error: Option<String>,
}

fn usage_key(u: Usage) -> &'static str {
    match u {
        Usage::True => "true",
        Usage::False => "false",
        Usage::Unknown => "unknown",
    }
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Run-length form of a count series: `2x3 4x10` = 2 for 3 samples, then 4 for 10.
fn runs(counts: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let mut j = i;
        while j < counts.len() && counts[j] == counts[i] {
            j += 1;
        }
        out.push(format!("{}x{}", counts[i], j - i));
        i = j;
    }
    out.join(" ")
}

impl Discovery {
    /// Classifies the accumulated stages and builds the model (blocking added later).
    pub fn build(
        acc: &Accumulator,
        options: &Options,
        root_name: &str,
        elapsed_s: f64,
        target_exited: bool,
    ) -> Discovery {
        let mut totals = [0u64; 3];
        for s in acc.stages.values() {
            totals[0] += s.cpu_ticks;
            totals[1] += s.read_bytes + s.write_bytes;
            totals[2] += s.net_bytes;
        }
        for n in acc.null.values() {
            totals[0] += n.cpu_ticks;
            totals[1] += n.disk_bytes;
            totals[2] += n.net_bytes;
        }
        let mut stages: Vec<StageEvidence> = acc
            .stages
            .values()
            .map(|s| {
                let c = classify(s, totals, &acc.connections, options.threshold);
                StageEvidence {
                    name: s.name.clone(),
                    scheduling: c.scheduling.key().to_string(),
                    resources: MEASURED
                        .iter()
                        .zip(c.usage)
                        .map(|(r, u)| (r.key().to_string(), usage_key(u).to_string()))
                        .collect(),
                    cpu_share: c.shares[0],
                    io_share: c.shares[1],
                    network_share: c.shares[2],
                    io_hit: c.hit[0],
                    network_hit: c.hit[1],
                    follows_connections: c.follows_connections,
                    stats: s.clone(),
                }
            })
            .collect();
        stages.sort_by(|a, b| {
            b.stats
                .cpu_ticks
                .cmp(&a.stats.cpu_ticks)
                .then_with(|| a.name.cmp(&b.name))
        });
        let share = |n: u64, i: usize| {
            if totals[i] == 0 {
                0.0
            } else {
                n as f64 / totals[i] as f64
            }
        };
        let null_alerts = acc
            .null
            .values()
            .filter(|n| {
                share(n.cpu_ticks, 0) >= options.threshold
                    || share(n.disk_bytes, 1) >= options.threshold
                    || share(n.net_bytes, 2) >= options.threshold
            })
            .cloned()
            .collect();
        let mut d = Discovery {
            model: Model::default(),
            stages,
            null_alerts,
            connections: acc.connections.clone(),
            totals,
            elapsed_s,
            requested_s: options.duration.as_secs_f64(),
            interval_s: options.interval.as_secs_f64(),
            threshold: options.threshold,
            target_exited,
            blocking: None,
            blocking_error: None,
        };
        d.model = d.make_model(options, root_name);
        d
    }

    /// Records the probes and adds the blocking relations they found to the model.
    pub fn set_blocking(&mut self, report: BlockingReport) {
        for stage in &mut self.model.stages {
            if let Some(on) = report.blocks_on.get(&stage.name) {
                stage.blocks_on = on.iter().cloned().collect();
                let effects: Vec<String> = report
                    .probes
                    .iter()
                    .filter(|p| on.contains(&p.slowed))
                    .map(|p| {
                        format!(
                            "slowing `{}` cut its CPU rate from {:.2} to {:.2} cores",
                            p.slowed,
                            p.baseline.get(&stage.name).copied().unwrap_or(0.0),
                            p.during.get(&stage.name).copied().unwrap_or(0.0)
                        )
                    })
                    .collect();
                let note = stage.note.take().unwrap_or_default();
                stage.note = Some(format!(
                    "{note} BLOCKING (measured): {}.",
                    effects.join("; ")
                ));
            }
        }
        self.blocking = Some(report);
    }

    fn make_model(&self, options: &Options, root_name: &str) -> Model {
        let mut model = Model {
            name: options
                .name
                .clone()
                .unwrap_or_else(|| format!("{root_name} (discovered)")),
            source: Some(if options.command_line.is_empty() {
                "fairlane tam discover".to_string()
            } else {
                options.command_line.clone()
            }),
            description: Some(format!(
                "Discovered from outside the process: {:.0} s sampled every {:.2} s, \
                 extensive = at least {:.0}% of the tree's total. Measured: stages, \
                 stage types, CPU/disk/network use, blocking (delay injection). Not \
                 visible from outside, fill in by hand: which bounded stages take a \
                 pluggable scheduler, ordering constraints, downstream flows, lock \
                 contention.{}",
                self.elapsed_s,
                self.interval_s,
                self.threshold * 100.0,
                if self.target_exited {
                    " The target exited before the end of the run: partial data."
                } else {
                    ""
                }
            )),
            ..Model::default()
        };
        model.hosts.insert(1, root_name.to_string());
        for s in &self.stages {
            let scheduling = if s.scheduling == "on_demand" {
                Scheduling::OnDemand
            } else {
                Scheduling::General
            };
            let mut stage = Stage::new(&s.name, scheduling);
            for r in MEASURED {
                let u = match s.resources.get(r.key()).map(String::as_str) {
                    Some("true") => Usage::True,
                    Some("unknown") => Usage::Unknown,
                    _ => Usage::False,
                };
                stage.resources.set(r, u);
            }
            let st = &s.stats;
            let min = st.counts.iter().min().copied().unwrap_or(0);
            let max = st.counts.iter().max().copied().unwrap_or(0);
            let kind = if scheduling == Scheduling::OnDemand {
                format!(
                    "on-demand: {min}..{max} live threads, {} distinct over the run{}",
                    st.distinct_threads,
                    s.follows_connections
                        .map(|r| format!(", count/connections correlation {r:.2}"))
                        .unwrap_or_default()
                )
            } else {
                // The count held most of the time (one-sample blips are ignored).
                let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
                for &c in &st.counts {
                    *seen.entry(c).or_default() += 1;
                }
                let usual = seen.iter().max_by_key(|(_, n)| **n).map_or(0, |(c, _)| *c);
                format!("bounded: {usual} threads")
            };
            stage.note = Some(format!(
                "MEASURED: {kind} (counts over time {}); {} process(es); CPU {:.2} s ({:.1}%); \
                 disk read {} + write {} ({:.1}%, in {:.0}% of active intervals); network {} \
                 ({:.1}%, in {:.0}% of active intervals). FILL IN: {}ordering? downstream? lock?",
                runs(&st.counts),
                st.processes,
                st.cpu_ticks as f64 / USER_HZ,
                s.cpu_share * 100.0,
                bytes(st.read_bytes),
                bytes(st.write_bytes),
                s.io_share * 100.0,
                s.io_hit * 100.0,
                bytes(st.net_bytes),
                s.network_share * 100.0,
                s.network_hit * 100.0,
                if scheduling == Scheduling::General {
                    "pluggable or general? "
                } else {
                    ""
                }
            ));
            model.stages.push(stage);
        }
        let _ = Resource::Lock; // lock contention cannot be measured from outside
        model
    }

    /// The model as TOML, with a header saying how it was made and what to fill in.
    /// `tam check` and `tam draw` read it unchanged.
    pub fn to_toml(&self) -> String {
        let mut head = String::from(
            "# Discovered by `fairlane tam discover` (see docs/tam.md, \"Discover it\").\n",
        );
        if let Some(source) = &self.model.source {
            head += &format!("# Command: {source}\n");
        }
        head += &format!(
            "# Sampled {:.1} s of {:.0} s requested, every {:.2} s; totals: CPU {:.2} s, disk {}, network {}.\n",
            self.elapsed_s,
            self.requested_s,
            self.interval_s,
            self.totals[0] as f64 / USER_HZ,
            bytes(self.totals[1]),
            bytes(self.totals[2])
        );
        head += &format!("# Connections over time: {}\n", runs(&self.connections));
        if self.target_exited {
            head += "# WARNING: the target exited before the end; this is what was gathered until then.\n";
        }
        match (&self.blocking, &self.blocking_error) {
            (Some(b), _) => {
                head += &format!(
                    "# Blocking: {} probe(s), {:.0} s windows, {}; entry stages: {}.\n",
                    b.probes.len(),
                    b.window_s,
                    b.method,
                    if b.entry.is_empty() {
                        "none".to_string()
                    } else {
                        b.entry.join(", ")
                    }
                );
                for p in &b.probes {
                    let rates: Vec<String> = p
                        .baseline
                        .iter()
                        .map(|(k, v)| {
                            format!("{k} {v:.3}->{:.3}", p.during.get(k).copied().unwrap_or(0.0))
                        })
                        .collect();
                    let falls: Vec<String> = p
                        .slowdown
                        .iter()
                        .map(|f| f.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0)))
                        .collect();
                    head += &format!(
                        "#   slowed `{}` ({} threads, its rate fell {}): {}; CPU cores before->during: {}\n",
                        p.slowed,
                        p.threads,
                        falls.join(" and "),
                        if !p.effective {
                            format!(
                                "too weak to judge (each round must fall at least {:.0}%; - = no measurable baseline)",
                                blocking::MIN_SLOWDOWN * 100.0
                            )
                        } else if p.dropped.is_empty() {
                            "dropped nothing".to_string()
                        } else {
                            format!("dropped {}", p.dropped.join(", "))
                        },
                        rates.join(", ")
                    );
                }
                for (t, s) in &b.starved {
                    head += &format!("#   `{t}` starved (fed by) when `{s}` was slowed: downstream, not blocking\n");
                }
                for (t, s, e) in &b.undecided {
                    head += &format!(
                        "#   `{t}` dropped when `{s}` was slowed, with entry stage `{e}` whose probe was too weak: \
                         starvation or blocking, undecided (not claimed)\n"
                    );
                }
            }
            (None, Some(e)) => head += &format!("# Blocking not probed: {e}\n"),
            (None, None) => head += "# Blocking not probed.\n",
        }
        for n in &self.null_alerts {
            head += &format!(
                "# NULL stage overly active: thread `{}` (pid {}, tid {}, state {}, wchan {}) matched no annotation\n",
                n.name,
                n.pid,
                n.tid,
                n.state,
                if n.wchan.is_empty() { "-" } else { &n.wchan }
            );
        }
        head += "# Fill in what cannot be seen from outside (paper Fig. 7): pluggable scheduling points,\n\
                 # ordering constraints, downstream flows, lock contention.\n\n";
        head + &self.model.to_toml()
    }

    /// Machine-readable result: the evidence, the alerts, the probes and the model TOML.
    pub fn to_json(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("model".into(), serde_json::Value::String(self.to_toml()));
        }
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// A short human summary: stages, types, resources, alerts.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        if self.target_exited {
            out += &format!(
                "warning: the target exited after {:.1} s; the model holds what was gathered until then\n",
                self.elapsed_s
            );
        }
        for s in &self.stages {
            let used: Vec<String> = s
                .resources
                .iter()
                .filter(|(_, u)| u.as_str() != "false")
                .map(|(r, u)| {
                    if u == "true" {
                        r.clone()
                    } else {
                        format!("{r}?")
                    }
                })
                .collect();
            out += &format!(
                "{:<32} {:<9} threads {:>3}  cpu {:>5.1}%  io {:>5.1}%  net {:>5.1}%  [{}]\n",
                s.name,
                s.scheduling,
                s.stats.counts.iter().max().copied().unwrap_or(0),
                s.cpu_share * 100.0,
                s.io_share * 100.0,
                s.network_share * 100.0,
                used.join(", ")
            );
        }
        if let Some(b) = &self.blocking {
            for (t, on) in &b.blocks_on {
                for s in on {
                    out += &format!("blocking: `{t}` blocks on `{s}`\n");
                }
            }
        }
        if let Some(e) = &self.blocking_error {
            out += &format!("blocking not probed: {e}\n");
        }
        for n in &self.null_alerts {
            out += &format!(
                "alert: NULL stage overly active: `{}` (pid {}, tid {}, title `{}`, state {}, wchan {})\n",
                n.name, n.pid, n.tid, n.title, n.state, if n.wchan.is_empty() { "-" } else { &n.wchan }
            );
        }
        out
    }
}
