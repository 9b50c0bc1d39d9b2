//! Outputs of a worker-pool or black-box spec: the JSON summary, CSV files and an HTML page with SVG
//! plots. Everything here is deterministic except `wall_seconds` in the JSON.

use std::io::{self, Write};
use std::path::Path;

use fairlane_plot::{
    cdf, fmt_num, Axis, BarChart, Block, LineChart, Occupancy, Series, Style, Table,
};
use serde_json::{json, Map, Value};

use super::engine::RunResult;
use crate::metrics::TenantResult;
use crate::report::{csv_dir, group_by_label, long_rows, run_stem, time_chart, write_page, Csv};

/// `{"runs": [{"scheduler", "label", "events", "wall_seconds", …, "tenants": {NAME: {…}}}]}`.
pub fn summary_json(results: &[RunResult]) -> Value {
    let runs: Vec<Value> = results
        .iter()
        .map(|r| {
            let mut tenants = Map::new();
            for t in &r.tenants {
                tenants.insert(t.name.clone(), tenant_json(t));
            }
            if let Some(bb) = &r.blackbox {
                for b in &bb.tenants {
                    if let Some(Value::Object(t)) = tenants.get_mut(&b.name) {
                        t.insert("target".into(), json!(b.target));
                        t.insert("intervals".into(), json!(b.intervals));
                        t.insert("intervals_met".into(), json!(b.intervals_met));
                    }
                }
            }
            let mut run = json!({
                "scheduler": r.scheduler,
                "label": r.label,
                "events": r.events,
                "wall_seconds": r.wall_seconds,
                "events_per_second": r.events as f64 / r.wall_seconds.max(1e-9),
                "sim_seconds": r.sim_seconds,
                "utilization": r.utilization,
                "gini_mean": r.gini_mean,
                "tenants": tenants,
            });
            if let Some(bb) = &r.blackbox {
                run["blackbox"] = json!({
                    "components": bb.components,
                    "mean_depth": bb.mean_depth,
                    "mean_outstanding": bb.mean_outstanding,
                    "max_outstanding": bb.max_outstanding,
                    "over_depth": bb.over_depth,
                });
            }
            run
        })
        .collect();
    json!({ "runs": runs })
}

fn tenant_json(t: &TenantResult) -> Value {
    json!({
        "group": t.group,
        "weight": t.weight,
        "arrived": t.arrived,
        "completed": t.completed,
        "work": t.work,
        "mean_cost": t.mean_cost,
        "lag_std": t.lag_std,
        "lag_std_units": t.lag_std_units,
        "lag_mean": t.lag_mean,
        "lag_min": t.lag_min,
        "lag_max": t.lag_max,
        "latency_p50": t.latency_p50,
        "latency_p99": t.latency_p99,
        "latency_p999": t.latency_p999,
        "latency_mean": t.latency_mean,
    })
}

fn file_stem(r: &RunResult) -> String {
    run_stem(&r.label, &r.scheduler)
}

