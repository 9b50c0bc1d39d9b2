//! Every chart type parses as XML, for good and bad inputs; rendering is deterministic and
//! compact.

use fairlane_plot::{
    cdf, downsample, escape, fmt_num, fmt_sig, is_numeric, Axis, BarChart, Block, LineChart,
    Occupancy, Page, Series, Style, Table,
};

/// Parses `svg` as XML, checks the root, and returns the number of elements named `name`.
fn parse(svg: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    for attr in ["viewBox", "width", "height"] {
        assert!(root.attribute(attr).is_some(), "no {attr}");
    }
    assert!(root
        .attribute("style")
        .unwrap()
        .contains("font-family: sans-serif"));
    doc
}

fn count(doc: &roxmltree::Document, name: &str) -> usize {
    doc.descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == name)
        .count()
}

/// Asserts that `doc` has `rects` titled rects (see [`titled_rects`]) and shows every one of
/// `labels` as a text.
fn assert_rects_and_texts(doc: &roxmltree::Document, rects: usize, labels: &[&str]) {
    assert_eq!(titled_rects(doc), rects);
    for label in labels {
        assert!(has_text(doc, label), "{label}");
    }
}

fn has_text(doc: &roxmltree::Document, text: &str) -> bool {
    doc.descendants().any(|n| n.text() == Some(text))
}

/// The `rect`s that carry a hover `title`: a chart's bars, an occupancy chart's runs.
fn titled_rects(doc: &roxmltree::Document) -> usize {
    doc.descendants()
        .filter(|n| {
            n.tag_name().name() == "rect" && n.children().any(|c| c.tag_name().name() == "title")
        })
        .count()
}

fn sample_line() -> LineChart {
    LineChart::new(
        "queue <length> & \"more\"",
        Axis::linear("time (s)"),
        Axis::linear("requests"),
    )
    .series(Series::new("A", vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]))
    .series(Series::new("B's", vec![(0.0, 2.0), (1.0, 1.0), (2.0, 4.0)]).style(Style::Step))
    .series(Series::new("C", vec![(0.5, 2.5), (1.5, 0.5)]).style(Style::Points))
    .series(
        Series::new("D", vec![(0.2, 1.2), (1.7, 3.3)])
            .style(Style::LinePoints)
            .color("teal"),
    )
}

#[test]
fn line_chart_is_valid_svg_with_legend_and_series() {
    let svg = sample_line().to_svg();
    let doc = parse(&svg);
    // One path per line-drawn series, circles for the two point-drawn ones.
    assert_eq!(count(&doc, "circle") - 2, 2 + 2, "legend has 2 dots");
    assert!(has_text(&doc, "queue <length> & \"more\""));
    for name in ["A", "B's", "C", "D", "time (s)", "requests"] {
        assert!(has_text(&doc, name), "{name}");
    }
    assert!(svg.contains("stroke=\"teal\""));
    assert!(svg.contains("clip-path=\"url(#fl-clip-"));
    assert!(!svg.contains("no data"));
}

#[test]
fn empty_and_bad_line_charts_say_no_data() {
    let charts = [
        LineChart::new("", Axis::linear(""), Axis::linear("")),
        LineChart::new("empty", Axis::linear("x"), Axis::linear("y"))
            .series(Series::new("e", vec![])),
        LineChart::new("nan", Axis::linear("x"), Axis::linear("y")).series(Series::new(
            "n",
            vec![
                (f64::NAN, 1.0),
                (1.0, f64::INFINITY),
                (f64::NEG_INFINITY, 0.0),
            ],
        )),
        LineChart::new("log zero", Axis::log("x"), Axis::log("y"))
            .series(Series::new("z", vec![(0.0, 1.0), (1.0, 0.0), (-1.0, -1.0)])),
        LineChart::new("tiny", Axis::linear("x"), Axis::linear("y"))
            .series(Series::new("t", vec![]))
            .size(0, 0),
    ];
    for chart in charts {
        let svg = chart.to_svg();
        let doc = parse(&svg);
        assert!(has_text(&doc, "no data"), "{}", chart.title);
    }
}

