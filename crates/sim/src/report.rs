//! What every kind's report shares: file-name stems, the CSV writer, grouping runs by their
//! point, the HTML page of runs and points, and JSON numbers.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use fairlane_plot::{Axis, Block, LineChart, Page, Table};
use serde_json::{json, Value};

/// The file-name stem of one run's outputs, shared by every model's report: `LABEL-SCHEDULER`
/// (or `SCHEDULER` without a sweep label), anything but `[A-Za-z0-9.-]` replaced by `_`.
pub(crate) fn run_stem(label: &str, scheduler: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    if label.is_empty() {
        clean(scheduler)
    } else {
        format!("{}-{}", clean(label), clean(scheduler))
    }
}

/// One CSV file under construction: a header, then rows of comma-joined fields, written as
/// `csv/STEM-KIND.csv` — the one writer every model's report uses.
pub(crate) struct Csv(String);

impl Csv {
    /// A file with this header line (comma-separated column names).
    pub(crate) fn new(header: &str) -> Self {
        Csv(format!("{header}\n"))
    }

    /// One row: each field as `Display` prints it.
    pub(crate) fn row(&mut self, fields: &[&dyn std::fmt::Display]) {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            let _ = write!(self.0, "{f}");
        }
        self.0.push('\n');
    }

    /// A file of one series of the whole run: a row `t,value` a point.
    pub(crate) fn of_points(header: &str, points: &[(f64, f64)]) -> Self {
        let mut c = Csv::new(header);
        for (t, v) in points {
            c.row(&[t, v]);
        }
        c
    }

    /// Rows `t,name,value`, one a point of `name`'s series.
    pub(crate) fn named_points(&mut self, name: &str, points: &[(f64, f64)]) {
        for (t, v) in points {
            self.row(&[t, &name, v]);
        }
    }

    /// Write it as `dir/STEM-KIND.csv`.
    pub(crate) fn write(self, dir: &Path, stem: &str, kind: &str) -> io::Result<()> {
        std::fs::write(dir.join(format!("{stem}-{kind}.csv")), self.0)
    }
}

/// Create `dir/csv` and return it.
pub(crate) fn csv_dir(dir: &Path) -> io::Result<std::path::PathBuf> {
    let dir = dir.join("csv");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Group runs of any server by their point label, in first-seen order.
pub(crate) fn group_by_label<R>(runs: &[R], label: impl Fn(&R) -> &str) -> Vec<(String, Vec<&R>)> {
    let mut out: Vec<(String, Vec<&R>)> = Vec::new();
    for r in runs {
        match out.iter_mut().find(|(l, _)| l.as_str() == label(r)) {
            Some((_, v)) => v.push(r),
            None => out.push((label(r).to_string(), vec![r])),
        }
    }
    out
}

/// Write `dir/index.html`: `intro`, the runs table, then one section of blocks per point
/// (`Results` when the spec has no sweep).
pub(crate) fn write_page(
    dir: &Path,
    title: &str,
    intro: String,
    runs: Table,
    points: impl IntoIterator<Item = (String, Vec<Block>)>,
) -> io::Result<()> {
    let mut page = Page::new(title).intro(intro);
    page = page.section("Runs", vec![Block::Table(runs)]);
    for (label, blocks) in points {
        let heading = if label.is_empty() {
            "Results".to_string()
        } else {
            format!("Point {label}")
        };
        page = page.section(heading, blocks);
    }
    std::fs::create_dir_all(dir)?;
    page.write(dir.join("index.html"))
}

/// NaN and infinities as JSON `null`.
pub(crate) fn num(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// Append one series in the long form every kind's `series_json` uses: a row
/// `[series, name, t, value]` per point (`name` empty for a series of the whole run).
pub(crate) fn long_rows(rows: &mut Vec<Value>, series: &str, name: &str, points: &[(f64, f64)]) {
    rows.extend(points.iter().map(|(t, v)| json!([series, name, t, v])));
}

/// A chart of something over simulated time.
pub(crate) fn time_chart(title: impl Into<String>, y: Axis) -> LineChart {
    LineChart::new(title, Axis::linear("time (s)"), y)
}
