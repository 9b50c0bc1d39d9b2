//! One spec format, discriminated by its server's kind: `[server] model = "workers"` (the
//! default) or `"blackbox"` is a request-level spec ([`SpecFile`]); `model = "cores"` is a
//! database-server spec for CPU reservations ([`DbSpec`]); a Thread Architecture Model file
//! (`[[stage]]`s) or `model = "tam"` is a multi-stage TAM simulation ([`TamSpecFile`]). An unknown field is reported
//! against the fields of the spec's own kind, with a hint when it belongs to the other.

use std::path::{Path, PathBuf};

use crate::dbserver::{DbRun, DbSpec};
use crate::engine::{RunResult, SimError};
use crate::spec::{parse_toml, read_spec, set_path, SpecError, SpecFile};
use crate::tam::{TamRun, TamSpecFile};

/// Top-level fields only a database-server spec has.
const CORES_ONLY: [&str; 3] = ["cores", "interval", "utilization_cap"];
/// Top-level fields only a worker-pool or black-box spec has.
const POOL_ONLY: [&str; 3] = ["speed", "metrics", "suite"];

/// A spec of any kind.
// One value per command: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum AnySpec {
    /// Workers or a black box behind a fair scheduler.
    Pool(SpecFile),
    /// A database server's cores behind a CPU-reservation scheduler.
    Cores {
        /// Where it came from (for errors).
        file: String,
        /// The raw document (overrides edit it).
        doc: toml::Value,
        /// The parsed spec.
        spec: DbSpec,
    },
    /// A Thread Architecture Model run as a multi-stage service.
    Tam(TamSpecFile),
}

/// The runs of a spec of any kind.
#[derive(Clone, Debug)]
pub enum AnyRuns {
    /// Runs of a pool or black-box spec.
    Pool(Vec<RunResult>),
    /// Runs of a database-server spec.
    Cores(Vec<DbRun>),
    /// Runs of a TAM simulation.
    Tam(Vec<TamRun>),
}

impl AnySpec {
    /// Read and parse a spec file of any kind.
    pub fn load(path: &Path) -> Result<AnySpec, SpecError> {
        let (file, text, dir) = read_spec(path)?;
        AnySpec::parse(&text, &file, dir)
    }

    /// Parse spec text; `file` names it in errors and `dir` anchors trace paths.
    pub fn parse(text: &str, file: &str, dir: PathBuf) -> Result<AnySpec, SpecError> {
        let doc = parse_toml(text, file)?;
        if crate::tam::is_tam(&doc) {
            return TamSpecFile::from_doc(doc, file, &dir).map(AnySpec::Tam);
        }
        if is_cores(&doc) {
            let spec =
                DbSpec::from_value(&doc, file).map_err(|e| hint(e, &POOL_ONLY, POOL_HINT))?;
            return Ok(AnySpec::Cores {
                file: file.to_string(),
                doc,
                spec,
            });
        }
        if doc.get("server").is_none() && doc.get("cores").is_some() {
            return Err(SpecError {
                file: file.to_string(),
                field: "cores".into(),
                message: "a database-server spec names its kind and cores in [server]: \
                          server = { model = \"cores\", cores = N }"
                    .into(),
            });
        }
        SpecFile::parse(text, file, dir)
            .map(AnySpec::Pool)
            .map_err(|e| hint(e, &CORES_ONLY, CORES_HINT))
    }

    /// The spec's name.
    pub fn name(&self) -> &str {
        match self {
            AnySpec::Pool(s) => &s.spec.name,
            AnySpec::Cores { spec, .. } => &spec.name,
            AnySpec::Tam(t) => &t.spec.name,
        }
    }

    /// Its description.
    pub fn description(&self) -> &str {
        match self {
            AnySpec::Pool(s) => &s.spec.description,
            AnySpec::Cores { spec, .. } => &spec.description,
            AnySpec::Tam(t) => &t.spec.description,
        }
    }

    /// Set a field (`seed`, `duration`, …) and re-check the spec.
    pub fn set(&mut self, path: &str, value: toml::Value) -> Result<(), SpecError> {
        match self {
            AnySpec::Pool(s) => s.set(path, value),
            AnySpec::Tam(t) => t.set(path, value),
            AnySpec::Cores { file, doc, spec } => {
                set_path(doc, path, value).map_err(|message| SpecError {
                    file: file.clone(),
                    field: path.to_string(),
                    message,
                })?;
                let max = spec.max_events;
                *spec = DbSpec::from_value(doc, file)?;
                spec.max_events = max;
                Ok(())
            }
        }
    }

    /// Run every point under every scheduler, `jobs` at a time, each run capped at
    /// `max_events` events. Spec errors found while resolving come back as [`SimError`]s
    /// carrying their file and field.
    pub fn run(
        &self,
        jobs: usize,
        max_events: u64,
        progress: &mut (dyn FnMut(crate::BatchProgress) + Send),
    ) -> Result<AnyRuns, AnyError> {
        match self {
            AnySpec::Pool(s) => {
                let mut scenarios = s.scenarios().map_err(AnyError::Spec)?;
                for sc in &mut scenarios {
                    sc.max_events = max_events;
                }
                crate::run_all_batch(&scenarios, jobs, progress)
                    .map(AnyRuns::Pool)
                    .map_err(AnyError::Run)
            }
            AnySpec::Cores { spec, .. } => {
                let mut spec = spec.clone();
                spec.max_events = max_events;
                crate::dbserver::run_all_with(&spec, jobs, progress)
                    .map(AnyRuns::Cores)
                    .map_err(AnyError::Run)
            }
            AnySpec::Tam(t) => {
                let mut spec = t.spec.clone();
                spec.max_events = max_events;
                let runs = spec.schedulers.len();
                crate::tam::run_all(&spec, &mut |fraction| {
                    progress(crate::BatchProgress {
                        fraction,
                        runs_done: ((fraction * runs as f64) as usize).min(runs),
                        runs,
                    })
                })
                .map(AnyRuns::Tam)
                .map_err(AnyError::Run)
            }
        }
    }
}

/// A spec error (exit status 2 in the CLI) or a run error (1).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AnyError {
    /// The spec is wrong.
    Spec(SpecError),
    /// A run failed or was refused.
    Run(SimError),
}

impl std::fmt::Display for AnyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnyError::Spec(e) => e.fmt(f),
            AnyError::Run(e) => e.fmt(f),
        }
    }
}

// Display is the inner error's own message (a transparent wrapper), so `source` stays `None`:
// a reporter walking the chain would print the same message twice.
impl std::error::Error for AnyError {}

fn is_cores(doc: &toml::Value) -> bool {
    doc.get("server")
        .and_then(|s| s.get("model"))
        .and_then(toml::Value::as_str)
        == Some("cores")
}

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
