//! # fairlane-sim
//!
//! A deterministic discrete-event simulator for fair schedulers. A server is a stage of `n`
//! workers of a given rate pulling from any `fairlane-core` scheduler through the seam;
//! tenants arrive backlogged, open (Poisson, ON/OFF), closed-loop or from a trace, with costs
//! from constant, normal, log-normal, exponential, uniform, empirical, histogram or pooled
//! distributions. Each run measures per-tenant service, service lag against the exact GPS
//! reference, latency percentiles, the Gini index over time and thread occupancy.
//!
//! Experiments are TOML specs of four kinds, one [`Experiment`] interface over them
//! ([`experiment`]): a pool of workers or a black box ([`pool`]), a database server with CPU
//! reservations ([`cores`]), a multi-stage Thread Architecture Model ([`tam`]), and a
//! continuous-batching LLM server with a KV-cache budget ([`llm`]). The same spec and seed
//! give the same results.
//!
//! ```
//! use fairlane_sim::SpecFile;
//! let spec = SpecFile::parse(r#"
//!     name = "two tenants"
//!     duration = 5.0
//!     schedulers = ["wfq", "2dfq"]
//!     [server]
//!     workers = 2
//!     rate = 1000.0
//!     [[tenant]]
//!     name = "small"
//!     arrival = { kind = "backlogged" }
//!     cost = { kind = "constant", value = 1.0 }
//!     [[tenant]]
//!     name = "large"
//!     arrival = { kind = "backlogged" }
//!     cost = { kind = "constant", value = 100.0 }
//! "#, "example.toml", ".".into()).unwrap();
//! let results = fairlane_sim::run_all(&spec.scenarios().unwrap(), 1, &mut |_| {}).unwrap();
//! let wfq = &results[0];
//! assert_eq!(wfq.scheduler, "wfq");
//! // Equal weights: both tenants get about half of the 2 × 1000 units/s.
//! let small = &wfq.tenants[0];
//! assert!((small.work / 5.0 - 1000.0).abs() < 50.0);
//! ```

pub mod batch;
pub mod cores;
pub mod doc;
pub mod error;
pub mod events;
pub mod experiment;
pub mod kinds;
pub mod llm;
pub mod metrics;
pub mod pool;
mod report;
pub mod rng;
pub mod sched;
pub mod service;
pub mod tam;
mod ziggurat;

pub use batch::BatchProgress;
pub use error::{AnyError, FieldError, SimError, SimErrorKind, SpecError};
pub use experiment::{Experiment, KindRuns, RunOptions, Runs};
pub use kinds::{from_doc, load, parse};
pub use pool::{
    run, run_all, run_all_batch, run_with_scheduler, PoolRuns, RunResult, Scenario, Spec, SpecFile,
};
pub use sched::SchedulerChoice;