#[test]
fn partly_bad_data_is_skipped() {
    let chart = LineChart::new("mixed", Axis::log("x"), Axis::log("y")).series(Series::new(
        "m",
        vec![
            (0.0, 5.0),
            (1.0, 10.0),
            (f64::NAN, 3.0),
            (10.0, 0.0),
            (100.0, 1000.0),
            (1000.0, -4.0),
        ],
    ));
    let svg = chart.to_svg();
    let doc = parse(&svg);
    assert!(!has_text(&doc, "no data"));
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
    // The kept points are (1, 10) and (100, 1000): x axis 1…100, y axis 10…1000.
    for label in ["1", "10", "100", "1k"] {
        assert!(has_text(&doc, label), "{label}");
    }
}

#[test]
fn extreme_values_do_not_break_charts() {
    let huge = vec![
        (-1e308, 1e308),
        (1e308, -1e308),
        (0.0, f64::MAX),
        (f64::MIN_POSITIVE, 5e-324),
    ];
    for (x, y) in [
        (Axis::linear("x"), Axis::linear("y")),
        (Axis::log("x"), Axis::log("y")),
        (
            Axis::linear("x").range(0.0, 1.0),
            Axis::log("y").range(1e-300, 1e300),
        ),
    ] {
        for style in [Style::Line, Style::Step, Style::Points, Style::LinePoints] {
            let chart = LineChart::new("extreme", x.clone(), y.clone())
                .series(Series::new("h", huge.clone()).style(style));
            let svg = chart.to_svg();
            parse(&svg);
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        }
    }
    let bars =
        BarChart::new("extreme", ["a", "b"], Axis::log("v")).group("g", vec![5e-324, f64::MAX]);
    parse(&bars.to_svg());
    let occ = Occupancy::new(
        "extreme",
        ["a"],
        0.0,
        1.0,
        vec![vec![Some(f64::MAX), Some(-f64::MAX)]],
    );
    parse(&occ.to_svg());
}

#[test]
fn degenerate_ranges_are_padded() {
    for (x, y) in [
        (Axis::linear("x"), Axis::linear("y")),
        (Axis::log("x"), Axis::log("y")),
        (
            Axis::linear("x").range(3.0, 3.0),
            Axis::linear("y").range(1.0, 1.0),
        ),
        (
            Axis::linear("x").range(5.0, 1.0),
            Axis::log("y").range(-1.0, f64::NAN),
        ),
    ] {
        let chart = LineChart::new("one point", x, y).series(Series::new("p", vec![(3.0, 1.0)]));
        let svg = chart.to_svg();
        let doc = parse(&svg);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert!(count(&doc, "path") >= 3);
    }
}

#[test]
fn large_series_are_downsampled_and_keep_spikes() {
    let n = 100_000;
    let mut points: Vec<(f64, f64)> = (0..n)
        .map(|i| (i as f64, 10.0 + (i % 7) as f64 * 0.01))
        .collect();
    points[54_321].1 = 500.0; // one spike
    let chart = LineChart::new("big", Axis::linear("i"), Axis::linear("v"))
        .series(Series::new("s", points.clone()));
    let svg = chart.to_svg();
    parse(&svg);
    assert!(svg.len() < 60_000, "svg is {} bytes", svg.len());
    // The y axis reaches the spike, and the path goes up to the top of the plot.
    let doc = parse(&svg);
    let path = doc
        .descendants()
        .find(|n| n.tag_name().name() == "path" && n.attribute("stroke-linejoin").is_some())
        .unwrap();
    let d = path.attribute("d").unwrap();
    let ys: Vec<f64> = d
        .split(['M', 'L'])
        .flat_map(|seg| {
            let nums: Vec<f64> = seg.split_whitespace().map(|s| s.parse().unwrap()).collect();
            nums.chunks(2).map(|c| c[1]).collect::<Vec<_>>()
        })
        .collect();
    let top = ys.iter().cloned().fold(f64::INFINITY, f64::min);
    let bottom = ys.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    assert!(bottom - top > 200.0, "spike lost: {top}..{bottom}");

    // Step series too, and Points series get one dot per pixel.
    for style in [Style::Step, Style::Points] {
        let chart = LineChart::new("big", Axis::linear("i"), Axis::linear("v"))
            .series(Series::new("s", points.clone()).style(style));
        let svg = chart.to_svg();
        parse(&svg);
        assert!(svg.len() < 200_000, "{style:?}: {} bytes", svg.len());
    }
}

