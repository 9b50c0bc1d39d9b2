//! The request-level kind: tenants' requests through a fair scheduler into a pool of worker
//! threads (`[server] model = "workers"`, 2DFQ's server) or into a black box of hidden
//! components behind D issue slots (`model = "blackbox"`, the interposed schedulers'
//! server). Its spec ([`SpecFile`]) is read into typed sections ([`spec`]) that check
//! themselves ([`resolve`]) into one [`Scenario`] per point; the [`engine`] runs a scenario
//! under each scheduler; [`report`] writes what happened.

pub mod blackbox;
pub mod dist;
pub mod engine;
pub mod levels;
pub mod production;
pub mod report;
pub mod resolve;
mod scenario;
pub mod spec;
pub mod trace;
pub mod workload;

use std::path::{Path, PathBuf};

pub use engine::{run, run_with_scheduler, RunResult};
pub use scenario::Scenario;
pub use spec::Spec;

use crate::batch::BatchProgress;
use crate::doc::Doc;
use crate::error::{AnyError, SimError, SpecError};
use crate::experiment::{Experiment, KindRuns, RunOptions, Runs};
use crate::sched::SchedulerChoice;

/// The most runs a `[suite]` may ask for: each is a scenario held in memory.
pub const MAX_SUITE_RUNS: usize = 100_000;

/// A worker-pool or black-box spec: its document and its typed sections.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// The document (sweeps, suites and `set` edit it).
    pub doc: Doc,
    /// The parsed spec.
    pub spec: Spec,
}

impl SpecFile {
    /// Read and parse a spec file.
    pub fn load(path: &Path) -> Result<SpecFile, SpecError> {
        SpecFile::from_doc(Doc::load(path)?)
    }

    /// Parse spec text; `file` names it in errors and `dir` anchors trace paths.
    pub fn parse(text: &str, file: &str, dir: PathBuf) -> Result<SpecFile, SpecError> {
        SpecFile::from_doc(Doc::parse(text, file, dir)?)
    }

    /// The spec a parsed document describes.
    pub fn from_doc(doc: Doc) -> Result<SpecFile, SpecError> {
        let spec = doc.typed()?;
        Ok(SpecFile { doc, spec })
    }

    /// Every point the spec describes: one, each sweep point, or each suite run. Each is
    /// resolved and checked.
    pub fn scenarios(&self) -> Result<Vec<Scenario>, SpecError> {
        let (file, dir) = (&self.doc.file, &self.doc.dir);
        let points = self.points_set()?;
        if points.is_empty() {
            return Ok(vec![self.spec.resolve(file, dir, String::new())?]);
        }
        let mut out = Vec::with_capacity(points.len());
        for (label, set) in points {
            let doc =
                self.doc
                    .point(&label, set.iter().map(|(k, v)| (k, v)), &["sweep", "suite"])?;
            let spec: Spec = doc.typed()?;
            out.push(spec.resolve(file, dir, label)?);
        }
        Ok(out)
    }

    /// Each point's label and the fields it sets: the sweep points, then the suite's runs.
    fn points_set(&self) -> Result<Vec<Point>, SpecError> {
        let spec = &self.spec;
        let mut points: Vec<Point> = Vec::new();
        for p in &spec.sweep {
            points.push((p.label.clone(), p.set.clone().into_iter().collect()));
        }
        if let Some(suite) = &spec.suite {
            points.extend(suite_points(suite, spec.seed).map_err(|e| e.in_file(&self.doc.file))?);
        }
        Ok(points)
    }
}

/// A labelled point: field paths and the values they take.
type Point = (String, Vec<(String, toml::Value)>);

