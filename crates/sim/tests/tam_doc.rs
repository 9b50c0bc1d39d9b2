//! docs/tam.md "Simulate it": the worked example (the worked example's `kvcache.toml` plus
//! the section's `[simulation]`) runs, and gives the numbers the section states.

use fairlane_sim::tam::{run_all, TamRun, TamSpecFile};

/// The first fenced block of `lang` after `after` in `text`.
fn block<'a>(text: &'a str, after: &str, lang: &str) -> &'a str {
    let from = text.find(after).expect("section present");
    let fence = format!("```{lang}\n");
    let start = text[from..].find(&fence).expect("block present") + from + fence.len();
    let end = text[start..].find("```").expect("block closed") + start;
    &text[start..end]
}

/// docs/tam.md, and its worked example as a spec: the model of "2. Describe each stage"
/// followed by the `[simulation]` of "Simulate it".
fn doc_and_example() -> (String, String) {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tam.md"),
    )
    .unwrap();
    let model = block(&doc, "### 2. Describe each stage", "toml");
    let sim = block(&doc, "## Simulate it", "toml");
    let example = format!("{model}\n{sim}");
    (doc, example)
}

fn run(text: &str) -> TamRun {
    let spec = TamSpecFile::parse(text, "kvcache.toml").unwrap_or_else(|e| panic!("{e}"));
    run_all(&spec.spec, 1, &mut |_| {}).unwrap().remove(0)
}

fn near(x: f64, doc: f64) -> bool {
    (x - doc).abs() <= 0.02 * doc
}

#[test]
fn the_simulate_it_example_gives_the_documented_numbers() {
    let (_, text) = doc_and_example();
    let r = run(&text);
    let (reader, writer) = (&r.clients[0], &r.clients[1]);
    assert!(near(reader.throughput, 1347.8), "{reader:?}");
    assert!(near(writer.throughput, 909.7), "{writer:?}");
    assert!(near(reader.latency_mean * 1e3, 29.672), "{reader:?}");
    assert!(near(r.stages[1].blocked_mean, 14.41), "{:?}", r.stages[1]);
    // The asynchronous Handler.
    let text = text.replace("blocks_on = [\"WAL Writer\"]\n", "");
    let r = run(&text);
    assert_eq!(r.stages[1].blocked_mean, 0.0);
    assert!(near(r.clients[0].throughput, 6807.8), "{:?}", r.clients[0]);
    assert!(
        near(r.clients[0].latency_mean * 1e3, 5.876),
        "{:?}",
        r.clients[0]
    );
    assert!(near(r.clients[1].throughput, 551.8), "{:?}", r.clients[1]);
}

#[test]
fn the_what_if_simulated_example_gives_the_documented_numbers() {
    let (doc, example) = doc_and_example();
    let file = TamSpecFile::parse(&example, "kvcache.toml").unwrap();
    // The command of "What-if, simulated", and its table.
    let shown = block(&doc, "### What-if, simulated", "console");
    assert!(shown.contains("-c \"async Handler\" --simulate"), "{shown}");
    let changes = vec!["async Handler".parse().unwrap()];
    let c = fairlane_sim::tam::whatif::compare(&file, &changes).unwrap();
    let text = c.to_text();
    for line in text
        .lines()
        .filter(|l| l.starts_with("reader") || l.starts_with("writer"))
    {
        assert!(shown.contains(line), "`{line}` is not in the doc:\n{shown}");
    }
    let (o, n) = (&c.original[0].clients[0], &c.changed[0].clients[0]);
    assert!(near(o.throughput, 1347.8) && near(n.throughput, 6807.8));
    let j = c.to_json();
    let d = j["runs"][0]["clients"][0]["difference"]["throughput"]
        .as_f64()
        .unwrap();
    assert!((d - (n.throughput - o.throughput)).abs() < 1e-9);
}
