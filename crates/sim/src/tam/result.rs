//! What a TAM run measured, and its JSON, CSV and HTML (the same outputs as other specs).

use std::io::{self, Write};
use std::path::Path;

use fairlane_plot::{Axis, Block, Page, Series, Table};
use serde::Serialize;
use serde_json::{json, Value};

use crate::report::{csv_dir, num, time_chart, Csv};

/// One client's measurements (after the warm-up).
#[derive(Clone, Debug, Serialize)]
pub struct ClientResult {
    /// Its name.
    pub name: String,
    /// Requests completed.
    pub completed: u64,
    /// Requests completed per request type (spec order).
    pub completed_by_type: Vec<u64>,
    /// Requests per second.
    pub throughput: f64,
    /// Mean latency (s).
    pub latency_mean: f64,
    /// Median latency (s).
    pub latency_p50: f64,
    /// 99th percentile (s).
    pub latency_p99: f64,
    /// 99.9th percentile (s).
    pub latency_p999: f64,
    /// Per interval: `(t, throughput /s, mean latency s, p99 latency s)` (warm-up included).
    pub series: Vec<(f64, f64, f64, f64)>,
}

/// One stage's measurements (after the warm-up).
#[derive(Clone, Debug, Serialize)]
pub struct StageResult {
    /// Its name.
    pub name: String,
    /// Its scheduler in this run.
    pub scheduler: String,
    /// Threads (`None`: on demand).
    pub threads: Option<u32>,
    /// Visits completed, per client.
    pub visits: Vec<u64>,
    /// Thread-seconds, per client: the stage's bandwidth given to each client.
    pub thread_seconds: Vec<f64>,
    /// Mean queue length at the sampling instants.
    pub queue_mean: f64,
    /// Longest queue.
    pub queue_max: u32,
    /// Mean threads blocked on a downstream stage.
    pub blocked_mean: f64,
    /// Per interval: `(t, queued, blocked threads, busy threads)`.
    pub series: Vec<(f64, u32, u32, u32)>,
}

/// One run of a TAM simulation.
#[derive(Clone, Debug, Serialize)]
pub struct TamRun {
    /// The sweep point's label (empty without a sweep).
    pub label: String,
    /// The scheduler given to the pluggable stages without their own.
    pub scheduler: String,
    /// Events processed.
    pub events: u64,
    /// Stage visits completed (warm-up included).
    pub visits: u64,
    /// Wall-clock seconds (the only field that is not deterministic).
    pub wall_seconds: f64,
    /// Simulated seconds.
    pub sim_seconds: f64,
    /// Per client, in spec order.
    pub clients: Vec<ClientResult>,
    /// Per stage, in model order.
    pub stages: Vec<StageResult>,
    /// Per host resource: `(name, utilization)`.
    pub resources: Vec<(String, f64)>,
}

/// `{"runs": [{"scheduler", "events", "visits", …, "clients": {NAME: {…}}, "stages": {…}}]}`,
/// with the point's `"label"` when the spec has a sweep.
pub fn summary_json(runs: &[TamRun]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut clients = serde_json::Map::new();
            for c in &r.clients {
                clients.insert(
                    c.name.clone(),
                    json!({
                        "completed": c.completed,
                        "throughput": num(c.throughput),
                        "latency_mean_s": num(c.latency_mean),
                        "latency_p50_s": num(c.latency_p50),
                        "latency_p99_s": num(c.latency_p99),
                        "latency_p999_s": num(c.latency_p999),
                    }),
                );
            }
            let mut stages = serde_json::Map::new();
            for s in &r.stages {
                let mut per = serde_json::Map::new();
                for (i, c) in r.clients.iter().enumerate() {
                    per.insert(
                        c.name.clone(),
                        json!({"visits": s.visits[i], "thread_seconds": num(s.thread_seconds[i])}),
                    );
                }
                stages.insert(
                    s.name.clone(),
                    json!({
                        "scheduler": s.scheduler,
                        "threads": s.threads,
                        "queue_mean": num(s.queue_mean),
                        "queue_max": s.queue_max,
                        "blocked_mean": num(s.blocked_mean),
                        "clients": per,
                    }),
                );
            }
            let resources: serde_json::Map<String, Value> = r
                .resources
                .iter()
                .map(|(n, u)| (n.clone(), num(*u)))
                .collect();
            let mut run = json!({
                "scheduler": r.scheduler,
                "events": r.events,
                "visits": r.visits,
                "wall_seconds": r.wall_seconds,
                "visits_per_second": r.visits as f64 / r.wall_seconds.max(1e-9),
                "sim_seconds": r.sim_seconds,
                "clients": clients,
                "stages": stages,
                "utilization": resources,
            });
            if !r.label.is_empty() {
                run["label"] = json!(r.label);
            }
            run
        })
        .collect();
    json!({ "runs": runs })
}