/// Write `csv/STEM-tenants.csv`, `-series.csv`, `-gini.csv` and `-occupancy.csv` per run.
pub fn write_csv(dir: &Path, results: &[RunResult]) -> io::Result<()> {
    let dir = csv_dir(dir)?;
    for r in results {
        let stem = file_stem(r);
        let mut c = Csv::new(
            "tenant,group,weight,arrived,completed,work,mean_cost,lag_std_s,lag_mean_s,lag_min_s,lag_max_s,latency_p50_s,latency_p99_s,latency_p999_s,latency_mean_s",
        );
        for t in &r.tenants {
            c.row(&[
                &t.name,
                &t.group,
                &t.weight,
                &t.arrived,
                &t.completed,
                &t.work,
                &t.mean_cost,
                &t.lag_std,
                &t.lag_mean,
                &t.lag_min,
                &t.lag_max,
                &t.latency_p50,
                &t.latency_p99,
                &t.latency_p999,
                &t.latency_mean,
            ]);
        }
        c.write(&dir, &stem, "tenants")?;
        let mut c = Csv::new("t,tenant,service_units_per_s,lag_s");
        for ts in &r.series {
            for (a, b) in ts.service.iter().zip(&ts.lag) {
                c.row(&[&a.0, &ts.name, &a.1, &b.1]);
            }
        }
        c.write(&dir, &stem, "series")?;
        Csv::of_points("t,gini", &r.gini).write(&dir, &stem, "gini")?;
        let mut c = Csv::new("t,worker,cost");
        let occ = &r.occupancy;
        for (w, row) in occ.cells.iter().enumerate() {
            for (i, cost) in row.iter().enumerate() {
                let t = occ.t0 + i as f64 * occ.dt;
                match cost {
                    Some(cost) => c.row(&[&t, &w, cost]),
                    None => c.row(&[&t, &w, &""]),
                }
            }
        }
        c.write(&dir, &stem, "occupancy")?;
        if let Some(bb) = &r.blackbox {
            let mut response = Csv::new("t,tenant,mean_response_s");
            let mut throughput = Csv::new("t,tenant,completions_per_s");
            for t in &bb.tenants {
                response.named_points(&t.name, &t.response);
                throughput.named_points(&t.name, &t.throughput);
            }
            response.write(&dir, &stem, "response")?;
            throughput.write(&dir, &stem, "throughput")?;
            Csv::of_points("t,depth", &bb.depth).write(&dir, &stem, "depth")?;
        }
    }
    Ok(())
}

