//! Every model under `models/` simulates with the default workload, including the
//! discovered ones.

mod support;

use fairlane_sim::tam::{run_all, whatif};
use fairlane_sim::Experiment;

#[test]
fn every_model_file_simulates_with_the_default_workload() {
    let paths = support::shipped("models", "");
    assert!(paths.len() >= 8, "models/ has {} files", paths.len());
    for p in &paths {
        let mut f = whatif::load(p).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            f.doc.get("simulation").is_none(),
            "{}: the model files carry no [simulation]; this test is about the default",
            p.display()
        );
        // The default is 10 s; 2 s shows the same thing faster.
        f.set("duration", toml::Value::Float(2.0))
            .unwrap_or_else(|e| panic!("{e}"));
        let runs =
            run_all(&f.spec, 1, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let r = &runs[0];
        assert_eq!(r.clients.len(), 2, "{}", p.display());
        for c in &r.clients {
            assert!(
                c.completed > 0 && c.throughput > 0.0,
                "{}: client {} completed nothing",
                p.display(),
                c.name
            );
        }
        // The default request walks downstream from the entry stage: more than one stage
        // is visited wherever the model has a downstream edge.
        let visited = r
            .stages
            .iter()
            .filter(|s| s.visits.iter().sum::<u64>() > 0)
            .count();
        let has_edge = f.model.stages.iter().any(|s| !s.downstream.is_empty());
        assert!(
            visited > usize::from(has_edge),
            "{}: {visited} stages visited",
            p.display()
        );
    }
}
