//! Thread Architecture Models as multi-stage services (seeds/004 §3, "The simulation
//! framework"): the same model file that `fairlane tam check` analyses is the blueprint the
//! simulator runs, with an optional `[simulation]` section for hosts, threads, schedulers,
//! request paths and clients (docs/tam.md, "Simulate it").
//!
//! ```
//! use fairlane_sim::tam::TamSpecFile;
//! let spec = TamSpecFile::parse(r#"
//!     [model]
//!     name = "two stages"
//!     [[stage]]
//!     name = "front"
//!     scheduling = "pluggable"
//!     resources = { cpu = true }
//!     downstream = ["disk"]
//!     [[stage]]
//!     name = "disk"
//!     scheduling = "on_demand"
//!     resources = { io = true }
//!     [simulation]
//!     duration = 2.0
//!     [[simulation.request]]
//!     name = "read"
//!     path = [{ stage = "front", cpu_us = 100 }, { stage = "disk", io_bytes = 100_000 }]
//!     [[simulation.client]]
//!     name = "C1"
//!     threads = 1
//! "#, "two.toml").unwrap();
//! let runs = fairlane_sim::tam::run_all(&spec.spec, 1, &mut |_| {}).unwrap();
//! // One thread, 0.1 ms of CPU then 1 ms of disk (100 KB at 100 MB/s): 1.1 ms a request.
//! let c1 = &runs[0].clients[0];
//! assert!((c1.latency_mean - 0.0011).abs() < 1e-5);
//! ```

pub mod result;
pub mod run;
pub mod spec;
pub mod whatif;

pub use result::{summary_json, write_csv, write_html, ClientResult, StageResult, TamRun};
pub use run::{run, run_all};
pub use spec::TamSpec;

use std::path::{Path, PathBuf};

use fairlane_tam::Model;
use toml::Value;

use crate::batch::BatchProgress;
use crate::doc::{Doc, SweepPoint};
use crate::error::{AnyError, SpecError};
use crate::experiment::{Experiment, KindRuns, RunOptions, Runs};

/// A TAM simulation file: a model file (with `[[stage]]`s) and its optional `[simulation]`
/// section, or a spec with `[server] model = "tam"` and `architecture = "PATH"` naming a
/// model file, plus its own `[simulation]`; either may have `[[sweep]]` points.
#[derive(Clone, Debug)]
pub struct TamSpecFile {
    /// The document (`set` and sweep points edit its `[simulation]`).
    pub doc: Doc,
    /// The model simulated.
    pub model: Model,
    /// The parsed simulation.
    pub spec: TamSpec,
}

/// Top-level fields of a spec naming its architecture.
const SPEC_KEYS: [&str; 5] = ["name", "description", "server", "simulation", "sweep"];

impl TamSpecFile {
    /// Parse a model file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<TamSpecFile, SpecError> {
        Self::from_doc(Doc::parse(text, file, PathBuf::from("."))?)
    }

    /// Read a TAM simulation file (a model file, or a spec naming one in
    /// `[server] architecture`).
    pub fn load(path: &Path) -> Result<TamSpecFile, SpecError> {
        Self::from_doc(Doc::load(path)?)
    }

    /// Build from a parsed document; its `dir` anchors `architecture` paths.
    pub fn from_doc(doc: Doc) -> Result<TamSpecFile, SpecError> {
        let model = model_of(&doc)?;
        Self::with_model(doc, model)
    }

    /// The simulation of `model` that `doc`'s `[simulation]` describes.
    pub(crate) fn with_model(doc: Doc, model: Model) -> Result<TamSpecFile, SpecError> {
        let spec = TamSpec::from_model(&model, doc.get("simulation"), &doc.file)?;
        Ok(TamSpecFile { doc, model, spec })
    }

    /// The `[[sweep]]` points.
    fn sweep(&self) -> Result<Vec<SweepPoint>, SpecError> {
        match self.doc.get("sweep") {
            None => Ok(Vec::new()),
            Some(v) => {
                serde_path_to_error::deserialize::<_, Vec<SweepPoint>>(v.clone()).map_err(|e| {
                    let path = e.path().to_string();
                    let field = if path == "." {
                        "sweep".into()
                    } else {
                        format!("sweep{path}")
                    };
                    self.doc.err(field, e.inner().message().to_string())
                })
            }
        }
    }

    /// Each point's simulation, labelled: the sweep's points, or the spec alone.
    pub fn points(&self) -> Result<Vec<(String, TamSpec)>, SpecError> {
        let sweep = self.sweep()?;
        if sweep.is_empty() {
            return Ok(vec![(String::new(), self.spec.clone())]);
        }
        let mut out = Vec::new();
        for p in &sweep {
            let mut doc = self.doc.point(&p.label, std::iter::empty(), &["sweep"])?;
            for (path, value) in &p.set {
                set_simulation(&mut doc, path, value.clone()).map_err(|mut e| {
                    e.field = format!("set.{path:?} (point {:?})", p.label);
                    e
                })?;
            }
            let spec = TamSpec::from_model(&self.model, doc.get("simulation"), &doc.file)?;
            out.push((p.label.clone(), spec));
        }
        Ok(out)
    }
}

