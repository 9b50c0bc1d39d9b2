//! The LLM server as the simulator's fourth kind of experiment (`[server] model = "llm"`):
//! the spec file, its sweep points, and its runs (points × policies) behind the
//! [`Experiment`] and [`Runs`] interface.

use super::report;
use super::spec::{LlmSpec, Resolved};
use super::{simulate, LlmRun};
use crate::batch::{parallel, BatchProgress};
use crate::doc::Doc;
use crate::error::{AnyError, SimError, SpecError};
use crate::experiment::{Experiment, KindRuns, RunOptions, Runs};

/// An LLM-server spec: its document, its sections as written, and what they resolve to.
#[derive(Clone, Debug)]
pub struct LlmSpecFile {
    /// The document (`set` and sweep points edit it).
    pub doc: Doc,
    /// The sections as written.
    pub sections: LlmSpec,
    /// The spec resolved (without its sweep).
    pub spec: Resolved,
}

impl LlmSpecFile {
    /// Parse spec text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<LlmSpecFile, SpecError> {
        Self::from_doc(Doc::parse(text, file, ".".into())?)
    }

    /// The spec a parsed document describes.
    pub fn from_doc(doc: Doc) -> Result<LlmSpecFile, SpecError> {
        let (sections, spec) = LlmSpec::from_doc(&doc)?;
        Ok(LlmSpecFile {
            doc,
            sections,
            spec,
        })
    }

    /// Each point, labelled: the `[[sweep]]` points (each the document with its `set`
    /// applied), or the spec alone under an empty label.
    pub fn points(&self) -> Result<Vec<(String, Resolved)>, SpecError> {
        if self.sections.sweep.is_empty() {
            return Ok(vec![(String::new(), self.spec.clone())]);
        }
        let mut out = Vec::new();
        for p in &self.sections.sweep {
            let doc = self.doc.point(&p.label, &p.set, &["sweep"])?;
            let (_, resolved) = LlmSpec::from_doc(&doc).map_err(|mut e| {
                e.field = format!("sweep {:?}: {}", p.label, e.field);
                e
            })?;
            out.push((p.label.clone(), resolved));
        }
        Ok(out)
    }
}

impl Experiment for LlmSpecFile {
    crate::experiment::experiment_basics!();
    fn set_all(&mut self, changes: &[(String, toml::Value)]) -> Result<(), SpecError> {
        for (path, value) in changes {
            self.doc.set(path, value.clone())?;
        }
        *self = Self::from_doc(self.doc.clone())?;
        Ok(())
    }
    fn points(&self) -> Result<usize, SpecError> {
        Ok(self.sections.sweep.len().max(1))
    }
    fn planned_runs(&self) -> Result<usize, SpecError> {
        Ok(LlmSpecFile::points(self)?
            .iter()
            .map(|(_, r)| r.policies.len())
            .sum())
    }
    fn run(
        &self,
        opts: &RunOptions,
        progress: &mut (dyn FnMut(BatchProgress) + Send),
    ) -> Result<Box<dyn Runs>, AnyError> {
        let points = crate::experiment::pick(LlmSpecFile::points(self)?, opts.point)?;
        Ok(Box::new(run_points(&points, opts, progress)?))
    }
}

/// Run every point under each of its policies, `opts.jobs` at a time. A point whose
/// arrivals and samples alone pass `opts.max_events` is refused before it starts.
pub fn run_points(
    points: &[(String, Resolved)],
    opts: &RunOptions,
    progress: &mut (dyn FnMut(BatchProgress) + Send),
) -> Result<LlmRuns, SimError> {
    let mut tasks = Vec::new();
    for (p, (label, r)) in points.iter().enumerate() {
        let estimate = min_events(r);
        if estimate > opts.max_events as f64 {
            return Err(SimError::event_cap(format!(
                "point {label:?}: at least about {estimate:.0} events (arrivals, samples and \
                 decoded tokens), more than the cap of {} (raise it with --max-events, or \
                 shorten the run)",
                opts.max_events
            )));
        }
        for k in 0..r.policies.len() {
            tasks.push((p, k));
        }
    }
    let traces = points
        .iter()
        .map(|(_, r)| r.suite.trace(r.seed))
        .collect::<Result<Vec<_>, _>>()?;
    let runs = parallel(tasks.len(), opts.jobs, progress, |i, _| {
        let (p, k) = tasks[i];
        let (label, r) = &points[p];
        let options = super::LlmOptions {
            max_events: opts.max_events,
            ..r.options
        };
        let result = simulate(&traces[p], &r.server, &r.policies[k], &options)
            .map_err(|e| e.context(format!("{label} {}", r.policies[k].name).trim()))?;
        Ok(LlmRun {
            label: label.clone(),
            result,
        })
    })?;
    Ok(LlmRuns { runs })
}

/// A lower bound, within a factor of a few, of the events one run of `r` takes (each
/// decoded token counts as one): its arrivals (half of them, for ON/OFF), its samples and
/// its output tokens.
fn min_events(r: &Resolved) -> f64 {
    let s = &r.suite;
    let arrivals = 0.5
        * match s.mode {
            super::Mode::DistShift => 2.0 * s.duration,
            _ => s.rates.iter().sum::<f64>() * s.duration,
        };
    let mean = |(lo, hi): (u64, u64)| (lo as f64 + hi as f64 - 1.0) / 2.0;
    // Client 0's outputs are a quarter of the suite's, or its prompts, in the short/long
    // modes.
    let output = match s.mode {
        super::Mode::PoissonShortLong => mean(s.output) / 4.0,
        super::Mode::PoissonShortLong2 => mean(s.output).min(mean(s.input)),
        _ => mean(s.output),
    };
    arrivals + s.duration / r.options.sample_every + arrivals * output
}

/// The runs of an LLM-server spec.
pub type LlmRuns = KindRuns<LlmRun>;

impl Runs for LlmRuns {
    crate::experiment::runs_basics!(report);
    fn work(&self) -> (u64, &'static str) {
        (
            self.runs.iter().map(|r| r.result.generated_tokens).sum(),
            "generated tokens",
        )
    }
    fn tenants(&self) -> Vec<Vec<String>> {
        self.runs
            .iter()
            .map(|r| r.result.clients.iter().map(|c| c.name.clone()).collect())
            .collect()
    }
    fn series_json(&self) -> serde_json::Value {
        self.runs.iter().map(report::series_json).collect()
    }
}
