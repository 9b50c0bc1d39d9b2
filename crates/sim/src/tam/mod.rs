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
//! let runs = fairlane_sim::tam::run_all(&spec.spec, &mut |_| {}).unwrap();
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

use crate::spec::{set_path, SpecError};

/// A TAM simulation file: a model file (with `[[stage]]`s) and its optional `[simulation]`
/// section, or a spec with `[server] model = "tam"` and `architecture = "PATH"` naming a
/// model file, plus its own `[simulation]`.
#[derive(Clone, Debug)]
pub struct TamSpecFile {
    /// Where it came from (for errors).
    pub file: String,
    /// The raw document (overrides edit it).
    pub doc: toml::Value,
    /// The model simulated.
    pub model: Model,
    /// The parsed simulation.
    pub spec: TamSpec,
}

/// Whether a parsed document is a TAM simulation (it has stages or names an architecture).
pub fn is_tam(doc: &toml::Value) -> bool {
    doc.get("stage").is_some_and(toml::Value::is_array)
        || doc
            .get("server")
            .and_then(|s| s.get("model"))
            .and_then(toml::Value::as_str)
            == Some("tam")
}

impl TamSpecFile {
    /// Parse a model file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<TamSpecFile, SpecError> {
        let doc: toml::Value = toml::from_str(text).map_err(|e| SpecError {
            file: file.to_string(),
            field: String::new(),
            message: format!("not valid TOML: {}", e.message().trim()),
        })?;
        Self::from_doc(doc, file, Path::new("."))
    }

    /// Build from a parsed document; `dir` anchors `architecture` paths.
    pub fn from_doc(doc: toml::Value, file: &str, dir: &Path) -> Result<TamSpecFile, SpecError> {
        let err = |field: &str, message: String| SpecError {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        let model = if doc.get("stage").is_some() {
            let text = toml::to_string(&doc).map_err(|e| err("", e.to_string()))?;
            Model::from_toml(&text).map_err(|e| err("", e.to_string()))?
        } else {
            let server = doc.get("server").and_then(toml::Value::as_table);
            for k in doc.as_table().into_iter().flat_map(|t| t.keys()) {
                if !["name", "description", "server", "simulation"].contains(&k.as_str()) {
                    return Err(err(
                        k,
                        "unknown field; a TAM spec has name, description, [server] and [simulation]"
                            .into(),
                    ));
                }
            }
            let arch = server
                .and_then(|s| s.get("architecture"))
                .and_then(toml::Value::as_str)
                .ok_or_else(|| {
                    err(
                        "server.architecture",
                        "name the model file to simulate, e.g. architecture = \"../models/hbase.toml\"".into(),
                    )
                })?;
            if let Some(k) = server
                .into_iter()
                .flat_map(|s| s.keys())
                .find(|k| !["model", "architecture"].contains(&k.as_str()))
            {
                return Err(err(
                    &format!("server.{k}"),
                    "unknown field; a TAM spec's [server] has model and architecture".into(),
                ));
            }
            let path: PathBuf = dir.join(arch);
            let mut m =
                Model::load(&path).map_err(|e| err("server.architecture", e.to_string()))?;
            if let Some(n) = doc.get("name").and_then(toml::Value::as_str) {
                m.name = n.to_string();
            }
            if let Some(d) = doc.get("description").and_then(toml::Value::as_str) {
                m.description = Some(d.to_string());
            }
            m
        };
        let spec = TamSpec::from_model(&model, doc.get("simulation"), file)?;
        Ok(TamSpecFile {
            file: file.to_string(),
            doc,
            model,
            spec,
        })
    }

    /// Set a field (`seed`, `duration` go to `simulation.*`) and re-check.
    pub fn set(&mut self, path: &str, value: toml::Value) -> Result<(), SpecError> {
        let full = if path.starts_with("simulation.") {
            path.to_string()
        } else {
            format!("simulation.{path}")
        };
        if let Some(t) = self.doc.as_table_mut() {
            t.entry("simulation")
                .or_insert_with(|| toml::Value::Table(Default::default()));
        }
        set_path(&mut self.doc, &full, value).map_err(|message| SpecError {
            file: self.file.clone(),
            field: full.clone(),
            message,
        })?;
        let max = self.spec.max_events;
        self.spec = TamSpec::from_model(&self.model, self.doc.get("simulation"), &self.file)?;
        self.spec.max_events = max;
        Ok(())
    }
}
