//! Datadriven scenario tests, in the style of CockroachDB's admission-control testdata: each
//! file under `tests/testdata/` is a list of commands and the output they must produce,
//! readable without opening this code.
//!
//! ```text
//! # A comment.
//! enqueue tenant=0 cost=1 label=a1
//! ----
//! queued a1
//! ```
//!
//! A block is one command line, a `----` line and the expected output up to the next blank
//! line. To accept new output after a deliberate change, run with `REWRITE=1`
//! (`REWRITE=1 cargo test -p fairlane-core --test scenarios`): the files are rewritten with
//! what the scheduler did, for review in the diff.
//!
//! Commands (arguments are `key=value`; times and costs are plain numbers):
//! * `init preset=<name> workers=<n> [gps=<capacity>]`: a core scheduler by preset.
//! * `init reserve=<ldf|drr|edf|none> cores=<n> interval=<t> [cap=<%>]`: a reservation
//!   scheduler; then `reserve tenant=<id> res=<%> max=<%>` sets a tenant's terms.
//! * `weight tenant=<id> w=<φ>`, `target tenant=<id> t=<time>`, `workers n=<n>`.
//! * `enqueue tenant=<id> [class=<c>] [cost=<c>] label=<l>[,<l>…]`: one request per label.
//!   For the LLM schedulers (VTC), `input=<n>` instead of `cost=` makes a request with an
//!   `n`-token prompt: its cost is `w_p·n` with the paper's token prices (`w_p = 1`,
//!   `w_q = 2`, [`TokenCost::PAPER`]).
//! * `generate label=<l>[,<l>…] [n=<k>]`: each running request generates `k` (default 1)
//!   tokens and reports its cumulative cost `w_p·input + w_q·output` by `progress`; prints
//!   what each reported. `finish label=<l>[,<l>…]` completes them with that cost.
//! * `dequeue worker=<w>`: prints `run <label> tenant=<id> charged=<c>`, `empty` or
//!   `retry at <t>` (`retry after next completion` for ∞).
//! * `progress label=<l> used=<u>`, `complete label=<l> used=<u>`, `cancel label=<l>`.
//! * `advance by=<dt>`: moves `now`.
//! * `run until=<t>`: every worker of rate 1 runs what it is given for its label's true cost
//!   (the `cost=` given, or `true=`), completions at a time handled in worker order before
//!   idle workers ask in worker order; prints one row per worker, one column per time unit
//!   (the way the 2DFQ paper draws Fig. 5 and 6).
//! * `print`: `now`, totals, the virtual time and each known tenant's view.
//!
//! Priority levels (`fairlane_core::levels`):
//! * `levels preset=<name> workers=<n> [period=<t>] [early=<true|false>] [strict]
//!   [catch_all=<name>]`: start a configuration (`levels reload preset=<name>`: one for the
//!   running scheduler, which keeps its queue) (ServerCL = `workers`, each level's fair
//!   scheduler the preset, APF's borrowing adjusted every `period` or strict bands);
//! * `level name=<n> [shares=<s>] [lendable=<%>] [borrow=<%>] [exempt] [queue=<n>]
//!   [preset=<name>]`: add a level below the others; `build`: build it; `reload`: give it
//!   to the running scheduler instead (a reload: queued requests stay);
//! * `enqueue … level=<name> [flow=<d>]`: at a level, in flow (tenant, d); `dequeue` then
//!   prints the level too;
//! * `show`: one line per level: nominal, lendable, borrowing limit, min, max, current
//!   limit, seats in use, queued, lent and borrowed, and the last period's seat demand;
//! * `run` also wakes its idle workers at a `retry at` time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fairlane_core::levels::{LevelConfig, LevelsConfig, Sharing};
use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};
use fairlane_core::{
    Config, Decision, LevelId, Request, Scheduler, TenantId, Ticket, TokenCost, VirtualClock,
};

struct Job {
    label: String,
    cost: f64,
}

struct Running {
    ticket: Ticket,
    label: String,
    start: f64,
    end: f64,
    cost: f64,
}

struct Scenario {
    sched: Option<Box<dyn Scheduler<Job> + Send>>,
    /// A level configuration being written (`levels`, `level`) until `build`.
    pending: Option<LevelsConfig>,
    reserve: Option<fairlane_core::reserve::ReserveScheduler<Job>>,
    now: f64,
    /// Dispatched, not completed: label → ticket.
    tickets: BTreeMap<String, Ticket>,
    /// Queued: label → ticket.
    queued: BTreeMap<String, Ticket>,
    workers: Vec<Option<Running>>,
    /// (worker, label, start, end) of everything `run` executed.
    log: Vec<(usize, String, f64, f64)>,
    /// Requests made with `input=`: label → (prompt tokens, tokens generated so far).
    tokens: BTreeMap<String, (u64, u64)>,
}