/// The model a document simulates: the document itself when it has stages, else the file
/// its `[server] architecture` names (whose name and description the document may
/// replace).
fn model_of(doc: &Doc) -> Result<Model, SpecError> {
    if let (Some(_), Some(table)) = (doc.get("stage"), doc.value.as_table()) {
        return Model::from_table(table).map_err(|e| doc.err("", e.to_string()));
    }
    for k in doc.value.as_table().into_iter().flat_map(|t| t.keys()) {
        if !SPEC_KEYS.contains(&k.as_str()) {
            return Err(doc.err(
                k.as_str(),
                "unknown field; a TAM spec has name, description, [server], [simulation] \
                 and [[sweep]]",
            ));
        }
    }
    let arch = doc
        .get("server.architecture")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            doc.err(
                "server.architecture",
                "name the model file to simulate, e.g. architecture = \"../models/hbase.toml\"",
            )
        })?;
    let server = doc.get("server").and_then(Value::as_table);
    if let Some(k) = server
        .into_iter()
        .flat_map(|s| s.keys())
        .find(|k| !["model", "architecture"].contains(&k.as_str()))
    {
        return Err(doc.err(
            format!("server.{k}"),
            "unknown field; a TAM spec's [server] has model and architecture",
        ));
    }
    let mut m = Model::load(doc.dir.join(arch))
        .map_err(|e| doc.err("server.architecture", e.to_string()))?;
    if let Some(n) = doc.get("name").and_then(Value::as_str) {
        m.name = n.to_string();
    }
    if let Some(d) = doc.get("description").and_then(Value::as_str) {
        m.description = Some(d.to_string());
    }
    Ok(m)
}

/// The default clients (see [`TamSpec::from_model`]) as the section would write them, so
/// that a path can name one (`simulation.client.C2.threads`) in a file that has none.
fn default_clients() -> Value {
    let client = |name: &str| {
        let mut t = toml::Table::new();
        t.insert("name".into(), Value::String(name.into()));
        t.insert(
            "threads".into(),
            Value::Integer(spec::DEFAULT_CLIENT_THREADS.into()),
        );
        Value::Table(t)
    };
    Value::Array(vec![client("C1"), client("C2")])
}

/// Set a field of the `[simulation]` section: `path` with or without `simulation.` in
/// front (`seed`, `client.C2.threads`).
fn set_simulation(doc: &mut Doc, path: &str, value: Value) -> Result<(), SpecError> {
    let full = if path.starts_with("simulation.") {
        path.to_string()
    } else {
        format!("simulation.{path}")
    };
    if let Some(t) = doc.value.as_table_mut() {
        let sim = t
            .entry("simulation")
            .or_insert_with(|| Value::Table(Default::default()));
        if full.starts_with("simulation.client.") {
            if let Some(s) = sim.as_table_mut() {
                s.entry("client").or_insert_with(default_clients);
            }
        }
    }
    doc.set(&full, value)
}

impl Experiment for TamSpecFile {
    crate::experiment::experiment_basics!();
    fn set_all(&mut self, changes: &[(String, Value)]) -> Result<(), SpecError> {
        for (path, value) in changes {
            set_simulation(&mut self.doc, path, value.clone())?;
        }
        self.spec = TamSpec::from_model(&self.model, self.doc.get("simulation"), &self.doc.file)?;
        Ok(())
    }
    fn points(&self) -> Result<usize, SpecError> {
        Ok(self.sweep()?.len().max(1))
    }
    fn planned_runs(&self) -> Result<usize, SpecError> {
        Ok(self.points()?.len() * self.spec.schedulers.len())
    }
    fn run(
        &self,
        opts: &RunOptions,
        progress: &mut (dyn FnMut(BatchProgress) + Send),
    ) -> Result<Box<dyn Runs>, AnyError> {
        let mut points = crate::experiment::pick(TamSpecFile::points(self)?, opts.point)?;
        for (_, spec) in &mut points {
            spec.max_events = opts.max_events;
        }
        let runs = run::run_points(&points, opts.jobs, progress)?;
        Ok(Box::new(TamRuns { runs }))
    }
}

/// The runs of a TAM simulation.
pub type TamRuns = KindRuns<TamRun>;

impl Runs for TamRuns {
    crate::experiment::runs_basics!(result);
    fn work(&self) -> (u64, &'static str) {
        (self.runs.iter().map(|r| r.visits).sum(), "stage visits")
    }
    fn tenants(&self) -> Vec<Vec<String>> {
        self.runs
            .iter()
            .map(|r| r.clients.iter().map(|c| c.name.clone()).collect())
            .collect()
    }
}