fn stem(r: &TamRun) -> String {
    crate::report::run_stem(&r.label, &r.scheduler)
}

/// Write `csv/SCHED-clients.csv`, `-client-series.csv`, `-stages.csv`, `-stage-series.csv`.
pub fn write_csv(dir: &Path, runs: &[TamRun]) -> io::Result<()> {
    let dir = csv_dir(dir)?;
    for r in runs {
        let stem = stem(r);
        let mut c = Csv::new(
            "client,completed,throughput,latency_mean_s,latency_p50_s,latency_p99_s,latency_p999_s",
        );
        for cl in &r.clients {
            c.row(&[
                &cl.name,
                &cl.completed,
                &cl.throughput,
                &cl.latency_mean,
                &cl.latency_p50,
                &cl.latency_p99,
                &cl.latency_p999,
            ]);
        }
        c.write(&dir, &stem, "clients")?;
        let mut c = Csv::new("t,client,throughput,latency_mean_s,latency_p99_s");
        for cl in &r.clients {
            for (t, x, m, p) in &cl.series {
                c.row(&[t, &cl.name, x, m, p]);
            }
        }
        c.write(&dir, &stem, "client-series")?;
        let mut c = Csv::new(
            "stage,scheduler,client,visits,thread_seconds,queue_mean,queue_max,blocked_mean",
        );
        for st in &r.stages {
            for (i, cl) in r.clients.iter().enumerate() {
                c.row(&[
                    &st.name,
                    &st.scheduler,
                    &cl.name,
                    &st.visits[i],
                    &st.thread_seconds[i],
                    &st.queue_mean,
                    &st.queue_max,
                    &st.blocked_mean,
                ]);
            }
        }
        c.write(&dir, &stem, "stages")?;
        let mut c = Csv::new("t,stage,queued,blocked,busy");
        for st in &r.stages {
            for (t, q, b, u) in &st.series {
                c.row(&[t, &st.name, q, b, u]);
            }
        }
        c.write(&dir, &stem, "stage-series")?;
    }
    Ok(())
}

/// Write `index.html`: per run, the clients' table and throughput and p99 latency over
/// time, and the stages' table with queue and blocked threads over time.
pub fn write_html(dir: &Path, title: &str, description: &str, runs: &[TamRun]) -> io::Result<()> {
    let mut page = Page::new(title).intro(format!(
        "<p>{}</p><p>CSV files with every number are in <code>csv/</code>.</p>",
        fairlane_plot::escape(description)
    ));
    for r in runs {
        let heading = if r.label.is_empty() {
            format!("Pluggable stages: {}", r.scheduler)
        } else {
            format!("Point {}, pluggable stages: {}", r.label, r.scheduler)
        };
        let mut blocks = client_blocks(r);
        blocks.extend(stage_blocks(r));
        page = page.section(heading, blocks);
    }
    std::fs::create_dir_all(dir)?;
    page.write(dir.join("index.html"))
}

