//! The vocabulary shared by every scheduler: tenants, classes, requests, tickets, decisions.

use std::fmt;

/// Who is being isolated. The number is chosen by the caller (an index into its own tenant
/// table, a hash of an API key, …). Ties between equal tags are broken in favour of the lower id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(pub u64);

/// The API a request calls. Cost estimators keep their statistics per tenant *and* class
/// (2DFQ §5: "individually for each tenant on each API").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(pub u32);

/// A priority level of a [`LevelScheduler`](crate::levels::LevelScheduler): its index in the
/// [`LevelsConfig`](crate::levels::LevelsConfig)'s list, or [`LevelId::CATCH_ALL`]. Schedulers
/// without levels ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LevelId(pub u32);

impl LevelId {
    /// The configuration's catch-all level, whatever its index: where [`Request::new`] sends a
    /// request.
    pub const CATCH_ALL: LevelId = LevelId(u32::MAX);
}

impl Default for LevelId {
    fn default() -> Self {
        LevelId::CATCH_ALL
    }
}

impl fmt::Display for LevelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == LevelId::CATCH_ALL {
            f.write_str("the catch-all level")
        } else {
            write!(f, "level {}", self.0)
        }
    }
}

impl From<u64> for TenantId {
    fn from(v: u64) -> Self {
        TenantId(v)
    }
}
impl From<u32> for ClassId {
    fn from(v: u32) -> Self {
        ClassId(v)
    }
}
impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tenant {}", self.0)
    }
}
impl fmt::Display for ClassId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class {}", self.0)
    }
}

/// Names one request from `enqueue` until `complete` (or `cancel`). A ticket is never reused:
/// a stale ticket is reported as [`Error::UnknownTicket`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub(crate) u64);

impl Ticket {
    pub(crate) fn new(slot: u32, generation: u32) -> Self {
        Ticket(((generation as u64) << 32) | slot as u64)
    }
    pub(crate) fn slot(self) -> u32 {
        self.0 as u32
    }
    pub(crate) fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The raw value, for logs and maps.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ticket {}.{}", self.slot(), self.generation())
    }
}

/// One unit of work of one tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct Request<T> {
    /// Whose request it is.
    pub tenant: TenantId,
    /// Which API it calls (for cost estimation).
    pub class: ClassId,
    /// The cost, when the executor knows it up front (2DFQ §4). `None` means unknown: the
    /// scheduler's estimator supplies one (2DFQᴱ §5).
    pub cost: Option<f64>,
    /// What the executor wants back at dispatch (a closure, a connection, an id, `()`).
    pub payload: T,
    /// The priority level it belongs to ([`LevelId::CATCH_ALL`] unless set): read by a
    /// [`LevelScheduler`](crate::levels::LevelScheduler), ignored (and handed back as the
    /// catch-all) by schedulers without levels.
    pub level: LevelId,
    /// The flow distinguisher inside the level (APF's `distinguisherMethod`): the level's fair
    /// scheduler shares among flows, and a request's flow is its tenant plus this value. 0 (the
    /// default) is the tenant's own flow. Ignored, like `level`, without levels.
    pub distinguisher: u64,
}

impl<T> Request<T> {
    /// A request of unknown cost.
    pub fn new(tenant: impl Into<TenantId>, class: impl Into<ClassId>, payload: T) -> Self {
        Request {
            tenant: tenant.into(),
            class: class.into(),
            cost: None,
            payload,
            level: LevelId::CATCH_ALL,
            distinguisher: 0,
        }
    }

    setters! {
        /// The same request with a known cost.
        with_cost(cost: f64) => cost = Some(cost);
        /// The same request at priority level `level`.
        at_level(level: LevelId) => level = level;
        /// The same request in the flow `(tenant, distinguisher)` of its level.
        distinguished(distinguisher: u64) => distinguisher = distinguisher;
    }
}