/// Tenants worth a row or a bar: every tracked tenant, then the first of each group, at most
/// `max`.
pub fn representatives(r: &RunResult, tracked: &[String], max: usize) -> Vec<usize> {
    let mut out: Vec<usize> = tracked
        .iter()
        .filter_map(|n| r.tenants.iter().position(|t| &t.name == n))
        .collect();
    let mut seen: Vec<&str> = Vec::new();
    for (i, t) in r.tenants.iter().enumerate() {
        if out.len() >= max {
            break;
        }
        if !seen.contains(&t.group.as_str()) {
            seen.push(&t.group);
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out.truncate(max);
    out
}

/// The charts and tables of one point (the runs of every scheduler on one scenario).
pub fn point_blocks(runs: &[&RunResult]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let Some(first) = runs.first() else {
        return blocks;
    };
    let tracked: Vec<String> = first.series.iter().map(|s| s.name.clone()).collect();
    if first.blackbox.is_some() {
        blocks.extend(blackbox_blocks(runs, &tracked));
    }
    for name in &tracked {
        let mut service = time_chart(
            format!("Service received by {name} (per sampling interval)"),
            Axis::linear("units / s"),
        );
        let mut lag = time_chart(
            format!("Service lag of {name} against GPS (positive: behind)"),
            Axis::linear("lag (s of one worker)"),
        );
        for r in runs {
            if let Some(s) = r.series.iter().find(|s| &s.name == name) {
                service =
                    service.series(Series::new(&r.scheduler, s.service.clone()).style(Style::Step));
                lag = lag.series(Series::new(&r.scheduler, s.lag.clone()));
            }
        }
        blocks.push(Block::Svg(service.to_svg()));
        blocks.push(Block::Svg(lag.to_svg()));
    }
    let c = lag_sigma_cdf(runs, "CDF of service-lag σ across tenants");
    blocks.push(Block::Svg(c.to_svg()));

    let reps = representatives(first, &tracked, 24);
    let cats: Vec<String> = reps
        .iter()
        .map(|&i| first.tenants[i].name.clone())
        .collect();
    let mut bars = BarChart::new("p99 latency per tenant", cats.clone(), Axis::log("seconds"));
    for r in runs {
        bars = bars.group(
            &r.scheduler,
            reps.iter().map(|&i| r.tenants[i].latency_p99).collect(),
        );
    }
    blocks.push(Block::Svg(bars.to_svg()));

    let mut g = time_chart(
        "Gini index across tenants (service over GPS entitlement, per interval)",
        Axis::linear("Gini").range(0.0, 1.0),
    );
    for r in runs {
        g = g.series(Series::new(&r.scheduler, r.gini.clone()));
    }
    blocks.push(Block::Svg(g.to_svg()));

    for r in runs {
        let title = format!(
            "Thread occupancy under {}: cost of the running request",
            r.scheduler
        );
        blocks.push(Block::Svg(occupancy_chart(r, title).to_svg()));
    }

    let mut headers = vec!["tenant".to_string(), "completed".into()];
    for r in runs {
        headers.push(format!("lag σ (s) {}", r.scheduler));
    }
    for r in runs {
        headers.push(format!("p99 (s) {}", r.scheduler));
    }
    let mut table = Table::new(headers);
    for &i in &reps {
        let mut row = vec![
            first.tenants[i].name.clone(),
            first.tenants[i].completed.to_string(),
        ];
        row.extend(runs.iter().map(|r| fmt_num(r.tenants[i].lag_std)));
        row.extend(runs.iter().map(|r| fmt_num(r.tenants[i].latency_p99)));
        table.push_row(row);
    }
    blocks.push(Block::Table(table));
    blocks
}

/// Black-box runs: each tracked tenant's mean response time and throughput per interval,
/// and the depth D over time.
fn blackbox_blocks(runs: &[&RunResult], tracked: &[String]) -> Vec<Block> {
    let mut blocks = Vec::new();
    for name in tracked {
        let mut rt = time_chart(
            format!("Mean response time of {name} per interval"),
            Axis::log("seconds"),
        );
        let mut tp = time_chart(
            format!("Throughput of {name} per interval"),
            Axis::linear("requests / s"),
        );
        for r in runs {
            if let Some(t) = r
                .blackbox
                .as_ref()
                .and_then(|b| b.tenants.iter().find(|t| &t.name == name))
            {
                rt = rt.series(Series::new(&r.scheduler, t.response.clone()));
                tp = tp.series(Series::new(&r.scheduler, t.throughput.clone()).style(Style::Step));
            }
        }
        blocks.push(Block::Svg(rt.to_svg()));
        blocks.push(Block::Svg(tp.to_svg()));
    }
    let mut d = time_chart("Depth D (issue slots)", Axis::linear("D"));
    for r in runs {
        if let Some(b) = &r.blackbox {
            d = d.series(Series::new(&r.scheduler, b.depth.clone()).style(Style::Step));
        }
    }
    blocks.push(Block::Svg(d.to_svg()));
    blocks
}

/// The CDF of service-lag σ across a point's tenants, one line per scheduler.
pub fn lag_sigma_cdf(runs: &[&RunResult], title: &str) -> LineChart {
    let samples: Vec<(String, Vec<f64>)> = runs
        .iter()
        .map(|r| {
            (
                r.scheduler.clone(),
                r.tenants.iter().map(|t| t.lag_std).collect(),
            )
        })
        .collect();
    let mut c = cdf(title, Axis::log("σ of service lag (s)"), &samples);
    c.y.label = "fraction of tenants".into();
    c
}

/// A run's thread occupancy: one row per worker, coloured by the running request's cost.
pub fn occupancy_chart(r: &RunResult, title: String) -> Occupancy {
    let occ = &r.occupancy;
    let cells = occ
        .cells
        .iter()
        .map(|row| row.iter().map(|c| c.map(f64::from)).collect())
        .collect();
    Occupancy::new(
        title,
        (0..occ.cells.len()).map(|w| format!("w{w}")),
        occ.t0,
        occ.dt,
        cells,
    )
    .value_label("request cost (units)")
    .log_color(true)
}

/// The runs table: one row per run.
pub fn runs_table(results: &[RunResult]) -> Table {
    let mut t = Table::new([
        "point",
        "scheduler",
        "events",
        "utilization",
        "mean Gini",
        "median lag σ (s)",
    ]);
    for r in results {
        let mut sig: Vec<f64> = r.tenants.iter().map(|t| t.lag_std).collect();
        sig.sort_by(f64::total_cmp);
        let med = sig.get(sig.len() / 2).copied().unwrap_or(0.0);
        t.push_row([
            r.label.clone(),
            r.scheduler.clone(),
            r.events.to_string(),
            format!("{:.3}", r.utilization),
            format!("{:.3}", r.gini_mean),
            fmt_num(med),
        ]);
    }
    t
}

/// Group results by point label, keeping order.
pub fn by_point(results: &[RunResult]) -> Vec<(String, Vec<&RunResult>)> {
    group_by_label(results, |r| &r.label)
}

/// Write `index.html` for a spec's results: the runs table and, for the first `detail`
/// points, their charts.
pub fn write_html(
    dir: &Path,
    title: &str,
    description: &str,
    results: &[RunResult],
    detail: usize,
) -> io::Result<()> {
    let intro = format!(
        "<p>{}</p><p>CSV files with every number are in <code>csv/</code>.</p>",
        fairlane_plot::escape(description)
    );
    let points = by_point(results)
        .into_iter()
        .take(detail)
        .map(|(label, runs)| (label, point_blocks(&runs)));
    write_page(dir, title, intro, runs_table(results), points)
}

/// Per point and scheduler: events, utilization and mean Gini, then the representative
/// tenants' lag σ and latency percentiles (what `fairlane simulate` prints).
pub fn print(out: &mut dyn Write, results: &[RunResult]) -> io::Result<()> {
    for (label, runs) in by_point(results) {
        if !label.is_empty() {
            writeln!(out, "== {label}")?;
        }
        for r in &runs {
            writeln!(
                out,
                "{:<8} {:>10} events in {:.2}s ({:.1} M events/s), utilization {:.3}, mean Gini {:.3}",
                r.scheduler,
                r.events,
                r.wall_seconds,
                r.events as f64 / r.wall_seconds.max(1e-9) / 1e6,
                r.utilization,
                r.gini_mean
            )?;
        }
        let first = runs[0];
        let tracked: Vec<String> = first.series.iter().map(|s| s.name.clone()).collect();
        let reps = representatives(first, &tracked, 20);
        write!(out, "{:<16}", "tenant")?;
        for r in &runs {
            write!(
                out,
                " {:>26}",
                format!("{}: lag σ / p50 / p99 (s)", r.scheduler)
            )?;
        }
        writeln!(out)?;
        for i in reps {
            write!(out, "{:<16}", first.tenants[i].name)?;
            for r in &runs {
                let t = &r.tenants[i];
                write!(
                    out,
                    " {:>26}",
                    format!(
                        "{} / {} / {}",
                        fmt_num(t.lag_std),
                        fmt_num(t.latency_p50),
                        fmt_num(t.latency_p99)
                    )
                )?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// One run's time series in long form: `[[series, tenant, t, value], …]`.
pub fn series_json(r: &RunResult) -> Value {
    let mut rows: Vec<Value> = Vec::new();
    for s in &r.series {
        long_rows(&mut rows, "service", &s.name, &s.service);
        long_rows(&mut rows, "lag", &s.name, &s.lag);
    }
    long_rows(&mut rows, "gini", "", &r.gini);
    if let Some(bb) = &r.blackbox {
        for t in &bb.tenants {
            long_rows(&mut rows, "response", &t.name, &t.response);
            long_rows(&mut rows, "throughput", &t.name, &t.throughput);
        }
        long_rows(&mut rows, "depth", "", &bb.depth);
    }
    Value::Array(rows)
}
