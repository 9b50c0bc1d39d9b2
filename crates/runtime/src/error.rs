//! The runtime's errors: why a pool or gate could not be built, why a task was refused, and
//! why a task's handle holds no value (a caught panic among them). They depend on nothing
//! else in the crate, so every module can name them.

use std::any::Any;
use std::fmt;
use std::sync::Mutex;

use fairlane_core::{LevelId, TenantId};

/// Why a task's handle holds no value.
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskError {
    /// The task panicked; the panic is here, and the worker carried on.
    Panicked(Panic),
    /// [`TaskHandle::cancel`](crate::TaskHandle::cancel) removed the task before it started.
    Cancelled,
    /// The task was never run: [`FairPool::shutdown_now`](crate::FairPool::shutdown_now) handed it back and the
    /// [`PendingTask`](crate::PendingTask) was dropped without
    /// [`PendingTask::run`](crate::PendingTask::run).
    NotRun,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(p) => write!(f, "task panicked: {}", p.message()),
            TaskError::Cancelled => f.write_str("task was cancelled before it started"),
            TaskError::NotRun => f.write_str("task was handed back at shutdown and never run"),
        }
    }
}

impl std::error::Error for TaskError {}

/// A caught panic: its message and its payload.
pub struct Panic(Box<PanicInner>);

/// Boxed so that a task's result slot, which can hold a [`TaskError`], stays small: every
/// task allocates one, only a panicking task allocates this.
struct PanicInner {
    message: String,
    payload: Mutex<Box<dyn Any + Send>>,
}

impl Panic {
    pub(crate) fn new(payload: Box<dyn Any + Send>) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "<non-string panic payload>".to_string()
        };
        Panic(Box::new(PanicInner {
            message,
            payload: Mutex::new(payload),
        }))
    }

    /// The panic message (`"<non-string panic payload>"` if the payload was not a string).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The payload, as `std::panic::catch_unwind` returned it.
    pub fn into_payload(self) -> Box<dyn Any + Send> {
        self.0
            .payload
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Continue the panic on the calling thread.
    pub fn resume(self) -> ! {
        std::panic::resume_unwind(self.into_payload())
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Panic")
            .field("message", &self.0.message)
            .finish_non_exhaustive()
    }
}

/// Why [`FairPool::submit`](crate::FairPool::submit) refused a task. A refused task is dropped without running.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The pool already holds `limit` queued tasks.
    QueueFull {
        /// [`PoolBuilder::max_queued`](crate::PoolBuilder::max_queued).
        limit: usize,
    },
    /// The tenant already has `limit` queued tasks.
    TenantQueueFull {
        /// The tenant.
        tenant: TenantId,
        /// [`PoolBuilder::max_queued_per_tenant`](crate::PoolBuilder::max_queued_per_tenant).
        limit: usize,
    },
    /// The pool is shutting down or shut down.
    ShutDown,
    /// The scheduler refused the request (an invalid cost, or a scheduler that needs costs
    /// up front and got none).
    Scheduler(fairlane_core::Error),
    /// The task's priority level refused it (its queue is full, or there is no such level).
    Level(LevelRefusal),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::QueueFull { limit } => {
                write!(f, "pool queue is full ({limit} tasks queued)")
            }
            SubmitError::TenantQueueFull { tenant, limit } => {
                write!(f, "queue of {tenant} is full ({limit} tasks queued)")
            }
            SubmitError::ShutDown => f.write_str("pool is shut down"),
            SubmitError::Scheduler(e) => write!(f, "scheduler refused the task: {e}"),
            SubmitError::Level(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SubmitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubmitError::Scheduler(e) => Some(e),
            SubmitError::Level(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a [`FairPool`](crate::FairPool) or [`FairGate`](crate::FairGate) could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A configuration value is out of range (names the field).
    Config(fairlane_core::Error),
    /// A thread could not be started.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "{e}"),
            BuildError::Spawn(e) => write!(f, "could not start a thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
            BuildError::Spawn(e) => Some(e),
        }
    }
}

impl From<fairlane_core::Error> for BuildError {
    fn from(e: fairlane_core::Error) -> Self {
        BuildError::Config(e)
    }
}

pub(crate) fn config_error(field: &'static str, reason: String) -> BuildError {
    BuildError::Config(fairlane_core::Error::InvalidConfig { field, reason })
}

/// A priority level refused a request.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LevelRefusal {
    /// The level's queue holds its `queue_limit` requests already.
    Full {
        /// The level.
        level: LevelId,
        /// Its name.
        name: String,
        /// Its queue limit.
        limit: usize,
    },
    /// No such level (or it was retired by a reload).
    Unknown(LevelId),
}

impl fmt::Display for LevelRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LevelRefusal::Full { name, limit, .. } => {
                write!(
                    f,
                    "priority level {name:?} is full ({limit} requests queued)"
                )
            }
            LevelRefusal::Unknown(level) => write!(f, "{level} does not exist"),
        }
    }
}

impl std::error::Error for LevelRefusal {}
