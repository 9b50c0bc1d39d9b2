//! Every call into `fairlane_sim` lives here, and each goes through its experiment interface
//! ([`Experiment`], [`Runs`]): reading a spec, shortening it for `--quick`, changing a field,
//! running it, reading its runs as the kind an analysis expects, and the simulator's own
//! report charts. The analyses only read the result types re-exported here.

use std::path::PathBuf;

use fairlane_plot::{LineChart, Occupancy};
pub use fairlane_sim::cores::{CoresRuns, DbRun, DbTenantResult};
use fairlane_sim::doc::Doc;
pub use fairlane_sim::llm::{LlmResult, LlmRun, LlmRuns};
pub use fairlane_sim::metrics::TenantResult;
pub use fairlane_sim::pool::blackbox::BlackBoxResult;
pub use fairlane_sim::tam::{TamRun, TamRuns};
pub use fairlane_sim::{Experiment, PoolRuns, RunOptions, RunResult, Runs};

/// Parse `text` (named `file` in errors; `dir` anchors relative paths). `quick` halves the
/// simulated time and runs 40 suite runs instead of 150.
pub(crate) fn parse(
    text: &str,
    file: &str,
    dir: PathBuf,
    quick: bool,
) -> Result<Box<dyn Experiment>, String> {
    let mut e = fairlane_sim::parse(text, file, dir).map_err(|e| e.to_string())?;
    if quick {
        let mut changes = vec![
            ("warmup".to_string(), toml::Value::Float(e.warmup() / 2.0)),
            (
                "duration".to_string(),
                toml::Value::Float(e.duration() / 2.0),
            ),
        ];
        if e.doc().get("suite").is_some() {
            changes.push(("suite.runs".to_string(), toml::Value::Integer(40)));
        }
        e.set_all(&changes).map_err(|e| e.to_string())?;
    }
    Ok(e)
}

/// Run every point under every scheduler, `jobs` at a time; `progress` gets the fraction of
/// this spec done.
pub(crate) fn run(
    e: &dyn Experiment,
    jobs: usize,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Box<dyn Runs>, String> {
    let opts = RunOptions {
        jobs,
        ..RunOptions::default()
    };
    e.run(&opts, &mut |p| progress(p.fraction))
        .map_err(|e| e.to_string())
}

/// The runs as the kind `R` an analysis reads.
pub(crate) fn typed<R: 'static>(runs: &dyn Runs) -> Option<&R> {
    runs.as_any().downcast_ref::<R>()
}

/// A TAM simulation a section varies field by field and runs: the spec at `path` in the
/// repository when there is one, else `text` (the copy compiled in).
#[derive(Clone)]
pub(crate) struct Tam(Box<dyn Experiment>);

impl Tam {
    /// Read a TAM simulation from its document text.
    pub(crate) fn parse(text: &str, path: &str) -> Result<Tam, String> {
        fairlane_sim::parse(text, path, PathBuf::from("."))
            .map(Tam)
            .map_err(|e| e.to_string())
    }

    /// The `[simulation]` and name of the spec `(path, text)` on the model file `(path,
    /// text)` it names: a spec with an architecture, read with no file system.
    pub(crate) fn on_model(spec: (&str, &str), model: (&str, &str)) -> Result<Tam, String> {
        let e = |e: fairlane_sim::SpecError| e.to_string();
        let spec_doc = Doc::parse(spec.1, spec.0, PathBuf::from(".")).map_err(e)?;
        let mut doc = Doc::parse(model.1, model.0, PathBuf::from(".")).map_err(e)?;
        // The simulation is the spec's: its errors name the spec.
        doc.file = spec.0.to_string();
        if let Some(sim) = spec_doc.get("simulation") {
            doc.set("simulation", sim.clone()).map_err(e)?;
        }
        if let Some(name) = spec_doc.get("name") {
            doc.set("model.name", name.clone()).map_err(e)?;
        }
        fairlane_sim::from_doc(doc).map(Tam).map_err(e)
    }

    /// Set a field of its `[simulation]` (`client.1.threads`,
    /// `request.c2.path.2.net_bytes`).
    pub(crate) fn set(&mut self, path: &str, value: impl Into<toml::Value>) -> Result<(), String> {
        self.0.set(path, value.into()).map_err(|e| e.to_string())
    }

    /// Client `client`'s threads (closed loop).
    pub(crate) fn set_threads(&mut self, client: usize, threads: u32) -> Result<(), String> {
        self.set(&format!("client.{client}.threads"), i64::from(threads))
    }

    /// A number of the `[simulation]` section.
    pub(crate) fn number(&self, path: &str) -> Option<f64> {
        match self.0.doc().get(&format!("simulation.{path}"))? {
            toml::Value::Integer(i) => Some(*i as f64),
            toml::Value::Float(x) => Some(*x),
            _ => None,
        }
    }

    /// Simulated seconds and the warm-up.
    pub(crate) fn duration(&self) -> f64 {
        self.0.duration()
    }

    /// The warm-up (s).
    pub(crate) fn warmup(&self) -> f64 {
        self.0.warmup()
    }

    /// Run it; the run of its first scheduler.
    pub(crate) fn go(&self) -> Result<TamRun, String> {
        let runs = run(self.0.as_ref(), 1, &mut |_| {})?;
        typed::<TamRuns>(runs.as_ref())
            .and_then(|r| r.runs.first().cloned())
            .ok_or_else(|| format!("{}: not a TAM simulation", self.0.name()))
    }
}

/// The simulator's CDF of service-lag σ across tenants, one line per run.
pub(crate) fn lag_sigma_cdf(runs: &[&RunResult], title: &str) -> LineChart {
    fairlane_sim::pool::report::lag_sigma_cdf(runs, title)
}

/// The simulator's thread-occupancy chart of one run.
pub(crate) fn occupancy_chart(r: &RunResult, title: String) -> Occupancy {
    fairlane_sim::pool::report::occupancy_chart(r, title)
}

/// Each client's share of an LLM run's service within its arrival window.
pub(crate) fn llm_shares(r: &LlmResult) -> Vec<f64> {
    fairlane_sim::llm::report::shares(r)
}

/// The simulator's chart of the accumulated service difference, one line per LLM run.
pub(crate) fn llm_difference_chart(title: &str, runs: &[&LlmRun]) -> String {
    fairlane_sim::llm::report::difference_chart(title, runs).to_svg()
}

/// The simulator's chart of each client's service rate over time in one LLM run.
pub(crate) fn llm_service_chart(title: String, r: &LlmResult) -> String {
    fairlane_sim::llm::report::service_chart(title, r).to_svg()
}
