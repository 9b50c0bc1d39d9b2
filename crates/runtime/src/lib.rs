//! # fairlane-runtime
//!
//! Fair scheduling inside a real service, driven through fairlane-core's one seam
//! (`enqueue → dequeue(worker) → progress* → complete`):
//!
//! * [`FairPool`] — n OS threads; a core scheduler (2DFQᴱ by default) decides which tenant's
//!   task runs next on which thread. Each task is charged its thread CPU time, retroactively at
//!   completion, and a refresh thread reports running tasks' CPU time every 10 ms (2DFQ §5
//!   refresh charging). Panics are caught and returned to the submitter; queues are bounded
//!   per tenant and overall; shutdown runs or hands back every accepted task.
//! * [`FairGate`] — for async code: at most n concurrent holders ("seats"); waiters queue per
//!   tenant; a dropped permit reports its cost (time held, or a cost the holder sets).
//!   Cancellation-safe and executor-agnostic.
//! * [`FairLayer`] — a `tower::Layer` putting a [`FairGate`] in front of any `Service`
//!   (axum, tonic, hyper), tenant and class read from the request by a closure.
//! * Priority levels above tenants on both (the core's `LevelScheduler`, APF's model):
//!   `levels(LevelsConfig)` on either builder, a [`Route`] per request, a
//!   [`LevelSnapshot`] per level for debug dumps, reloads without losing a request.
//! * Per-tenant [`MetricsSnapshot`]s (queued, running, completed, rejected, wait-time and cost
//!   histograms), optionally exported through the `metrics` facade (feature `metrics`).
//!
//! ```
//! use fairlane_runtime::FairPool;
//!
//! let pool = FairPool::builder().workers(2).build().unwrap(); // 2DFQᴱ
//! let handles: Vec<_> = (0..8u64)
//!     .map(|i| pool.submit(i % 2, 0u32, move || i * i).unwrap())
//!     .collect();
//! let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(sum, 140);
//! let m = pool.metrics();
//! assert_eq!(m.tenant(0u64).unwrap().completed, 4);
//! ```
//!
//! Units: the pool's cost and time unit is the nanosecond (CPU nanoseconds with
//! [`CostClock::ThreadCpu`]); the gate's time unit is the nanosecond and its default cost is
//! nanoseconds held.

#![deny(unsafe_code)] // only `cpu` reads thread CPU clocks through libc

#[cfg(feature = "admin")]
pub mod admin;
pub mod config_file;
pub mod cpu;
mod error;
mod gate;
mod histogram;
mod id_hash;
mod layer;
mod levels;
mod meter;
mod oneshot;
mod pool;
mod setup;
mod slab;
mod stats;
mod time;
mod wake;

/// The crate README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;

pub use cpu::CostClock;
pub use error::{BuildError, LevelRefusal, Panic, SubmitError, TaskError};
pub use fairlane_core::levels::{LevelConfig, LevelsConfig};
pub use fairlane_core::BoxedScheduler;
pub use fairlane_core::LevelId;
pub use fairlane_core::{ClassId, Config, TenantId, TenantView};
pub use gate::{Acquire, AcquireError, FairGate, GateBuilder, Permit};
pub use histogram::Histogram;
pub use layer::{header_tenant, FairError, FairFuture, FairLayer, FairService};
pub use levels::{LevelSnapshot, Route};
pub use pool::{FairPool, PendingTask, PoolBuilder, TaskHandle};
pub use stats::{MetricsSnapshot, TenantMetrics};
pub use time::{AdvanceHook, Clock, ManualClock, SystemClock};
