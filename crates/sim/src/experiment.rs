//! One interface over every kind of experiment the simulator runs. A spec is read once
//! ([`crate::load`], [`crate::parse`]) into the [`Experiment`] of its kind, changed field by field
//! ([`Experiment::set`]: `--set PATH=VALUE`, Python's `set=`), and run ([`Experiment::run`]);
//! its [`Runs`] print themselves, write their JSON summary, CSV files and HTML page. The
//! command line, the Python package and `fairlane-repro` see only these two traits.
//!
//! The kind is told by the spec's server in one place, [`crate::kinds::from_doc`]:
//! `[server] model = "workers"` (the default) or `"blackbox"` is a request-level spec
//! ([`crate::pool`]); `model = "cores"` a database server with CPU reservations
//! ([`crate::cores`]); a Thread Architecture Model file (`[[stage]]`s) or `model = "tam"` a
//! multi-stage TAM simulation ([`crate::tam`]); `model = "llm"` a continuous-batching LLM
//! server ([`crate::llm`]). An unknown field is reported against the
//! fields of the spec's own kind, with a hint when it belongs to another. A new kind is one
//! more module implementing the two traits and one more arm there.

use std::any::Any;
use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;

use crate::batch::BatchProgress;
use crate::doc::Doc;
use crate::error::{AnyError, SpecError};

/// How to run an experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOptions {
    /// Runs in parallel (at least 1).
    pub jobs: usize,
    /// The cap on events per run (`--max-events`): a run estimated to need more is refused
    /// before it starts, one that reaches it stops with an error.
    pub max_events: u64,
    /// Run only this point (`0..points()`), or every point.
    pub point: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            jobs: 1,
            max_events: crate::events::DEFAULT_MAX_EVENTS,
            point: None,
        }
    }
}

/// A spec of any kind, read and checked: what `fairlane simulate` runs.
pub trait Experiment: Send + Sync + std::fmt::Debug {
    /// A copy (to vary one field per point of a hand-made sweep).
    fn clone_box(&self) -> Box<dyn Experiment>;
    /// The spec's name.
    fn name(&self) -> &str;
    /// Its description.
    fn description(&self) -> &str;
    /// Simulated seconds of each run.
    fn duration(&self) -> f64;
    /// Seconds at the start of each run left out of the statistics.
    fn warmup(&self) -> f64;
    /// The document as written and changed so far.
    fn doc(&self) -> &Doc;
    /// Set fields by path (`seed`, `duration`, `tenant.small.count`,
    /// `simulation.client.C2.threads`), all of them, then check the spec again. Paths are
    /// the document's (see [`crate::doc`]); a TAM spec takes the paths of its
    /// `[simulation]` with or without `simulation.` in front.
    fn set_all(&mut self, changes: &[(String, toml::Value)]) -> Result<(), SpecError>;
    /// Set one field ([`Experiment::set_all`]).
    fn set(&mut self, path: &str, value: toml::Value) -> Result<(), SpecError> {
        self.set_all(&[(path.to_string(), value)])
    }
    /// Its points: sweep points or suite runs, 1 for a spec without them.
    fn points(&self) -> Result<usize, SpecError>;
    /// The runs [`Experiment::run`] makes: points × schedulers.
    fn planned_runs(&self) -> Result<usize, SpecError>;
    /// Run every point (or `opts.point`) under every scheduler, `opts.jobs` at a time.
    /// `progress` hears of the whole batch. Spec errors found while resolving a point come
    /// back as [`AnyError::Spec`].
    fn run(
        &self,
        opts: &RunOptions,
        progress: &mut (dyn FnMut(BatchProgress) + Send),
    ) -> Result<Box<dyn Runs>, AnyError>;
    /// The kind's own spec type, for a caller that reads its sections
    /// (`spec.as_any().downcast_ref::<SpecFile>()`).
    fn as_any(&self) -> &dyn Any;
}

impl Clone for Box<dyn Experiment> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The fields of a run's JSON summary that measure wall-clock time, the only ones that
/// differ between two runs of one spec and seed.
pub const TIMING_FIELDS: [&str; 3] = ["wall_seconds", "events_per_second", "visits_per_second"];

/// The runs of one spec of a kind that keeps nothing beside them (the worker pool, the
/// TAM model, the LLM server): each kind names it (`PoolRuns`, `TamRuns`, `LlmRuns`) and
/// implements [`Runs`] for it.
#[derive(Clone, Debug)]
pub struct KindRuns<R> {
    /// Point-major, then in the order of the spec's schedulers (an LLM spec's policies).
    pub runs: Vec<R>,
}

impl<R> Default for KindRuns<R> {
    fn default() -> Self {
        KindRuns { runs: Vec::new() }
    }
}