/// `[suite]`: `runs` points, each drawing its `vary` fields at random from the seed.
fn suite_points(
    suite: &spec::SuiteSpec,
    seed: u64,
) -> Result<Vec<Point>, crate::error::FieldError> {
    use crate::error::FieldError;
    if suite.runs == 0 || suite.runs > MAX_SUITE_RUNS {
        return Err(FieldError::new(
            "suite.runs",
            format!(
                "must be between 1 and {MAX_SUITE_RUNS} (each run is a scenario held in \
                 memory), got {}",
                suite.runs
            ),
        ));
    }
    for (path, r) in &suite.vary {
        if !(r.min.is_finite() && r.max.is_finite() && r.min <= r.max) || (r.log && r.min <= 0.0) {
            return Err(FieldError::new(
                format!("suite.vary.{path:?}"),
                format!(
                    "needs finite min ≤ max (and min > 0 when log), got [{}, {}]",
                    r.min, r.max
                ),
            ));
        }
    }
    let mut rng = crate::rng::Rng::new(seed, 0x5017E);
    let width = suite.runs.to_string().len();
    Ok((0..suite.runs)
        .map(|k| {
            let set = suite
                .vary
                .iter()
                .map(|(path, r)| (path.clone(), r.draw(&mut rng)))
                .collect();
            (format!("run-{k:0width$}"), set)
        })
        .collect())
}

impl spec::Range {
    /// One draw: uniform, or log-uniform, rounded when `int`.
    fn draw(&self, rng: &mut crate::rng::Rng) -> toml::Value {
        let u = rng.uniform();
        let x = if self.log {
            (self.min.ln() + u * (self.max.ln() - self.min.ln())).exp()
        } else {
            self.min + u * (self.max - self.min)
        };
        if self.int {
            toml::Value::Integer(x.round().clamp(self.min.ceil(), self.max.floor()) as i64)
        } else {
            toml::Value::Float(x)
        }
    }
}

impl Experiment for SpecFile {
    crate::experiment::experiment_basics!();
    fn set_all(&mut self, changes: &[(String, toml::Value)]) -> Result<(), SpecError> {
        for (path, value) in changes {
            self.doc.set(path, value.clone())?;
        }
        self.spec = self.doc.typed()?;
        Ok(())
    }
    fn points(&self) -> Result<usize, SpecError> {
        Ok(self.scenarios()?.len())
    }
    fn planned_runs(&self) -> Result<usize, SpecError> {
        Ok(self.scenarios()?.iter().map(|s| s.schedulers.len()).sum())
    }
    fn run(
        &self,
        opts: &RunOptions,
        progress: &mut (dyn FnMut(BatchProgress) + Send),
    ) -> Result<Box<dyn Runs>, AnyError> {
        let mut scenarios = crate::experiment::pick(self.scenarios()?, opts.point)?;
        for sc in &mut scenarios {
            sc.max_events = opts.max_events;
        }
        let runs = run_all_batch(&scenarios, opts.jobs, progress)?;
        Ok(Box::new(PoolRuns { runs }))
    }
}

/// Run every scheduler on every scenario, `jobs` runs at a time, results in scenario-major
/// then scheduler order. `progress(done_fraction)` reports the whole batch.
pub fn run_all(
    scenarios: &[Scenario],
    jobs: usize,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Vec<RunResult>, SimError> {
    run_all_batch(scenarios, jobs, &mut |p: BatchProgress| {
        progress(p.fraction)
    })
}

/// [`run_all`] reporting runs done as well.
pub fn run_all_batch(
    scenarios: &[Scenario],
    jobs: usize,
    progress: &mut (dyn FnMut(BatchProgress) + Send),
) -> Result<Vec<RunResult>, SimError> {
    let tasks: Vec<(&Scenario, &SchedulerChoice)> = scenarios
        .iter()
        .flat_map(|sc| sc.schedulers.iter().map(move |c| (sc, c)))
        .collect();
    crate::batch::parallel(tasks.len(), jobs, progress, |i, report| {
        let (sc, choice) = tasks[i];
        engine::run(sc, choice, report).map(|mut r| {
            r.scheduler = choice.name.clone();
            r
        })
    })
}

/// The runs of a worker-pool or black-box spec.
pub type PoolRuns = KindRuns<RunResult>;

impl Runs for PoolRuns {
    crate::experiment::runs_basics!(report, 12);
    fn work(&self) -> (u64, &'static str) {
        (self.runs.iter().map(|r| r.events).sum(), "events")
    }
    crate::experiment::tenant_names!();
    fn series_json(&self) -> serde_json::Value {
        self.runs.iter().map(report::series_json).collect()
    }
    fn occupancy_json(&self) -> serde_json::Value {
        self.runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "t0": r.occupancy.t0,
                    "dt": r.occupancy.dt,
                    "cells": r.occupancy.cells,
                })
            })
            .collect()
    }
}
