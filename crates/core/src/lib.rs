//! # fairlane-core
//!
//! Fair request scheduling for multi-tenant services, behind one seam that every executor
//! (simulator, thread pool, async gate, proxy) drives the same way:
//!
//! ```text
//! enqueue(request, now) ─▶ dequeue(worker, now) ─▶ progress(ticket, used, now)* ─▶ complete(ticket, used, now)
//! ```
//!
//! Algorithms ([`Algorithm`]): FIFO, DRR, WFQ over n workers (MSFQ), WF²Q over n
//! workers, and 2DFQ (Mace et al., SIGCOMM '16 §4); and, in front of a black-box server with
//! D issue slots (the workers), Min-SFQ(D), SFQ(D), FSFQ(D), Request Windows RW(D) and EDF
//! (Jin, Chase & Kaur, SIGMETRICS '04), with an adaptive depth controller ([`depth`]); and
//! for LLM serving the Virtual Token Counter and its variants ([`vtc`]: Sheng et al.,
//! OSDI '24), with the token cost function executors share ([`TokenCost`]). Each
//! works with known costs or with a cost estimator ([`EstimatorKind`]: oracle, last value, EMA, pessimistic L_max) and retroactive
//! and refresh charging ([`Charging`], §5). 2DFQ with the pessimistic estimator is 2DFQᴱ
//! (Fig. 7). Virtual time is exact GPS ([`GpsClock`]) or an approximation ([`VirtualClock`]).
//!
//! The crate has no threads, no clock and no I/O: time and measured costs are passed in.
//! See the crate README and `docs/algorithms.md` for which algorithm to choose.
//!
//! ```
//! use fairlane_core::{Config, Decision, Request, Scheduler};
//!
//! let mut s = Config::preset("2dfqe").unwrap().workers(4).build::<u32>().unwrap();
//! for i in 0..8u32 {
//!     s.enqueue(Request::new(u64::from(i % 2), 0u32, i), 0.0).unwrap(); // costs unknown
//! }
//! let mut now = 0.0;
//! while let Decision::Run(d) = s.dequeue(0, now).unwrap() {
//!     now += 1.0;
//!     s.complete(d.ticket, 1.0, now).unwrap(); // measured cost, charged retroactively
//! }
//! assert_eq!(s.queued(), 0);
//! ```

#![forbid(unsafe_code)]

/// Builder setters, each with its doc comment: `name(arg: Type) => field = value;` writes
/// `pub fn name(mut self, arg: Type) -> Self { self.field = value; self }`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

mod book;
pub mod clock;
mod config;
pub mod depth;
mod drr;
mod edf;
pub mod estimate;
mod fifo;
pub mod histogram;
mod interposed;
pub mod levels;
mod queued;
pub mod reserve;
mod rw;
mod scheduler;
mod select;
mod splitmix;
mod tags;
mod types;
mod util;
pub mod vtc;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;

pub use clock::{GpsClock, VirtualClock};
pub use config::{Algorithm, Config, MAX_WORKERS, PRESETS};
pub use estimate::{CostEstimator, EstimatorKind};
pub use scheduler::{Admin, BoxedScheduler, Inspect, Scheduler, TenantView};
pub use tags::Charging;
pub use types::{
    ClassId, Decision, Dispatch, Error, LevelFieldError, LevelId, Request, TenantId, Ticket,
    MAX_WEIGHT, MIN_WEIGHT,
};
pub use vtc::{Lift, TokenCost};