fn args(line: &str) -> (String, BTreeMap<String, String>) {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or_default().to_string();
    let kv = words
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (w.to_string(), String::new()),
        })
        .collect();
    (cmd, kv)
}

fn num(kv: &BTreeMap<String, String>, key: &str) -> Result<f64, String> {
    let v = kv.get(key).ok_or(format!("missing {key}="))?;
    v.parse::<f64>().map_err(|e| format!("{key}={v}: {e}"))
}

fn opt(kv: &BTreeMap<String, String>, key: &str) -> Result<Option<f64>, String> {
    kv.get(key).map(|_| num(kv, key)).transpose()
}

/// Numbers as short as they are exact enough to read: up to 4 decimals, no trailing zeros.
fn fmt(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

impl Scenario {
    fn new() -> Self {
        Scenario {
            sched: None,
            pending: None,
            reserve: None,
            now: 0.0,
            tickets: BTreeMap::new(),
            queued: BTreeMap::new(),
            workers: Vec::new(),
            log: Vec::new(),
            tokens: BTreeMap::new(),
        }
    }

    fn s(&mut self) -> Result<&mut dyn Scheduler<Job>, String> {
        if let Some(r) = self.reserve.as_mut() {
            return Ok(r);
        }
        match self.sched.as_mut() {
            Some(s) => Ok(s.as_mut()),
            None => Err("no scheduler: start with init".into()),
        }
    }

    fn view(&self) -> Option<&dyn Scheduler<Job>> {
        if let Some(r) = self.reserve.as_ref() {
            return Some(r);
        }
        self.sched.as_deref().map(|s| s as &dyn Scheduler<Job>)
    }

    fn exec(&mut self, line: &str) -> Result<String, String> {
        let (cmd, kv) = args(line);
        let now = self.now;
        let tenant = || num(&kv, "tenant").map(|t| TenantId(t as u64));
        let label = || kv.get("label").cloned().ok_or("missing label=".to_string());
        let err = |e: fairlane_core::Error| e.to_string();
        if let Some(out) = self.levels_command(&cmd, &kv)? {
            return Ok(out);
        }
        match cmd.as_str() {
            "init" => {
                *self = Scenario::new(); // a fresh scheduler, time 0, nothing run
                if let Some(policy) = kv.get("reserve") {
                    let policy = match policy.as_str() {
                        "ldf" => Policy::ldf(),
                        "drr" => Policy::drr(),
                        "edf" => Policy::Edf,
                        "none" => Policy::BestEffort,
                        p => return Err(format!("reserve={p}: one of ldf, drr, edf, none")),
                    };
                    let mut c = ReserveConfig::new(policy)
                        .cores(num(&kv, "cores")? as usize)
                        .interval(num(&kv, "interval")?);
                    if let Some(cap) = opt(&kv, "cap")? {
                        c = c.utilization_cap(cap);
                    }
                    self.reserve = Some(c.build().map_err(err)?);
                } else {
                    let preset = kv.get("preset").ok_or("missing preset= or reserve=")?;
                    let mut c = Config::preset(preset)
                        .map_err(err)?
                        .workers(num(&kv, "workers")? as usize);
                    if let Some(capacity) = opt(&kv, "gps")? {
                        c = c.clock(VirtualClock::Gps { capacity });
                    }
                    self.sched = Some(c.build().map_err(err)?);
                }
                let n = self.s()?.workers();
                self.workers = (0..n).map(|_| None).collect();
                Ok(format!("{} on {n} workers", self.s()?.name()))
            }
            "reserve" => {
                let r = self
                    .reserve
                    .as_mut()
                    .ok_or("reserve needs init reserve=…")?;
                let terms = Reservation::new(num(&kv, "res")?, num(&kv, "max")?);
                r.set_reservation(tenant()?, terms, now).map_err(err)?;
                Ok("ok".into())
            }
            "weight" => {
                let (t, w) = (tenant()?, num(&kv, "w")?);
                self.s()?.set_weight(t, w, now).map_err(err)?;
                Ok("ok".into())
            }
            "target" => {
                let (t, target) = (tenant()?, opt(&kv, "t")?);
                self.s()?.set_target(t, target, now).map_err(err)?;
                Ok("ok".into())
            }
            "workers" => {
                let n = num(&kv, "n")? as usize;
                self.s()?.set_workers(n).map_err(err)?;
                self.workers.resize_with(n.max(self.workers.len()), || None);
                Ok("ok".into())
            }
            "enqueue" => {
                let t = tenant()?;
                let class = opt(&kv, "class")?.unwrap_or(0.0) as u32;
                let input = opt(&kv, "input")?.map(|n| n as u64);
                let cost = match input {
                    Some(n) => Some(TokenCost::PAPER.charge(n, 0)),
                    None => opt(&kv, "cost")?,
                };
                let truth = opt(&kv, "true")?.or(cost).unwrap_or(1.0);
                let level = self.level_id(&kv)?;
                let flow = opt(&kv, "flow")?.unwrap_or(0.0) as u64;
                let mut out = Vec::new();
                for l in label()?.split(',') {
                    let mut req = Request::new(
                        t,
                        class,
                        Job {
                            label: l.to_string(),
                            cost: truth,
                        },
                    );
                    if let Some(c) = cost {
                        req = req.with_cost(c);
                    }
                    req = req.at_level(level).distinguished(flow);
                    let ticket = self.s()?.enqueue(req, now).map_err(err)?;
                    self.queued.insert(l.to_string(), ticket);
                    if let Some(n) = input {
                        self.tokens.insert(l.to_string(), (n, 0));
                    }
                    out.push(l.to_string());
                }
                Ok(format!("queued {}", out.join(" ")))
            }
            "dequeue" => {
                let w = num(&kv, "worker")? as usize;
                let d = self.s()?.dequeue(w, now).map_err(err)?;
                Ok(self.decided(d))
            }
            "progress" | "complete" => {
                let l = label()?;
                let used = num(&kv, "used")?;
                let ticket = *self.tickets.get(&l).ok_or(format!("{l} is not running"))?;
                if cmd == "progress" {
                    self.s()?.progress(ticket, used, now).map_err(err)?;
                } else {
                    self.s()?.complete(ticket, used, now).map_err(err)?;
                    self.tickets.remove(&l);
                }
                Ok("ok".into())
            }
            "cancel" => {
                let l = label()?;
                let ticket = *self.queued.get(&l).ok_or(format!("{l} is not queued"))?;
                self.s()?.cancel(ticket, now).map_err(err)?;
                self.queued.remove(&l);
                Ok(format!("cancelled {l}"))
            }
            "generate" | "finish" => {
                let n = opt(&kv, "n")?.unwrap_or(1.0) as u64;
                let mut out = Vec::new();
                for l in label()?.split(',') {
                    let ticket = *self.tickets.get(l).ok_or(format!("{l} is not running"))?;
                    let (input, output) = self
                        .tokens
                        .get_mut(l)
                        .ok_or(format!("{l} was not enqueued with input="))?;
                    if cmd == "generate" {
                        *output += n;
                    }
                    let used = TokenCost::PAPER.charge(*input, *output);
                    let what = format!("{l} output={output} used={}", fmt(used));
                    if cmd == "generate" {
                        self.s()?.progress(ticket, used, now).map_err(err)?;
                    } else {
                        self.s()?.complete(ticket, used, now).map_err(err)?;
                        self.tickets.remove(l);
                    }
                    out.push(what);
                }
                Ok(out.join("\n"))
            }
            "advance" => {
                self.now += num(&kv, "by")?;
                Ok(format!("now={}", fmt(self.now)))
            }
            "run" => self.run(num(&kv, "until")?),
            "print" => Ok(self.print()),
            c => Err(format!("unknown command {c:?}")),
        }
    }

    fn decided(&mut self, d: Decision<Job>) -> String {
        match d {
            Decision::Run(d) => {
                let l = d.request.payload.label.clone();
                self.queued.remove(&l);
                self.tickets.insert(l.clone(), d.ticket);
                let level = self.view().and_then(|s| {
                    let views = s.levels();
                    let v = views.get(d.request.level.0 as usize)?;
                    Some(format!(" level={}", v.name))
                });
                format!(
                    "run {l} tenant={}{} charged={}",
                    d.request.tenant.0,
                    level.unwrap_or_default(),
                    fmt(d.charged)
                )
            }
            Decision::Empty => "empty".into(),
            Decision::RetryAt(t) if t.is_infinite() => "retry after next completion".into(),
            Decision::RetryAt(t) => format!("retry at {}", fmt(t)),
        }
    }

    fn run(&mut self, until: f64) -> Result<String, String> {
        loop {
            let mut retry = f64::INFINITY;
            let asking = self.s()?.workers().min(self.workers.len());
            for w in 0..asking {
                if self.workers[w].is_some() {
                    continue;
                }
                let now = self.now;
                let d = self.s()?.dequeue(w, now).map_err(|e| e.to_string())?;
                if let Decision::RetryAt(t) = d {
                    if t > now {
                        retry = retry.min(t);
                    }
                }
                if let Decision::Run(d) = d {
                    let l = d.request.payload.label.clone();
                    self.queued.remove(&l);
                    let cost = d.request.payload.cost;
                    self.workers[w] = Some(Running {
                        ticket: d.ticket,
                        label: l,
                        start: now,
                        end: now + cost,
                        cost,
                    });
                }
            }
            let next = self
                .workers
                .iter()
                .flatten()
                .map(|r| r.end)
                .fold(retry, f64::min);
            if next.is_nan() || next > until {
                break;
            }
            self.now = next;
            for w in 0..self.workers.len() {
                if self.workers[w].as_ref().is_some_and(|r| r.end == next) {
                    let r = self.workers[w].take().expect("checked");
                    let now = self.now;
                    self.s()?
                        .complete(r.ticket, r.cost, now)
                        .map_err(|e| e.to_string())?;
                    self.log.push((w, r.label, r.start, r.end));
                }
            }
        }
        self.now = self.now.max(until);
        let mut rows = vec![vec![String::from("."); until as usize]; self.workers.len()];
        let running = self
            .workers
            .iter()
            .enumerate()
            .filter_map(|(w, r)| r.as_ref().map(|r| (w, r.label.clone(), r.start, r.end)));
        for (w, l, start, end) in self.log.iter().cloned().chain(running) {
            let end = (end.ceil() as usize).min(until as usize);
            for cell in rows[w].iter_mut().take(end).skip(start as usize) {
                cell.clone_from(&l);
            }
        }
        let width = rows.iter().flatten().map(String::len).max().unwrap_or(1);
        let mut out = String::new();
        for (w, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(|c| format!("{c:<width$}")).collect();
            let _ = writeln!(out, "W{w}: {}", cells.join(" ").trim_end());
        }
        Ok(out.trim_end().to_string())
    }

    /// The commands of priority levels (`levels`, `level`, `build`, `show`); `None` for the
    /// others.
    fn levels_command(
        &mut self,
        cmd: &str,
        kv: &BTreeMap<String, String>,
    ) -> Result<Option<String>, String> {
        let err = |e: fairlane_core::Error| e.to_string();
        let preset = |kv: &BTreeMap<String, String>| -> Result<Option<Config>, String> {
            kv.get("preset")
                .map(|p| Config::preset(p).map_err(err))
                .transpose()
        };
        match cmd {
            "levels" if kv.contains_key("reload") => {
                let s = self
                    .sched
                    .as_ref()
                    .ok_or("levels reload needs a scheduler")?;
                let base = preset(kv)?.ok_or("missing preset=")?;
                self.pending = Some(LevelsConfig::new(base.workers(s.workers())));
            }
            "levels" => {
                *self = Scenario::new();
                let base = preset(kv)?.ok_or("missing preset=")?;
                let mut c = LevelsConfig::new(base.workers(num(kv, "workers")? as usize));
                if let Some(period) = opt(kv, "period")? {
                    c = c.adjust_period(period);
                }
                if let Some(early) = kv.get("early") {
                    let early_reclaim = early == "true";
                    if let Sharing::Borrowing { period, .. } = c.sharing {
                        c.sharing = Sharing::Borrowing {
                            period,
                            early_reclaim,
                        };
                    }
                }
                if kv.contains_key("strict") {
                    c.sharing = Sharing::Strict;
                }
                if let Some(name) = kv.get("catch_all") {
                    c = c.catch_all(name.clone());
                }
                self.pending = Some(c);
            }
            "level" => {
                let name = kv.get("name").ok_or("missing name=")?.clone();
                let mut l = if kv.contains_key("exempt") {
                    LevelConfig::exempt(name)
                } else {
                    LevelConfig::new(name, num(kv, "shares")?)
                };
                l.lendable_percent = opt(kv, "lendable")?.unwrap_or(0.0);
                l.borrowing_limit_percent = opt(kv, "borrow")?;
                l.queue_limit = opt(kv, "queue")?.map(|q| q as usize);
                l.scheduler = preset(kv)?;
                let c = self.pending.take().ok_or("level needs levels … first")?;
                self.pending = Some(c.level(l));
            }
            "build" => {
                let c = self.pending.take().ok_or("build needs levels … first")?;
                self.sched = Some(c.build().map_err(err)?);
                let n = self.s()?.workers();
                self.workers = (0..n).map(|_| None).collect();
                return Ok(Some(self.show()));
            }
            "reload" => {
                let c = self.pending.take().ok_or("reload needs levels … first")?;
                self.s()?.set_levels(&c).map_err(err)?;
                return Ok(Some(self.show()));
            }
            "show" => return Ok(Some(self.show())),
            _ => return Ok(None),
        }
        Ok(Some("ok".into()))
    }

    /// The level named by `level=` ([`LevelId::CATCH_ALL`] without one).
    fn level_id(&self, kv: &BTreeMap<String, String>) -> Result<LevelId, String> {
        let Some(name) = kv.get("level") else {
            return Ok(LevelId::CATCH_ALL);
        };
        let s = self.view().ok_or("no scheduler")?;
        let views = s.levels();
        let v = views.iter().find(|v| v.name == name.as_str());
        Ok(v.ok_or(format!("no level {name:?}"))?.id)
    }

    fn show(&self) -> String {
        let Some(s) = self.view() else {
            return "no scheduler".into();
        };
        let mut out = format!("now={} ServerCL={}", fmt(self.now), s.workers());
        for v in s.levels() {
            let _ = write!(out, "\n{}: ", v.name);
            if v.exempt {
                let _ = write!(out, "exempt in_use={} queued={}", v.seats_in_use, v.queued);
                continue;
            }
            let d = v.demand;
            let _ = write!(
                out,
                "nominal={} lendable={} borrow={} min={} max={} current={} in_use={} queued={} \
                 lent={} borrowed={} demand(avg={} hwm={} smoothed={})",
                v.nominal,
                v.lendable,
                v.borrowing_limit,
                v.min,
                v.max,
                v.current,
                v.seats_in_use,
                v.queued,
                v.lent(),
                v.borrowed(),
                fmt(d.average),
                fmt(d.high_watermark),
                fmt(d.smoothed)
            );
        }
        out
    }

    fn print(&self) -> String {
        let Some(s) = self.view() else {
            return "no scheduler".into();
        };
        let mut out = format!(
            "now={} queued={} running={}",
            fmt(self.now),
            s.queued(),
            s.running()
        );
        if let Some(v) = s.virtual_time() {
            let _ = write!(out, " v={}", fmt(v));
        }
        for id in 0..64u64 {
            if let Some(t) = s.tenant(TenantId(id)) {
                let _ = write!(
                    out,
                    "\ntenant {id}: weight={} queued={} running={} active={} tag={}",
                    fmt(t.weight),
                    t.queued,
                    t.running,
                    t.active,
                    fmt(t.tag)
                );
            }
        }
        out
    }
}

/// Run one file; returns its text with the actual outputs.
fn run_file(path: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut failures = Vec::new();
    let mut sc = Scenario::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            i += 1;
            continue;
        }
        let cmd = line.to_string();
        i += 1;
        assert!(
            lines.get(i) == Some(&"----"),
            "{}:{}: `{cmd}` must be followed by a ---- line",
            path.display(),
            i + 1
        );
        i += 1;
        let mut expected = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            expected.push(lines[i]);
            i += 1;
        }
        let actual = sc.exec(&cmd).unwrap_or_else(|e| format!("error: {e}"));
        if actual != expected.join("\n") {
            failures.push(format!(
                "{}: `{cmd}`\n  expected:\n{}\n  actual:\n{}",
                path.display(),
                expected.join("\n"),
                actual
            ));
        }
        let _ = write!(out, "{cmd}\n----\n{actual}\n");
    }
    (out, failures)
}

fn testdata() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

#[test]
fn scenarios() {
    let rewrite = std::env::var_os("REWRITE").is_some();
    let files = testdata();
    assert!(files.len() >= 3, "testdata files: {files:?}");
    let mut failures = Vec::new();
    for f in &files {
        let (text, failed) = run_file(f);
        if rewrite {
            std::fs::write(f, text).unwrap();
        } else {
            failures.extend(failed);
        }
    }
    assert!(
        failures.is_empty(),
        "{} block(s) differ (REWRITE=1 accepts the actual output):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
