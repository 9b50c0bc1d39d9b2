//! The one place a spec's kind is told: `[server] model` (or a TAM file's stages) picks the
//! [`Experiment`] that reads it. Everything else — the command line, the Python package,
//! `fairlane-repro` — holds a `Box<dyn Experiment>`.
//!
//! A new kind of server is a module implementing [`Experiment`] and
//! [`crate::experiment::Runs`], and one more arm here.

use std::path::{Path, PathBuf};

use crate::doc::Doc;
use crate::error::SpecError;
use crate::experiment::Experiment;

/// Read and parse a spec file of any kind.
pub fn load(path: &Path) -> Result<Box<dyn Experiment>, SpecError> {
    from_doc(Doc::load(path)?)
}

/// Parse spec text of any kind; `file` names it in errors and `dir` anchors relative paths.
pub fn parse(text: &str, file: &str, dir: PathBuf) -> Result<Box<dyn Experiment>, SpecError> {
    from_doc(Doc::parse(text, file, dir)?)
}

/// The kinds of experiment.
enum Kind {
    Pool,
    Cores,
    Tam,
    Llm,
}

impl Kind {
    /// The spec's kind: a TAM file has stages or `[server] model = "tam"`; the database
    /// server is `model = "cores"`; the LLM server `model = "llm"`; anything else is a
    /// pool or black box.
    fn of(doc: &Doc) -> Kind {
        let model = doc.get("server.model").and_then(toml::Value::as_str);
        if doc.get("stage").is_some_and(toml::Value::is_array) || model == Some("tam") {
            Kind::Tam
        } else if model == Some("cores") {
            Kind::Cores
        } else if model == Some("llm") {
            Kind::Llm
        } else {
            Kind::Pool
        }
    }
}

/// The experiment a parsed document describes: the one place a spec's kind is told.
pub fn from_doc(doc: Doc) -> Result<Box<dyn Experiment>, SpecError> {
    Ok(match Kind::of(&doc) {
        Kind::Tam => Box::new(crate::tam::TamSpecFile::from_doc(doc)?),
        Kind::Cores => Box::new(
            crate::cores::DbSpecFile::from_doc(doc).map_err(|e| hint(e, &POOL_ONLY, POOL_HINT))?,
        ),
        Kind::Llm => Box::new(crate::llm::LlmSpecFile::from_doc(doc)?),
        Kind::Pool => {
            if doc.get("server").is_none() && doc.get("cores").is_some() {
                return Err(doc.err(
                    "cores",
                    "a database-server spec names its kind and cores in [server]: \
                     server = { model = \"cores\", cores = N }",
                ));
            }
            Box::new(
                crate::pool::SpecFile::from_doc(doc)
                    .map_err(|e| hint(e, &CORES_ONLY, CORES_HINT))?,
            )
        }
    })
}

/// Top-level fields only a database-server spec has.
const CORES_ONLY: [&str; 3] = ["cores", "interval", "utilization_cap"];
/// Top-level fields only a worker-pool or black-box spec has.
const POOL_ONLY: [&str; 3] = ["speed", "metrics", "suite"];

const CORES_HINT: &str =
    "it belongs to database-server specs, which set [server] model = \"cores\"";
const POOL_HINT: &str =
    "it belongs to worker-pool and black-box specs; this spec's [server] model is \"cores\"";

/// Add a hint to an unknown-field error whose field belongs to the other kind.
fn hint(mut e: SpecError, other: &[&str], why: &str) -> SpecError {
    if let Some(name) = e
        .message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    {
        // The path of an unknown top-level field is the field itself.
        let top = e.field.is_empty() || e.field == "." || e.field == name;
        let server_cores =
            e.field.starts_with("server") && name == "cores" && other.contains(&"cores");
        if (top && other.contains(&name)) || server_cores {
            e.message = format!("{} ({why})", e.message);
        }
    }
    e
}