/// What `dequeue` decided for a worker, and what the executor must do about it. Every
/// executor (simulator, pool, gate, proxy) honours it the same way:
///
/// * [`Run`](Decision::Run): start the request on the worker that asked.
/// * [`Empty`](Decision::Empty): nothing is queued; the worker idles until the next
///   `enqueue`.
/// * [`RetryAt(t)`](Decision::RetryAt): requests are queued but none may start now (a limit
///   or a request window holds them back). The worker idles and the executor asks again
///   (`dequeue` on its free workers) at the earliest of: time `t` (a timer), the next
///   `complete`, the next `enqueue`. `RetryAt(f64::INFINITY)` means "no time will help: ask
///   again after the next completion" (RW(D)'s closed windows open only when a request
///   completes), so no timer is armed. A `t` at or before `now` is treated as "ask again at
///   the next event", never as a busy loop.
#[derive(Debug)]
pub enum Decision<T> {
    /// Run this request on the worker that asked.
    Run(Dispatch<T>),
    /// Nothing is queued.
    Empty,
    /// Requests are queued but none may start now; ask again at this time (∞: after the next
    /// completion). Only schedulers that idle on purpose (limits, request windows) answer
    /// this. See [`Decision`] for the executor's obligations.
    RetryAt(f64),
}

impl<T> Decision<T> {
    /// The dispatch, if the decision is to run something.
    pub fn run(self) -> Option<Dispatch<T>> {
        match self {
            Decision::Run(d) => Some(d),
            _ => None,
        }
    }
}

/// A request handed to a worker.
#[derive(Debug)]
pub struct Dispatch<T> {
    /// Report `progress` and `complete` with this.
    pub ticket: Ticket,
    /// The request as it was enqueued.
    pub request: Request<T>,
    /// The cost the tenant was charged up front (the known cost or the estimate). Retroactive
    /// charging reconciles it with the measured cost at completion.
    pub charged: f64,
}

/// Everything a scheduler can refuse. Library code never panics on user input; it says which
/// value was wrong here.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A cost (known cost, used amount) that is NaN, infinite or negative.
    InvalidCost {
        /// Which argument carried it.
        what: &'static str,
        /// The value.
        value: f64,
    },
    /// A weight outside [`MIN_WEIGHT`, `MAX_WEIGHT`] (NaN, infinite, zero and negative
    /// weights included).
    InvalidWeight {
        /// The tenant.
        tenant: TenantId,
        /// The value.
        value: f64,
    },
    /// A `now` that is NaN or infinite (or, for the reservation scheduler, beyond
    /// [`MAX_TIME`](crate::reserve::MAX_TIME)).
    InvalidTime(f64),
    /// A worker index at or beyond the number of workers.
    InvalidWorker {
        /// The index asked for.
        worker: usize,
        /// How many workers the scheduler has.
        workers: usize,
    },
    /// The ticket was never issued, or its request already completed or was cancelled.
    UnknownTicket(Ticket),
    /// `progress` or `complete` on a request that is still queued.
    NotRunning(Ticket),
    /// `cancel` on a request that is already running.
    AlreadyRunning(Ticket),
    /// A cumulative usage report smaller than an earlier one for the same request.
    UsageDecreased {
        /// The request.
        ticket: Ticket,
        /// What was reported before.
        before: f64,
        /// What was reported now.
        now: f64,
    },
    /// The scheduler needs the cost up front (oracle estimation or the exact GPS clock) and
    /// the request has none.
    CostRequired {
        /// The tenant of the request.
        tenant: TenantId,
        /// Its class.
        class: ClassId,
    },
    /// `remove_tenant` on a tenant with queued or running requests.
    TenantBusy(TenantId),
    /// `remove_tenant` or a query on a tenant the scheduler does not know.
    UnknownTenant(TenantId),
    /// A configuration value outside its allowed range.
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is allowed, and what was given.
        reason: String,
    },
    /// A priority level's configuration value outside its allowed range
    /// ([`LevelsConfig`](crate::levels::LevelsConfig)): `levels[index].field` (boxed: the
    /// hot path's results stay small).
    InvalidLevel(Box<LevelFieldError>),
    /// A request for a priority level the scheduler does not have.
    UnknownLevel(LevelId),
    /// A priority level's queue is at its `queue_limit`: the request was not queued (its
    /// name is in [`Inspect::levels`](crate::Inspect::levels)).
    LevelFull {
        /// The level.
        level: LevelId,
        /// Its queue limit.
        limit: usize,
    },
}

/// Which field of which priority level is wrong ([`Error::InvalidLevel`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LevelFieldError {
    /// The level's index in the configuration's list.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// The field.
    pub field: &'static str,
    /// What is allowed, and what was given.
    pub reason: String,
}