/// The runs of an experiment, in point-major then scheduler order, and their outputs.
pub trait Runs: Send + Sync + std::fmt::Debug {
    /// How many runs.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The JSON summary `fairlane simulate --json` prints.
    fn summary_json(&self) -> Value;
    /// [`Runs::summary_json`] without its wall-clock fields ([`TIMING_FIELDS`]): what the
    /// same spec and seed give every time.
    fn untimed_json(&self) -> Value {
        let mut v = self.summary_json();
        for r in v
            .get_mut("runs")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(o) = r.as_object_mut() {
                for k in TIMING_FIELDS {
                    o.remove(k);
                }
            }
        }
        v
    }
    /// Write the CSV files under `dir/csv`.
    fn write_csv(&self, dir: &Path) -> io::Result<()>;
    /// Write `dir/index.html` with tables and charts.
    fn write_html(&self, dir: &Path, title: &str, description: &str) -> io::Result<()>;
    /// The tables `fairlane simulate` prints without `--json`.
    fn print(&self, out: &mut dyn Write) -> io::Result<()>;
    /// The runs' total of their unit of work and its name, for a one-line summary
    /// (`events`, `dispatched quanta`).
    fn work(&self) -> (u64, &'static str);
    /// Per run, its tenants' (clients') names in spec order.
    fn tenants(&self) -> Vec<Vec<String>>;
    /// Per run, its time series in long form, `[[series, tenant, t, value], …]`, as far as
    /// the kind keeps them; none by default.
    fn series_json(&self) -> Value {
        Value::Array(Vec::new())
    }
    /// Per run, its thread occupancy `{"t0", "dt", "cells"}`, if the kind records one.
    fn occupancy_json(&self) -> Value {
        Value::Array(Vec::new())
    }
    /// The kind's own runs, for an analysis that reads their fields
    /// (`runs.as_any().downcast_ref::<PoolRuns>()`).
    fn as_any(&self) -> &dyn Any;
}

/// Write a [`Runs`]' outputs where `fairlane simulate --out DIR` puts them: the CSV files,
/// then the HTML page.
pub fn write_outputs(
    runs: &dyn Runs,
    dir: &Path,
    title: &str,
    description: &str,
) -> io::Result<()> {
    runs.write_csv(dir)?;
    runs.write_html(dir, title, description)
}

/// The points to run: all of them, or only `point` (an error naming how many there are
/// when it is out of range).
pub(crate) fn pick<T>(mut points: Vec<T>, point: Option<usize>) -> Result<Vec<T>, AnyError> {
    match point {
        None => Ok(points),
        Some(i) if i < points.len() => Ok(vec![points.swap_remove(i)]),
        Some(i) => Err(AnyError::Run(crate::error::SimError::spec(format!(
            "point {i} out of range: the spec has {}",
            points.len()
        )))),
    }
}

/// Every run's tenants by name, in spec order: [`Runs::tenants`] of a kind whose runs
/// have `tenants` with `name`s.
macro_rules! tenant_names {
    () => {
        fn tenants(&self) -> Vec<Vec<String>> {
            self.runs
                .iter()
                .map(|r| r.tenants.iter().map(|t| t.name.clone()).collect())
                .collect()
        }
    };
}
pub(crate) use tenant_names;

/// The methods every kind's [`Experiment`] implements alike, for a type with a `doc: Doc`
/// and a typed `spec` whose `name`, `description`, `duration` and `warmup` are fields.
macro_rules! experiment_basics {
    () => {
        fn clone_box(&self) -> Box<dyn $crate::experiment::Experiment> {
            Box::new(self.clone())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn doc(&self) -> &$crate::doc::Doc {
            &self.doc
        }
        fn name(&self) -> &str {
            &self.spec.name
        }
        fn description(&self) -> &str {
            &self.spec.description
        }
        fn duration(&self) -> f64 {
            self.spec.duration
        }
        fn warmup(&self) -> f64 {
            self.spec.warmup
        }
    };
}
pub(crate) use experiment_basics;

/// The methods every kind's [`Runs`] implements alike, for a type whose `runs` field holds
/// them and whose kind's report module `$report` has `summary_json`, `write_csv`, `print`
/// and `write_html` over a slice of them (`write_html` then takes the `$html` arguments).
macro_rules! runs_basics {
    ($report:ident $(, $html:expr)*) => {
        fn len(&self) -> usize {
            self.runs.len()
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn summary_json(&self) -> serde_json::Value {
            $report::summary_json(&self.runs)
        }
        fn write_csv(&self, dir: &std::path::Path) -> std::io::Result<()> {
            $report::write_csv(dir, &self.runs)
        }
        fn print(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
            $report::print(out, &self.runs)
        }
        fn write_html(
            &self,
            dir: &std::path::Path,
            title: &str,
            description: &str,
        ) -> std::io::Result<()> {
            $report::write_html(dir, title, description, &self.runs $(, $html)*)
        }
    };
}
pub(crate) use runs_basics;
