//! A multi-tenant database server for CPU reservations (Das et al., VLDB '14 §6): `cores`
//! cores running non-preemptive quanta (a task runs at most one quantum, then re-enters the
//! scheduler), tenants whose connections issue queries of a given CPU demand with think time
//! (OLTP-like short quanta, DSS-like long ones), bursty tenants, and the aggregate
//! utilization cap. Scheduled by `fairlane_core::reserve` (LDF, DRR, EDF, no reservations)
//! and metered by its [`Meter`](fairlane_core::reserve::Meter).
//!
//! Its spec ([`DbSpec`], documented in `docs/reservations.md`) is the `model = "cores"` kind
//! of the simulator's experiments ([`crate::experiment`]). It runs on the shared engine: the
//! one event queue and run loop ([`crate::events`]), the [`Cores`] service, the one RNG stream
//! scheme ([`crate::rng::stream_id`]). Deterministic: each tenant draws from its own stream
//! of the spec seed, and events at the same instant run in the order they were scheduled, so
//! the same spec and seed give the same results.
//!
//! ```
//! let spec = fairlane_sim::cores::DbSpec::parse(r#"
//!     name = "two tenants"
//!     duration = 5.0
//!     server = { model = "cores", cores = 2 }
//!     schedulers = ["ldf"]
//!     [[tenant]]
//!     name = "gold"
//!     res = 60.0
//!     workload = { kind = "closed", connections = 4, demand = { kind = "constant", value = 0.02 } }
//!     [[tenant]]
//!     name = "bully"
//!     workload = { kind = "closed", connections = 8, demand = { kind = "constant", value = 0.02 } }
//! "#, "example.toml").unwrap();
//! let runs = fairlane_sim::cores::run_all(&spec, 1).unwrap();
//! let gold = &runs[0].tenants[0];
//! assert!(gold.cpu_mean >= 59.0); // its 60 % reservation is met
//! ```

pub mod report;
pub mod run;
pub mod spec;

pub use run::{run_all, run_all_with, DbRun, DbTenantResult};
pub use spec::{DbSpec, RESERVATION_SCHEDULERS};

use crate::batch::BatchProgress;
use crate::doc::Doc;
use crate::error::{AnyError, SpecError};
use crate::experiment::{Experiment, RunOptions, Runs};

/// A database-server spec: its document and its typed sections.
#[derive(Clone, Debug)]
pub struct DbSpecFile {
    /// The document (`set` edits it).
    pub doc: Doc,
    /// The parsed spec.
    pub spec: DbSpec,
}

impl DbSpecFile {
    /// The spec a parsed document describes.
    pub fn from_doc(doc: Doc) -> Result<DbSpecFile, SpecError> {
        let spec = DbSpec::from_doc(&doc)?;
        Ok(DbSpecFile { doc, spec })
    }
}

impl Experiment for DbSpecFile {
    crate::experiment::experiment_basics!();
    fn set_all(&mut self, changes: &[(String, toml::Value)]) -> Result<(), SpecError> {
        for (path, value) in changes {
            self.doc.set(path, value.clone())?;
        }
        self.spec = DbSpec::from_doc(&self.doc)?;
        Ok(())
    }
    fn points(&self) -> Result<usize, SpecError> {
        Ok(self.spec.points().len())
    }
    fn planned_runs(&self) -> Result<usize, SpecError> {
        let mut n = 0;
        for p in self.spec.points() {
            n += self
                .spec
                .policies(p.and_then(|s| s.alpha))
                .map_err(|m| self.doc.err("schedulers", m))?
                .len();
        }
        Ok(n)
    }
    fn run(
        &self,
        opts: &RunOptions,
        progress: &mut (dyn FnMut(BatchProgress) + Send),
    ) -> Result<Box<dyn Runs>, AnyError> {
        let mut spec = self.spec.clone();
        spec.max_events = opts.max_events;
        if opts.point.is_some() {
            let sweep = std::mem::take(&mut spec.sweep);
            // A spec without a sweep has one point: itself.
            let points = if sweep.is_empty() {
                vec![None]
            } else {
                sweep.into_iter().map(Some).collect()
            };
            spec.sweep = crate::experiment::pick(points, opts.point)?
                .into_iter()
                .flatten()
                .collect();
        }
        let runs = run_all_with(&spec, opts.jobs, progress)?;
        Ok(Box::new(CoresRuns {
            runs,
            utilization_cap: spec.utilization_cap,
        }))
    }
}

/// The runs of a database-server spec.
#[derive(Clone, Debug, Default)]
pub struct CoresRuns {
    /// Point-major, then scheduler order.
    pub runs: Vec<DbRun>,
    /// The spec's aggregate utilization cap (%): the CPU the reservations share.
    pub utilization_cap: f64,
}

impl Runs for CoresRuns {
    crate::experiment::runs_basics!(report);
    fn work(&self) -> (u64, &'static str) {
        (
            self.runs.iter().map(|r| r.dispatches).sum(),
            "dispatched quanta",
        )
    }
    crate::experiment::tenant_names!();
}