impl Error {
    /// `levels[index].field` of the level `name` is wrong.
    pub(crate) fn invalid_level(
        index: usize,
        name: &str,
        field: &'static str,
        reason: String,
    ) -> Self {
        Error::InvalidLevel(Box::new(LevelFieldError {
            index,
            name: name.to_string(),
            field,
            reason,
        }))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidCost { what, value } => {
                write!(f, "invalid {what} {value}: costs must be finite and ≥ 0")
            }
            Error::InvalidWeight { tenant, value } => {
                write!(
                    f,
                    "invalid weight {value} for {tenant}: weights must be in [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}]"
                )
            }
            Error::InvalidTime(t) => write!(
                f,
                "invalid time {t}: must be finite (within ±1e100 for reservations)"
            ),
            Error::InvalidWorker { worker, workers } => {
                write!(
                    f,
                    "worker {worker} does not exist: workers are 0..{workers}"
                )
            }
            Error::UnknownTicket(t) => {
                write!(
                    f,
                    "{t} is unknown: never issued, already completed or cancelled"
                )
            }
            Error::NotRunning(t) => write!(f, "{t} is still queued, not running"),
            Error::AlreadyRunning(t) => write!(f, "{t} is already running and cannot be cancelled"),
            Error::UsageDecreased {
                ticket,
                before,
                now,
            } => write!(
                f,
                "usage of {ticket} went down from {before} to {now}: report cumulative usage"
            ),
            Error::CostRequired { tenant, class } => write!(
                f,
                "request of {tenant}, {class} has no cost, but this scheduler needs costs up front"
            ),
            Error::TenantBusy(t) => write!(f, "{t} still has queued or running requests"),
            Error::UnknownTenant(t) => write!(f, "{t} is unknown"),
            Error::InvalidConfig { field, reason } => write!(f, "invalid {field}: {reason}"),
            Error::InvalidLevel(e) => write!(
                f,
                "invalid levels[{}] ({:?}).{}: {}",
                e.index, e.name, e.field, e.reason
            ),
            Error::UnknownLevel(level) => write!(f, "{level} does not exist"),
            Error::LevelFull { level, limit } => write!(
                f,
                "priority {level} is full: {limit} requests queued (its queue_limit)"
            ),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn check_cost(what: &'static str, value: f64) -> Result<f64, Error> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(Error::InvalidCost { what, value })
    }
}

/// The smallest weight φ a tenant may have. With costs and weights in
/// [`MIN_WEIGHT`, `MAX_WEIGHT`], `cost / φ` and the weight sums of the virtual clocks stay far
/// from overflow and underflow (a weight of 1e-320 made `l/φ` infinite and 2DFQ's eligibility
/// NaN); the ratio 10¹² between the extremes is more than any deployment needs.
pub const MIN_WEIGHT: f64 = 1e-6;

/// The largest weight φ a tenant may have (see [`MIN_WEIGHT`]).
pub const MAX_WEIGHT: f64 = 1e6;

pub(crate) fn check_weight(tenant: TenantId, value: f64) -> Result<f64, Error> {
    if (MIN_WEIGHT..=MAX_WEIGHT).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidWeight { tenant, value })
    }
}

/// The largest magnitude a virtual-time tag (start, finish, virtual time, deficit) takes.
/// Costs may be any finite value up to `f64::MAX` and weights as small as [`MIN_WEIGHT`], so
/// `tag + cost/φ` can overflow to ∞, and ∞ − ∞ later turns a tag into NaN and a comparison
/// into a panic or a wrong choice. Tags saturate here instead: 1e300 leaves room
/// for `S − (i/n)·l` with any finite `l` and for sums of a few saturated terms. A tenant
/// whose tag saturates has been charged more than any finite workload could repay; it ties
/// with other saturated tenants and is served by id among them.
pub(crate) const TAG_LIMIT: f64 = 1e300;

/// `x` clamped to [−[`TAG_LIMIT`], [`TAG_LIMIT`]] (∞ saturates too).
#[inline]
pub(crate) fn saturate(x: f64) -> f64 {
    x.clamp(-TAG_LIMIT, TAG_LIMIT)
}
