//! docs/tam.md stays true: its worked example gives the results it shows, and its catalog
//! table matches the analysis.

use fairlane_tam::catalog;
use fairlane_tam::{analyze, what_if, Change, Model, ProblemKind};

fn guide() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/tam.md")).unwrap()
}

/// The fenced block that starts with `first_line`.
fn block(text: &str, first_line: &str) -> String {
    let start = text
        .find(first_line)
        .unwrap_or_else(|| panic!("no block starting with {first_line}"));
    let rest = &text[start..];
    rest[..rest.find("```").unwrap()].to_string()
}

#[test]
fn worked_example_has_all_five_problems_as_shown() {
    let model = Model::from_toml(&block(&guide(), "# kvcache.toml")).unwrap();
    let report = analyze(&model);
    assert_eq!(report.table2_row(), "N U C B O");
    assert_eq!(report.problems.len(), 6);
    let text = report.to_text(&model);
    assert!(
        guide().contains(text.lines().next().unwrap()),
        "the first line of `check` output is quoted in the guide"
    );
}

#[test]
fn worked_example_fixes_leave_only_cpu_contention() {
    let guide = guide();
    let model = Model::from_toml(&block(&guide, "# kvcache.toml")).unwrap();
    let console = block(&guide, "$ fairlane tam what-if kvcache.toml");
    let changes: Vec<Change> = console
        .lines()
        .filter_map(|l| l.trim().strip_prefix("-c \""))
        .map(|l| {
            l.trim_end_matches(" \\")
                .trim_end_matches('"')
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(changes.len(), 7);
    let result = what_if(&model, &changes).unwrap();
    assert_eq!(result.after.table2_row(), ". . C . .");
    assert_eq!(result.resolved().len(), 5);
    assert!(result.introduced().is_empty());
    let remaining = result.remaining();
    assert_eq!(remaining.len(), 1);
    assert_eq!(remaining[0].stages, ["Acceptor", "CPU"]);
    assert!(console.contains("- hidden contention: Acceptor, CPU [cpu]"));
}

#[test]
fn catalog_table_matches_the_analysis() {
    let guide = guide();
    for entry in catalog::CATALOG {
        let row = guide
            .lines()
            .find(|l| l.starts_with(&format!("| `{}.toml`", entry.name)))
            .unwrap_or_else(|| panic!("{} missing from the guide's catalog table", entry.name));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // cells: "", file, paper, N, U, C, B, O, ""
        let kinds = analyze(&entry.model().unwrap()).kinds();
        for (k, kind) in ProblemKind::ALL.into_iter().enumerate() {
            assert_eq!(
                cells[3 + k].starts_with('×'),
                kinds.contains(&kind),
                "{}: column {}",
                entry.name,
                kind.letter()
            );
        }
    }
}

#[test]
fn discovered_models_check_as_the_guide_says() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/");
    let pg = Model::load(format!("{dir}postgresql-discovered.toml")).unwrap();
    assert_eq!(analyze(&pg).table2_row(), "N . C . .");
    assert!(guide().contains("(Table 2 row\n`N . C . .`)"));
    let backend = pg.stage("Backend").unwrap();
    assert_eq!(backend.scheduling, fairlane_tam::Scheduling::OnDemand);
    for name in [
        "Checkpointer",
        "Background Writer",
        "WAL Writer",
        "Autovacuum Launcher",
    ] {
        assert!(pg.stage(name).is_some(), "{name}");
    }
    let redis = Model::load(format!("{dir}redis-discovered.toml")).unwrap();
    assert_eq!(analyze(&redis).table2_row(), ". . C . .");
    let text = std::fs::read_to_string(format!("{dir}annotations/postgresql.toml")).unwrap();
    fairlane_tam::discover::Annotations::parse(&text, "annotations/postgresql.toml").unwrap();
}
