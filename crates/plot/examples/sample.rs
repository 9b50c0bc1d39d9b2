//! Renders a sample report with every chart type:
//! `cargo run -p fairlane-plot --example sample -- /tmp/plot-sample` writes
//! `/tmp/plot-sample/index.html` and one `.svg` file per chart.

use fairlane_plot::{
    cdf, fmt_num, Axis, BarChart, Block, LineChart, Occupancy, Page, Series, Style, Table,
};

/// A small deterministic pseudo-random generator (xorshift), so the sample needs no crates.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Pareto-ish heavy-tailed cost.
    fn heavy(&mut self) -> f64 {
        0.001 / (1.0 - self.next()).powf(1.0 / 1.2)
    }
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/plot-sample".into());
    let mut rng = Rng(0x2d_f00d);

    // Queue length over time, 20k points per tenant, one burst.
    let mut queue = LineChart::new(
        "Queue length per tenant",
        Axis::linear("time (s)"),
        Axis::linear("queued requests"),
    );
    for (t, name) in [
        "tenant A (small)",
        "tenant B (small)",
        "tenant C (large, bursty)",
    ]
    .iter()
    .enumerate()
    {
        let mut q: f64 = 5.0;
        let pts = (0..20_000)
            .map(|i| {
                q = (q + rng.next() - 0.5 + if t == 2 && i == 12_000 { 60.0 } else { 0.0 })
                    .max(0.0);
                (i as f64 * 0.001, q)
            })
            .collect();
        queue = queue.series(Series::new(*name, pts));
    }

    // Latency CDFs, log x.
    let schedulers = ["FIFO", "WFQ", "WF\u{b2}Q", "2DFQ", "2DFQ\u{1d31}"];
    let samples: Vec<(String, Vec<f64>)> = schedulers
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let scale = 1.0 / (1.0 + k as f64);
            (
                s.to_string(),
                (0..5000).map(|_| rng.heavy() * scale).collect(),
            )
        })
        .collect();
    let latency = cdf("Request latency", Axis::log("latency (s)"), &samples);

    // Throughput per scheduler and tenant class, log y.
    let bars = BarChart::new(
        "Service rate by tenant class",
        schedulers,
        Axis::log("requests/s"),
    )
    .group("small", vec![120.0, 800.0, 850.0, 1900.0, 2100.0])
    .group("large", vec![40.0, 35.0, 33.0, 30.0, 31.0])
    .group("unpredictable", vec![3.0, 0.0, 12.0, 25.0, 60.0]);

    // Worker occupancy: 8 workers, 4000 cells each.
    let cells: Vec<Vec<Option<f64>>> = (0..8)
        .map(|_| {
            let mut row = Vec::new();
            while row.len() < 4000 {
                if rng.next() < 0.2 {
                    let idle = (rng.next() * 30.0) as usize;
                    row.extend(std::iter::repeat_n(None, idle));
                } else {
                    let cost = rng.heavy() * 1000.0;
                    let len = (cost.min(400.0) as usize).max(1);
                    row.extend(std::iter::repeat_n(Some(cost), len));
                }
            }
            row.truncate(4000);
            row
        })
        .collect();
    let occupancy = Occupancy::new(
        "Worker occupancy (2DFQ)",
        (0..8).map(|w| format!("worker {w}")),
        0.0,
        0.001,
        cells,
    )
    .value_label("request cost")
    .log_color(true);

    let points = LineChart::new(
        "Cost estimate vs actual",
        Axis::log("actual"),
        Axis::log("estimate"),
    )
    .series(
        Series::new(
            "requests",
            (0..400).map(|_| (rng.heavy(), rng.heavy())).collect(),
        )
        .style(Style::Points),
    )
    .series(Series::new("y = x", vec![(1e-3, 1e-3), (10.0, 10.0)]).color("#888"))
    .size(480, 400);

    let mut table = Table::new(["scheduler", "requests", "p50 (s)", "p99 (s)", "note"]);
    for (name, s) in &samples {
        let mut v = s.clone();
        v.sort_by(f64::total_cmp);
        table.push_row([
            name.clone(),
            v.len().to_string(),
            fmt_num(v[v.len() / 2]),
            fmt_num(v[v.len() * 99 / 100]),
            if name == "FIFO" {
                "baseline <no isolation>".to_string()
            } else {
                String::new()
            },
        ]);
    }

    let empty = LineChart::new("An empty chart", Axis::log("x"), Axis::linear("y"))
        .series(Series::new("nothing", vec![(0.0, 1.0)]))
        .size(400, 220);

    let page = Page::new("fairlane-plot sample report")
        .intro("<p>Every chart type of <code>fairlane-plot</code> on synthetic data.</p>")
        .section(
            "Queues",
            vec![
                (&queue).into(),
                Block::Text("20,000 points per series, one burst.".into()),
            ],
        )
        .section("Latency", vec![(&latency).into(), Block::Table(table)])
        .section("Throughput", vec![(&bars).into()])
        .section("Workers", vec![(&occupancy).into()])
        .section(
            "Estimates",
            vec![
                (&points).into(),
                (&empty).into(),
                Block::Pre("fairlane simulate --out DIR".into()),
            ],
        );
    page.write(format!("{dir}/index.html"))?;
    for (name, svg) in [
        ("queue", queue.to_svg()),
        ("latency", latency.to_svg()),
        ("bars", bars.to_svg()),
        ("occupancy", occupancy.to_svg()),
        ("points", points.to_svg()),
        ("empty", empty.to_svg()),
    ] {
        std::fs::write(format!("{dir}/{name}.svg"), svg)?;
    }
    println!("wrote {dir}/index.html");
    Ok(())
}
