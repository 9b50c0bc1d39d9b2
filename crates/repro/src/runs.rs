//! Every call into `fairlane_sim` lives here, so that a change of the simulator's API is
//! ported in one place: parsing a spec, shortening it for `--quick`, running it, and the
//! simulator's own report charts. The analyses only read the result types re-exported here.

use std::path::PathBuf;

use fairlane_plot::{LineChart, Occupancy};
pub use fairlane_sim::dbserver::{DbRun, DbTenantResult};
pub use fairlane_sim::metrics::TenantResult;
pub use fairlane_sim::RunResult;

/// The results of one experiment's spec, by the kind of server it simulates.
pub(crate) enum Runs {
    /// A pool of workers or the black-box server (`fairlane_sim::run_all`).
    Pool(Vec<RunResult>),
    /// The database server with CPU reservations (`fairlane_sim::dbserver`), with the spec's
    /// utilization cap (the CPU % the reservations share).
    Db {
        /// Every run, sweep-point-major then scheduler.
        runs: Vec<DbRun>,
        /// The spec's `utilization_cap` (%).
        utilization_cap: f64,
    },
}

/// A parsed spec ready to run.
pub(crate) struct Parsed {
    pub name: String,
    pub description: String,
    /// Runs it will make (points × schedulers).
    pub runs: usize,
    /// Simulated seconds per run.
    pub duration: f64,
    kind: Kind,
}

enum Kind {
    Pool(Vec<fairlane_sim::Scenario>),
    Db(Box<fairlane_sim::dbserver::DbSpec>),
}

/// Which simulator a spec is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Server {
    Pool,
    Db,
}

/// Parse `text` (named `file` in errors; `dir` anchors trace paths). `quick` halves the
/// simulated time and runs 40 suite runs instead of 150.
pub(crate) fn parse(
    server: Server,
    text: &str,
    file: &str,
    dir: PathBuf,
    quick: bool,
) -> Result<Parsed, String> {
    match server {
        Server::Pool => {
            let mut spec =
                fairlane_sim::SpecFile::parse(text, file, dir).map_err(|e| e.to_string())?;
            if quick {
                let (d, w) = (spec.spec.duration / 2.0, spec.spec.warmup / 2.0);
                spec.set("duration", toml::Value::Float(d))
                    .map_err(|e| e.to_string())?;
                spec.set("warmup", toml::Value::Float(w))
                    .map_err(|e| e.to_string())?;
                if spec.spec.suite.is_some() {
                    spec.set("suite.runs", toml::Value::Integer(40))
                        .map_err(|e| e.to_string())?;
                }
            }
            let scenarios = spec.scenarios().map_err(|e| e.to_string())?;
            Ok(Parsed {
                name: spec.spec.name.clone(),
                description: spec.spec.description.clone(),
                runs: scenarios.iter().map(|s| s.schedulers.len()).sum(),
                duration: spec.spec.duration,
                kind: Kind::Pool(scenarios),
            })
        }
        Server::Db => {
            let mut spec =
                fairlane_sim::dbserver::DbSpec::parse(text, file).map_err(|e| e.to_string())?;
            if quick {
                spec.duration /= 2.0;
                spec.warmup /= 2.0;
            }
            Ok(Parsed {
                name: spec.name.clone(),
                description: spec.description.clone(),
                runs: spec.sweep.len().max(1) * spec.schedulers.len(),
                duration: spec.duration,
                kind: Kind::Db(Box::new(spec)),
            })
        }
    }
}

impl Parsed {
    /// Run every point under every scheduler, `jobs` at a time; `progress` gets the fraction
    /// of this spec done. Returns the results and a count of simulated events (dispatched
    /// quanta for the database server) for the report.
    pub(crate) fn run(
        &self,
        jobs: usize,
        progress: &mut (dyn FnMut(f64) + Send),
    ) -> Result<(Runs, u64, &'static str), String> {
        match &self.kind {
            Kind::Pool(scenarios) => {
                let r =
                    fairlane_sim::run_all(scenarios, jobs, progress).map_err(|e| e.to_string())?;
                let events = r.iter().map(|r| r.events).sum();
                Ok((Runs::Pool(r), events, "events"))
            }
            Kind::Db(spec) => {
                let r = fairlane_sim::dbserver::run_all(spec, jobs).map_err(|e| e.to_string())?;
                progress(1.0);
                let n = r.iter().map(|r| r.dispatches).sum();
                Ok((
                    Runs::Db {
                        runs: r,
                        utilization_cap: spec.utilization_cap,
                    },
                    n,
                    "dispatched quanta",
                ))
            }
        }
    }
}

/// The simulator's CDF of service-lag σ across tenants, one line per run.
pub(crate) fn lag_sigma_cdf(runs: &[&RunResult], title: &str) -> LineChart {
    fairlane_sim::report::lag_sigma_cdf(runs, title)
}

/// The simulator's thread-occupancy chart of one run.
pub(crate) fn occupancy_chart(r: &RunResult, title: String) -> Occupancy {
    fairlane_sim::report::occupancy_chart(r, title)
}