/// A run's clients: their table, then throughput and p99 latency over time.
fn client_blocks(r: &TamRun) -> Vec<Block> {
    let mut ct = Table::new([
        "client",
        "completed",
        "req/s",
        "mean ms",
        "p50 ms",
        "p99 ms",
    ]);
    for c in &r.clients {
        ct.push_row([
            c.name.clone(),
            c.completed.to_string(),
            format!("{:.1}", c.throughput),
            format!("{:.2}", c.latency_mean * 1e3),
            format!("{:.2}", c.latency_p50 * 1e3),
            format!("{:.2}", c.latency_p99 * 1e3),
        ]);
    }
    let mut tput = time_chart("Throughput", Axis::linear("requests/s"));
    let mut lat = time_chart("p99 latency", Axis::linear("ms"));
    for c in &r.clients {
        tput = tput.series(Series::new(
            c.name.clone(),
            c.series.iter().map(|x| (x.0, x.1)).collect(),
        ));
        lat = lat.series(Series::new(
            c.name.clone(),
            c.series
                .iter()
                .filter(|x| x.3.is_finite())
                .map(|x| (x.0, x.3 * 1e3))
                .collect(),
        ));
    }
    vec![
        Block::Table(ct),
        Block::Svg(tput.to_svg()),
        Block::Svg(lat.to_svg()),
    ]
}

/// A run's stages: their table, then queued requests and blocked threads over time.
fn stage_blocks(r: &TamRun) -> Vec<Block> {
    let mut st = Table::new([
        "stage",
        "scheduler",
        "threads",
        "mean queue",
        "max queue",
        "mean blocked",
    ]);
    for s in &r.stages {
        st.push_row([
            s.name.clone(),
            s.scheduler.clone(),
            s.threads.map_or("on demand".into(), |n| n.to_string()),
            format!("{:.2}", s.queue_mean),
            s.queue_max.to_string(),
            format!("{:.2}", s.blocked_mean),
        ]);
    }
    let mut q = time_chart("Queued requests", Axis::linear("requests"));
    let mut b = time_chart("Blocked threads", Axis::linear("threads"));
    for s in &r.stages {
        q = q.series(Series::new(
            s.name.clone(),
            s.series.iter().map(|x| (x.0, x.1 as f64)).collect(),
        ));
        b = b.series(Series::new(
            s.name.clone(),
            s.series.iter().map(|x| (x.0, x.2 as f64)).collect(),
        ));
    }
    vec![
        Block::Table(st),
        Block::Svg(q.to_svg()),
        Block::Svg(b.to_svg()),
    ]
}

/// Per run: each client's throughput and latency, then each stage's queue and blocking
/// (what `fairlane simulate` prints).
pub fn print(out: &mut dyn Write, runs: &[TamRun]) -> io::Result<()> {
    for r in runs {
        let point = if r.label.is_empty() {
            String::new()
        } else {
            format!("point {}, ", r.label)
        };
        writeln!(
            out,
            "== {point}pluggable stages: {} ({} stage visits, {} events in {:.2}s)",
            r.scheduler, r.visits, r.events, r.wall_seconds
        )?;
        writeln!(
            out,
            "{:<16} {:>10} {:>10} {:>10} {:>10}",
            "client", "req/s", "mean ms", "p50 ms", "p99 ms"
        )?;
        for c in &r.clients {
            writeln!(
                out,
                "{:<16} {:>10.1} {:>10.3} {:>10.3} {:>10.3}",
                c.name,
                c.throughput,
                c.latency_mean * 1e3,
                c.latency_p50 * 1e3,
                c.latency_p99 * 1e3
            )?;
        }
        writeln!(
            out,
            "{:<24} {:<14} {:>8} {:>10} {:>10}",
            "stage", "scheduler", "threads", "mean queue", "blocked"
        )?;
        for s in &r.stages {
            writeln!(
                out,
                "{:<24} {:<14} {:>8} {:>10.2} {:>10.2}",
                s.name,
                s.scheduler,
                s.threads.map_or("demand".to_string(), |n| n.to_string()),
                s.queue_mean,
                s.blocked_mean
            )?;
        }
    }
    Ok(())
}
