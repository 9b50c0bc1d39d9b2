//! The scheduling seam: the one interface every executor drives (DESIGN.md, "the life of a
//! request").

use crate::levels::{LevelView, LevelsConfig};
use crate::types::{Decision, Error, Request, TenantId, Ticket};

/// A fair scheduler behind the seam
/// `enqueue → dequeue(worker) → progress* → complete`: the hot path, what an executor calls
/// for every request. Administration (workers, weights, targets) is [`Admin`] and read-only
/// introspection is [`Inspect`]; both are supertraits, so a `Box<dyn Scheduler<T>>` offers
/// every method. An implementation writes the five hot-path methods, the four of [`Admin`]
/// (one defaulted) and the seven of [`Inspect`] (two defaulted).
///
/// The scheduler never reads a clock: every call carries `now`, in the executor's time unit
/// (simulated seconds, nanoseconds since start, …). Costs are in the executor's cost unit
/// (simulated work, CPU nanoseconds, seconds of upstream time). Times are treated as
/// monotone: a `now` earlier than one already seen is taken as the latest seen, so threads
/// that read the clock before taking a lock do not trip it.
///
/// # Example
///
/// ```
/// use fairlane_core::{Algorithm, Config, Decision, Request, Scheduler, TenantId};
///
/// // 2DFQ on two workers, costs known up front.
/// let mut s = Config::new(Algorithm::TwoDfq).workers(2).build::<&str>().unwrap();
/// s.enqueue(Request::new(1u64, 0u32, "small").with_cost(1.0), 0.0).unwrap();
/// s.enqueue(Request::new(2u64, 0u32, "large").with_cost(4.0), 0.0).unwrap();
///
/// let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
/// assert_eq!(d.request.payload, "small"); // smallest virtual finish tag first
/// s.complete(d.ticket, 1.0, 1.0).unwrap(); // measured cost 1.0, charged retroactively
/// assert!(matches!(s.dequeue(1, 1.0).unwrap(), Decision::Run(_)));
/// assert!(matches!(s.dequeue(0, 1.0).unwrap(), Decision::Empty));
/// ```
pub trait Scheduler<T>: Admin + Inspect {
    /// Add a request to its tenant's queue. A tenant seen for the first time is created with
    /// the default weight. Returns the request's ticket.
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error>;

    /// Choose the request that worker `worker` runs next, charging its tenant the known or
    /// estimated cost. See [`Decision`] for what each answer obliges the executor to do
    /// (in particular [`Decision::RetryAt`]).
    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error>;

    /// Report the cumulative resource usage of a running request so far (refresh charging,
    /// 2DFQ §5: the executor calls it periodically, e.g. every 10 ms, for long requests).
    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error>;

    /// Report that a running request finished having used `used` in total (retroactive
    /// charging, 2DFQ §5, and the cost estimator's update).
    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error>;

    /// Remove a request that is still queued (its client went away) and hand it back.
    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error>;
}

/// Administration of a scheduler: workers, weights, targets, tenants. Executors call these
/// rarely (an operator's change, an adaptive depth controller), never per request. A
/// supertrait of [`Scheduler`]: `dyn Scheduler<T>` and `S: Scheduler<T>` callers reach these
/// methods without importing the trait; a concrete type's caller imports it.
pub trait Admin {
    /// Change the number of workers (an adaptive depth controller does). 2DFQ re-staggers
    /// its eligibility; running requests are unaffected.
    fn set_workers(&mut self, workers: usize) -> Result<(), Error>;

    /// Set a tenant's weight φ at `now` (creating the tenant if it is new). Takes effect for
    /// the tenant's next charge and its next finish tag.
    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error>;

    /// Set a tenant's response-time target (`None` = no target), in the unit of `now`.
    /// EDF dispatches by deadline = arrival + target (Facade, the interposed paper's
    /// baseline); the other algorithms share by weight and ignore it.
    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        let _ = (tenant, now);
        check_target(target)
    }

    /// Forget a tenant that has nothing queued or running (its estimates too).
    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error>;

    /// Take a new configuration of priority levels, keeping every queued and running request
    /// (a reload; [`LevelScheduler::reconfigure`](crate::levels::LevelScheduler::reconfigure)).
    /// A scheduler without levels refuses: levels, like the algorithm, come at restart.
    fn set_levels(&mut self, levels: &LevelsConfig) -> Result<(), Error> {
        let _ = levels;
        Err(Error::InvalidConfig {
            field: "levels",
            reason: "this scheduler has no priority levels; they come with a restart".into(),
        })
    }
}

/// Introspection of a scheduler: read-only, for executors' set-up, metrics and dashboards.
/// A supertrait of [`Scheduler`], like [`Admin`].
pub trait Inspect {
    /// The algorithm's short name (`"2dfq"`, `"wfq"`, …).
    fn name(&self) -> &'static str;

    /// How many workers (threads, issue slots, cores) the scheduler serves. Workers are
    /// numbered `0..workers()`; 2DFQ's eligibility depends on the number.
    fn workers(&self) -> usize;

    /// Whether every request must carry its cost up front (an oracle estimator or the exact
    /// GPS clock): an executor holding only the built scheduler asks here, and refuses a
    /// costless request before it reaches the scheduler.
    fn requires_cost(&self) -> bool {
        false
    }

    /// A tenant's current state, if the scheduler knows it.
    fn tenant(&self, tenant: TenantId) -> Option<TenantView>;

    /// Requests queued, over all tenants.
    fn queued(&self) -> usize;

    /// Requests running, over all tenants.
    fn running(&self) -> usize;

    /// The system virtual time, for schedulers that keep one.
    fn virtual_time(&self) -> Option<f64> {
        None
    }

    /// The priority levels, by id ([`LevelScheduler`](crate::levels::LevelScheduler));
    /// empty for a scheduler without levels.
    fn levels(&self) -> Vec<LevelView<'_>> {
        Vec::new()
    }
}

/// A scheduler built once and handed to any executor: the simulator, [`FairPool`], `FairGate`
/// and the proxy all drive a `Box<dyn Scheduler<u64> + Send>`, the payload being a key into
/// the executor's own table of waiting work.
///
/// [`FairPool`]: https://docs.rs/fairlane-runtime
pub type BoxedScheduler = Box<dyn Scheduler<u64> + Send>;

/// A response-time target must be finite and > 0.
pub(crate) fn check_target(target: Option<f64>) -> Result<(), Error> {
    match target {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::InvalidConfig {
            field: "target",
            reason: format!("must be finite and > 0, got {t}"),
        }),
        _ => Ok(()),
    }
}

/// A snapshot of one tenant inside a scheduler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TenantView {
    /// The tenant.
    pub id: TenantId,
    /// Its weight φ.
    pub weight: f64,
    /// Requests waiting.
    pub queued: usize,
    /// Requests running.
    pub running: usize,
    /// Whether the tenant is in the active set A of 2DFQ Fig. 7.
    pub active: bool,
    /// The tenant's virtual start tag S_f (virtual-time schedulers) or deficit counter (DRR).
    pub tag: f64,
}
