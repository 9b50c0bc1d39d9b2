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
//! multi-stage TAM simulation ([`crate::tam`]). An unknown field is reported against the
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
