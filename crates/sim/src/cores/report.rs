//! Outputs of database-server (`model = "cores"`) specs: the JSON
//! summary, CSV files and an HTML page, the same kinds of files as for the other specs
//! ([`crate::pool::report`]). Everything here is deterministic except `wall_seconds`.

use std::io::{self, Write};
use std::path::Path;

use fairlane_plot::{fmt_num, Axis, BarChart, Block, Table};
use serde_json::{json, Map, Value};

use super::run::{DbRun, DbTenantResult};
use crate::report::{csv_dir, group_by_label, num, run_stem, write_page, Csv};

/// `{"kind": "cores", "runs": [{"scheduler", "label", "utilization", …, "tenants": {NAME:
/// {"cpu_mean", "viol_cpu", "latency_p99", …}}}]}`: CPU is in % of the server, latencies in
/// seconds.
pub fn summary_json(runs: &[DbRun]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut tenants = Map::new();
            for t in &r.tenants {
                tenants.insert(t.name.clone(), tenant_json(t));
            }
            json!({
                "scheduler": r.scheduler,
                "label": r.label,
                "events": r.events,
                "wall_seconds": r.wall_seconds,
                "events_per_second": r.events as f64 / r.wall_seconds.max(1e-9),
                "utilization": r.utilization,
                "jain": num(r.jain),
                "dispatches": r.dispatches,
                "examined": r.examined,
                "tenants": tenants,
            })
        })
        .collect();
    json!({ "kind": "cores", "runs": runs })
}

fn tenant_json(t: &DbTenantResult) -> Value {
    json!({
        "group": t.group,
        "res": t.res,
        "cpu_mean": num(t.cpu_mean),
        "cpu_std": num(t.cpu_std),
        "viol_points": num(t.viol_points),
        "viol_points_std": num(t.viol_points_std),
        "viol_cpu": num(t.viol_cpu),
        "violated": num(t.violated),
        "burst_violated": t.burst_violated.map(num),
        "queries": t.queries,
        "latency_mean": num(t.latency_mean),
        "latency_p99": num(t.latency_p99),
        "latency_std": num(t.latency_std),
        "revenue_max": t.revenue_max,
        "refund": t.refund,
    })
}

fn stem(r: &DbRun) -> String {
    run_stem(&r.label, &r.scheduler)
}

/// Write `csv/STEM-tenants.csv` (per tenant) and `csv/STEM-intervals.csv` (every metering
/// record) per run.
pub fn write_csv(dir: &Path, runs: &[DbRun]) -> io::Result<()> {
    let dir = csv_dir(dir)?;
    for r in runs {
        let stem = stem(r);
        let mut c = Csv::new(
            "tenant,group,res_pct,cpu_mean_pct,cpu_std_pct,viol_points,viol_cpu,violated,queries,latency_mean_s,latency_p99_s,revenue_max,refund",
        );
        for t in &r.tenants {
            c.row(&[
                &t.name,
                &t.group,
                &t.res,
                &t.cpu_mean,
                &t.cpu_std,
                &t.viol_points,
                &t.viol_cpu,
                &t.violated,
                &t.queries,
                &t.latency_mean,
                &t.latency_p99,
                &t.revenue_max,
                &t.refund,
            ]);
        }
        c.write(&dir, &stem, "tenants")?;
        let mut c = Csv::new("tenant,start_s,cpu_pct,res_cpu_pct,viol_cpu,violated");
        for rec in &r.records {
            let name = r
                .tenants
                .get(rec.tenant.0 as usize)
                .map_or("?", |t| t.name.as_str());
            c.row(&[
                &name,
                &rec.start,
                &rec.cpu,
                &rec.res_cpu,
                &rec.viol_cpu,
                &rec.violated,
            ]);
        }
        c.write(&dir, &stem, "intervals")?;
    }
    Ok(())
}

/// One row per run.
pub fn runs_table(runs: &[DbRun]) -> Table {
    let mut t = Table::new([
        "point",
        "scheduler",
        "events",
        "utilization (%)",
        "Jain (ViolCPU)",
        "dispatches",
    ]);
    for r in runs {
        t.push_row([
            r.label.clone(),
            r.scheduler.clone(),
            r.events.to_string(),
            format!("{:.1}", r.utilization),
            fmt_num(r.jain),
            r.dispatches.to_string(),
        ]);
    }
    t
}