#[test]
fn downsample_keeps_extremes_per_column() {
    // 1000 points in pixel column 10, one spike up and one down.
    let mut px: Vec<(f64, f64)> = (0..1000)
        .map(|i| (10.0 + i as f64 / 1000.0, 50.0))
        .collect();
    px[300].1 = 5.0;
    px[700].1 = 95.0;
    px.push((11.5, 50.0));
    let kept = downsample(&px);
    assert!(kept.len() <= 5, "{kept:?}");
    assert!(kept.contains(&(10.3, 5.0)));
    assert!(kept.contains(&(10.7, 95.0)));
    assert_eq!(kept[0], px[0]);
    assert_eq!(*kept.last().unwrap(), (11.5, 50.0));
    // Flat within a pixel: only the first point of the column stays.
    let flat: Vec<(f64, f64)> = (0..100)
        .map(|i| (3.0 + i as f64 / 200.0, 7.0 + (i % 2) as f64 * 0.3))
        .collect();
    assert_eq!(downsample(&flat).len(), 1);
    // Points in distinct columns all stay.
    let spread: Vec<(f64, f64)> = (0..50).map(|i| (i as f64 * 2.0, (i % 3) as f64)).collect();
    assert_eq!(downsample(&spread), spread);
    assert!(downsample(&[]).is_empty());
}

#[test]
fn cdf_is_monotone_and_ends_at_one() {
    let samples = vec![
        (
            "a".to_string(),
            vec![3.0, 1.0, 2.0, 2.0, f64::NAN, 10.0, 0.5],
        ),
        (
            "b".to_string(),
            (0..1000)
                .map(|i| ((i * 7919) % 1000) as f64 / 10.0)
                .collect(),
        ),
        ("empty".to_string(), vec![]),
        ("one".to_string(), vec![4.0]),
    ];
    let chart = cdf("latency", Axis::linear("seconds"), &samples);
    for s in &chart.series[..2] {
        assert_eq!(s.style, Style::Step);
        let ys: Vec<f64> = s.points.iter().map(|p| p.1).collect();
        assert!(ys.windows(2).all(|w| w[0] <= w[1]), "{}", s.name);
        assert!(s.points.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(ys[0], 0.0);
        assert_eq!(*ys.last().unwrap(), 1.0);
    }
    assert_eq!(
        chart.series[0].points,
        [
            (0.5, 0.0),
            (0.5, 1.0 / 6.0),
            (1.0, 2.0 / 6.0),
            (2.0, 4.0 / 6.0),
            (3.0, 5.0 / 6.0),
            (10.0, 1.0)
        ]
    );
    assert!(chart.series[2].points.is_empty());
    assert_eq!(chart.series[3].points, [(4.0, 0.0), (4.0, 1.0)]);
    assert_eq!((chart.y.min, chart.y.max), (Some(0.0), Some(1.0)));
    assert!(chart.y.label.starts_with("fraction of"));
    parse(&chart.to_svg());
    // On a log axis with zeros and negatives.
    let chart = cdf(
        "log",
        Axis::log("x"),
        &[("z".to_string(), vec![0.0, -1.0, 0.001, 1.0, 100.0])],
    );
    let svg = chart.to_svg();
    assert!(!parse(&svg)
        .descendants()
        .any(|n| n.text() == Some("no data")));
    // Only zeros on a log axis: nothing to draw.
    let chart = cdf(
        "zeros",
        Axis::log("x"),
        &[("z".to_string(), vec![0.0, 0.0])],
    );
    assert!(has_text(&parse(&chart.to_svg()), "no data"));
}

fn sample_bar() -> BarChart {
    BarChart::new("throughput", ["fifo", "wfq", "2dfq"], Axis::linear("req/s"))
        .group("small", vec![10.0, 20.0, 30.0])
        .group("large", vec![5.0, f64::NAN, 25.0])
        .group("other <x>", vec![1.0])
}

#[test]
fn bar_chart_is_valid_with_hover_values() {
    let svg = sample_bar().to_svg();
    let doc = parse(&svg);
    // 3 + 2 + 1 bars with titles, plus 3 legend swatches and the background.
    let labels = [
        "fifo",
        "wfq",
        "2dfq",
        "small",
        "large",
        "other <x>",
        "req/s",
    ];
    assert_rects_and_texts(&doc, 6, &labels);
    assert!(has_text(&doc, "small \u{b7} wfq: 20"));
    assert!(has_text(&doc, "other <x> \u{b7} fifo: 1"));
    // Negative values, log axes with zeros, empty, many long categories.
    let charts = [
        BarChart::new("neg", ["a", "b"], Axis::linear("v")).group("g", vec![-3.0, 2.0]),
        BarChart::new("log", ["a", "b", "c"], Axis::log("v")).group("g", vec![0.0, 10.0, 1e4]),
        BarChart::new("log zero", ["a"], Axis::log("v")).group("g", vec![0.0]),
        BarChart::new("empty", Vec::<String>::new(), Axis::linear("v")),
        BarChart::new("no groups", ["a"], Axis::linear("v")),
        BarChart::new(
            "long",
            (0..40).map(|i| format!("category number {i} with a long name")),
            Axis::linear("v"),
        )
        .group("g", (0..40).map(f64::from).collect()),
    ];
    for chart in charts {
        let svg = chart.to_svg();
        let doc = parse(&svg);
        assert!(!svg.contains("NaN"), "{}", chart.title);
        let no_data = has_text(&doc, "no data");
        assert_eq!(
            no_data,
            ["log zero", "empty", "no groups"].contains(&chart.title.as_str()),
            "{}",
            chart.title
        );
    }
}

fn sample_occupancy() -> Occupancy {
    let cells = vec![
        vec![
            Some(1.0),
            Some(1.0),
            None,
            Some(100.0),
            Some(100.0),
            Some(7.0),
        ],
        vec![None, Some(3.0), Some(3.0), Some(3.0)],
        vec![],
    ];
    Occupancy::new("workers", ["w0", "w1", "w<2>"], 0.0, 0.5, cells)
        .value_label("request cost")
        .log_color(true)
}

#[test]
fn occupancy_is_valid_and_merges_runs() {
    let svg = sample_occupancy().to_svg();
    let doc = parse(&svg);
    // w0: [1 1] [100 100] [7]; w1: [3 3 3].
    let labels = ["w0", "w1", "w<2>", "request cost", "idle", "time (s)"];
    assert_rects_and_texts(&doc, 4, &labels);
    assert!(has_text(&doc, "w1 \u{b7} t 0.5\u{2013}2 s: request cost 3"));

    // A row of 1000 identical cells is one rect, as is a 100k-cell row.
    for n in [1000, 100_000] {
        let occ = Occupancy::new("busy", ["w"], 0.0, 0.001, vec![vec![Some(42.0); n]]);
        let doc_s = occ.to_svg();
        let doc = parse(&doc_s);
        let runs = titled_rects(&doc);
        assert_eq!(runs, 1, "{n} cells");
        assert!(doc_s.len() < 20_000);
    }

    // Wildly varying long rows stay bounded by the pixel width.
    let cells: Vec<Vec<Option<f64>>> = (0..8)
        .map(|r| {
            (0..50_000)
                .map(|i| {
                    if (i + r) % 3 == 0 {
                        None
                    } else {
                        Some(((i * 31 + r) % 997) as f64 + 1.0)
                    }
                })
                .collect()
        })
        .collect();
    let occ =
        Occupancy::new("noisy", (0..8).map(|r| format!("w{r}")), 0.0, 1e-3, cells).log_color(true);
    let svg = occ.to_svg();
    let doc = parse(&svg);
    assert!(
        count(&doc, "rect") < 8 * 720 + 100,
        "{}",
        count(&doc, "rect")
    );

    // Bad inputs.
    let bad = [
        Occupancy::new("none", Vec::<String>::new(), 0.0, 1.0, vec![]),
        Occupancy::new("idle", ["a", "b"], 0.0, 1.0, vec![vec![None; 10], vec![]]),
        Occupancy::new(
            "nan",
            ["a"],
            f64::NAN,
            f64::NAN,
            vec![vec![Some(f64::NAN), Some(1.0)]],
        ),
        Occupancy::new("zero dt", ["a"], 0.0, 0.0, vec![vec![Some(1.0)]]),
        Occupancy::new(
            "log zero",
            ["a"],
            0.0,
            1.0,
            vec![vec![Some(0.0), Some(-1.0)]],
        )
        .log_color(true),
        Occupancy::new("same", ["a"], 5.0, 1.0, vec![vec![Some(2.0), Some(2.0)]]).log_color(true),
        Occupancy::new(
            "many rows",
            (0..300).map(|r| format!("thread {r}")),
            0.0,
            1.0,
            vec![vec![Some(1.0)]; 300],
        )
        .size(400, 200),
    ];
    for occ in bad {
        let svg = occ.to_svg();
        let doc = parse(&svg);
        assert!(
            !svg.contains("NaN") && !svg.contains("inf"),
            "{}",
            occ.title
        );
        assert_eq!(
            has_text(&doc, "no data"),
            ["none", "nan", "zero dt"].contains(&occ.title.as_str()),
            "{}",
            occ.title
        );
    }
}

#[test]
fn rendering_is_deterministic() {
    let a = sample_line().to_svg();
    assert_eq!(a, sample_line().to_svg());
    assert_eq!(sample_bar().to_svg(), sample_bar().to_svg());
    assert_eq!(sample_occupancy().to_svg(), sample_occupancy().to_svg());
    assert_eq!(sample_page().to_html(), sample_page().to_html());
    // Different data, different clip id: charts inlined in one page do not clash.
    let b = sample_line()
        .series(Series::new("E", vec![(0.0, 0.0)]))
        .to_svg();
    let id = |s: &str| s.split("clipPath id=\"").nth(1).unwrap()[..24].to_string();
    assert_ne!(id(&a), id(&b));
}

#[test]
fn long_legends_go_below() {
    let mut chart = LineChart::new("many", Axis::linear("x"), Axis::linear("y"));
    for i in 0..30 {
        chart = chart.series(Series::new(
            format!("series with a rather long name number {i}"),
            vec![(0.0, i as f64), (1.0, i as f64 + 1.0)],
        ));
    }
    let svg = chart.to_svg();
    let doc = parse(&svg);
    let h: f64 = doc
        .root_element()
        .attribute("height")
        .unwrap()
        .parse()
        .unwrap();
    assert!(h > 360.0, "legend below makes the chart taller: {h}");
    // Palette colours repeat in order after 10.
    assert!(svg.contains("stroke=\"#4e79a7\"") && svg.contains("stroke=\"#bab0ac\""));
}

fn sample_page() -> Page {
    let table = Table::new(["scheduler", "p99 (s)", "note"])
        .row(["WFQ", "1.23k", "bursty <tenant>"])
        .row(["2DFQ", "0.5", ""])
        .row(["FIFO", "-4%", "x"]);
    Page::new("report & <summary>")
        .intro("<p>intro <b>html</b></p>")
        .section(
            "Lines",
            vec![
                Block::Svg(sample_line().to_svg()),
                Block::Text("a < b".into()),
            ],
        )
        .section("Bars", vec![sample_bar().into(), Block::Table(table)])
        .section(
            "Workers",
            vec![
                sample_occupancy().into(),
                Block::Pre("x <y>\n  z".into()),
                Block::Html("<hr>".into()),
            ],
        )
}

#[test]
fn page_is_a_standalone_document() {
    let html = sample_page().to_html();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("<meta charset=\"utf-8\">"));
    assert!(html.contains("<title>report &amp; &lt;summary&gt;</title>"));
    assert!(html.contains("<p>intro <b>html</b></p>"));
    assert!(html.contains("<p>a &lt; b</p>"));
    assert!(html.contains("<pre>x &lt;y&gt;\n  z</pre>"));
    assert!(html.contains("<a href=\"#s3\">Workers</a>"));
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(!html.contains("<script"));
    assert!(!html
        .replace("http://www.w3.org/2000/svg", "")
        .contains("http"));
    assert!(!html.contains("<link") && !html.contains("src="));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn table_right_aligns_numbers_and_escapes() {
    let t = Table::new(["name", "value"])
        .row(["a<b", "1.5k"])
        .row(["c", "12 ms"])
        .row(["d"]);
    let html = t.to_html();
    assert_eq!(
        html,
        "<table><thead><tr><th>name</th><th class=\"num\">value</th></tr></thead><tbody>\
         <tr><td>a&lt;b</td><td class=\"num\">1.5k</td></tr>\
         <tr><td>c</td><td class=\"num\">12 ms</td></tr>\
         <tr><td>d</td><td></td></tr></tbody></table>"
    );
    // It is well-formed XML too.
    roxmltree::Document::parse(&html).unwrap();
    assert_eq!(Table::default().to_html(), "<table><tbody></tbody></table>");
}

#[test]
fn numeric_cells() {
    for s in [
        "0", "-1", "+2.5", "1e5", "1.5e-4", "1.23k", "45.6M", "7%", "3 ms", "2.5s", "10x", "inf",
        "NaN", " 42 ",
    ] {
        assert!(is_numeric(s), "{s}");
    }
    for s in [
        "", "-", "k", "%", "2DFQ", "WFQ", "a1", "1.2.3", "--1", "1 2", "ms",
    ] {
        assert!(!is_numeric(s), "{s}");
    }
}

#[test]
fn escaping() {
    assert_eq!(
        escape("a<b>&\"c\"'d'"),
        "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"
    );
    assert_eq!(escape("plain ü ∞"), "plain ü ∞");
    assert_eq!(
        escape("tab\tnl\nbell\u{7}nul\0"),
        "tab\tnl\nbell\u{fffd}nul\u{fffd}"
    );
    // Names with control characters still make valid SVG.
    let chart = LineChart::new("t\u{1}", Axis::linear("x\u{0}"), Axis::linear("y"))
        .series(Series::new("s\u{1b}", vec![(0.0, 0.0), (1.0, 1.0)]));
    parse(&chart.to_svg());
}

#[test]
fn number_formatting() {
    let cases = [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (2.50, "2.5"),
        (12.34, "12.3"),
        (123.4, "123"),
        (999.4, "999"),
        (999.7, "1k"),
        (1000.0, "1k"),
        (1234.0, "1.23k"),
        (12_345.0, "12.3k"),
        (123_456.0, "123k"),
        (999_999.0, "1M"),
        (3_400_000.0, "3.4M"),
        (2.5e9, "2.5G"),
        (7.1e12, "7.1T"),
        (1e15, "1e15"),
        (2.346e20, "2.35e20"),
        (0.5, "0.5"),
        (0.1234, "0.123"),
        (0.01, "0.01"),
        (0.001, "0.001"),
        (0.00123, "0.00123"),
        (0.00015, "1.5e-4"),
        (1e-9, "1e-9"),
        (-1234.0, "-1.23k"),
        (-0.5, "-0.5"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ];
    for (x, want) in cases {
        assert_eq!(fmt_num(x), want, "{x}");
    }
    assert_eq!(fmt_sig(10_250.0, 4), "10.25k");
    assert_eq!(fmt_sig(1.0, 5), "1");
    assert_eq!(fmt_sig(123_456.0, 6), "123.456k");
    assert_eq!(fmt_sig(2.6, 1), "3");
}