/// Group runs by point label, keeping order.
pub fn by_point(runs: &[DbRun]) -> Vec<(String, Vec<&DbRun>)> {
    group_by_label(runs, |r| &r.label)
}

/// The tenants shown for a point: every reserved tenant and the first of each group.
fn shown(r: &DbRun) -> Vec<usize> {
    let mut seen = std::collections::BTreeSet::new();
    (0..r.tenants.len())
        .filter(|&i| {
            let t = &r.tenants[i];
            t.res > 0.0 || seen.insert(t.group.clone())
        })
        .take(40)
        .collect()
}

/// A point's blocks: CPU % per tenant under each scheduler, and a table.
pub fn point_blocks(runs: &[&DbRun]) -> Vec<Block> {
    let first = runs[0];
    let idx = shown(first);
    let names: Vec<String> = idx.iter().map(|&i| first.tenants[i].name.clone()).collect();
    let mut chart = BarChart::new(
        "CPU per tenant (mean over metering intervals)",
        names.clone(),
        Axis::linear("CPU (% of the server)"),
    );
    let mut res = Vec::new();
    for &i in &idx {
        res.push(first.tenants[i].res);
    }
    chart = chart.group("ResCPU", res);
    for r in runs {
        chart = chart.group(
            r.scheduler.clone(),
            idx.iter().map(|&i| r.tenants[i].cpu_mean).collect(),
        );
    }
    let mut headers = vec!["tenant".to_string(), "ResCPU (%)".to_string()];
    for r in runs {
        headers.push(format!("{}: CPU (%)", r.scheduler));
        headers.push(format!("{}: viol. (pts)", r.scheduler));
        headers.push(format!("{}: p99 (s)", r.scheduler));
    }
    let mut table = Table::new(headers);
    for &i in &idx {
        let mut row = vec![first.tenants[i].name.clone(), fmt_num(first.tenants[i].res)];
        for r in runs {
            let t = &r.tenants[i];
            row.push(format!("{:.2}", t.cpu_mean));
            row.push(format!("{:.2}", t.viol_points));
            row.push(fmt_num(t.latency_p99));
        }
        table.push_row(row);
    }
    vec![Block::from(chart), Block::Table(table)]
}

/// Write `index.html`: the runs table and each point's CPU chart and table.
pub fn write_html(dir: &Path, title: &str, description: &str, runs: &[DbRun]) -> io::Result<()> {
    let intro = format!(
        "<p>{}</p><p>CSV files with every number (per tenant, and every metering interval) \
         are in <code>csv/</code>.</p>",
        fairlane_plot::escape(description)
    );
    let points = by_point(runs)
        .into_iter()
        .map(|(label, rs)| (label, point_blocks(&rs)));
    write_page(dir, title, intro, runs_table(runs), points)
}

/// Per point and scheduler: utilization, then each reserved tenant and the first of each
/// group with its CPU, violation and latency (what `fairlane simulate` prints).
pub fn print(out: &mut dyn Write, runs: &[DbRun]) -> io::Result<()> {
    for (label, rs) in by_point(runs) {
        if !label.is_empty() {
            writeln!(out, "== {label}")?;
        }
        for r in &rs {
            writeln!(
                out,
                "{:<12} {:>10} events in {:.2}s, utilization {:.1} %, Jain {}",
                r.scheduler,
                r.events,
                r.wall_seconds,
                r.utilization,
                fmt_num(r.jain)
            )?;
        }
        let first = rs[0];
        write!(out, "{:<14} {:>6}", "tenant", "res %")?;
        for r in &rs {
            write!(
                out,
                " {:>28}",
                format!("{}: CPU % / viol / p99 s", r.scheduler)
            )?;
        }
        writeln!(out)?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in first.tenants.iter().enumerate() {
            if t.res <= 0.0 && !seen.insert(t.group.clone()) {
                continue;
            }
            write!(out, "{:<14} {:>6}", t.name, fmt_num(t.res))?;
            for r in &rs {
                let x = &r.tenants[i];
                write!(
                    out,
                    " {:>28}",
                    format!(
                        "{:.2} / {:.2} / {}",
                        x.cpu_mean,
                        x.viol_points,
                        fmt_num(x.latency_p99)
                    )
                )?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}
