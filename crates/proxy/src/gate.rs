//! D upstream slots: a thin adapter over [`fairlane_runtime::FairGate`], the workspace's one
//! gate (run-time depth, per-tenant caps and targets, the `RetryAt` timer, cancellation,
//! scheduler errors counted and logged). What stays here is the proxy's vocabulary: seconds
//! as the unit of time and cost, "depth" and "slots", and [`GateError`] naming the setting
//! that was refused. Rejections ([`Reject`]) are mapped to HTTP status codes in `forward`.

use std::time::Duration;

use fairlane_core::{ClassId, Config, TenantId};
pub use fairlane_runtime::{
    Acquire as Waiting, AcquireError as Reject, FairGate, GateBuilder, Permit,
};

/// Why the gate refused to be built or to take a setting.
#[derive(Debug)]
pub enum GateError {
    /// The gate (its scheduler, its depth) could not be built.
    Build(fairlane_runtime::BuildError),
    /// The scheduler refused a setting: `what` is `"depth"`, `"weight"` or `"target"`.
    Refused {
        /// Which setting.
        what: &'static str,
        /// The scheduler's reason.
        error: fairlane_core::Error,
    },
    /// A response-time target that is not a duration (negative, not finite, too large).
    Target {
        /// The target given, in seconds.
        seconds: f64,
    },
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Build(e) => e.fmt(f),
            GateError::Refused { what, error } => write!(f, "{what}: {error}"),
            GateError::Target { seconds } => {
                write!(
                    f,
                    "target {seconds} s: not a duration (must be finite, ≥ 0)"
                )
            }
        }
    }
}

impl std::error::Error for GateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GateError::Build(e) => Some(e),
            GateError::Refused { error, .. } => Some(error),
            GateError::Target { .. } => None,
        }
    }
}

/// The D upstream slots and the scheduler that hands them out. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Gate(pub FairGate);

impl Gate {
    /// A gate of `depth` slots over the scheduler `config` builds (the proxy resolves presets
    /// with [`Config::for_executor`], costs unknown up front).
    pub fn new(
        config: &Config,
        depth: usize,
        max_queued: usize,
        max_queued_per_tenant: usize,
    ) -> Result<Gate, GateError> {
        let b = FairGate::builder().scheduler(*config).seats(depth);
        Gate::from_builder(
            b.max_waiting(max_queued)
                .max_waiting_per_tenant(max_queued_per_tenant),
        )
    }

    /// The gate `config` asks for: its scheduler preset over `scheduler.depth` slots, with
    /// the queue caps of `[limits]`. Core resolves the preset; the proxy never knows costs up
    /// front.
    pub fn for_config(config: &crate::ProxyConfig) -> Result<Gate, crate::ConfigError> {
        let s = &config.scheduler;
        let sched =
            Config::for_executor(&s.algorithm, s.depth, s.initial_estimate_ms / 1000.0, false)
                .map_err(|e| crate::ConfigError {
                    file: None,
                    field: "scheduler.algorithm".into(),
                    reason: crate::config::core_reason(e),
                })?;
        let l = &config.limits;
        if let Some(levels) = crate::config::levels::build(config)? {
            let b = FairGate::builder().levels(levels).seats(s.depth);
            let b = b.max_waiting(l.max_queued);
            return Gate::from_builder(b.max_waiting_per_tenant(l.max_queued_per_tenant))
                .map_err(|e| crate::ConfigError::new("priority_level", e.to_string()));
        }
        Gate::new(&sched, s.depth, l.max_queued, l.max_queued_per_tenant).map_err(|e| {
            crate::ConfigError {
                file: None,
                field: "scheduler".into(),
                reason: e.to_string(),
            }
        })
    }

    /// A gate from a runtime builder (a built scheduler, a manual clock), in seconds.
    pub fn from_builder(b: GateBuilder) -> Result<Gate, GateError> {
        let g = b.time_unit(Duration::from_secs(1)).build();
        g.map(Gate).map_err(GateError::Build)
    }

    /// Seconds on the gate's clock (the scheduler's `now`).
    pub fn now(&self) -> f64 {
        self.0.now()
    }

    /// Join `tenant`'s queue now. Fails at once if a cap is reached or the gate is closed;
    /// otherwise the returned future resolves when a slot is granted
    /// ([`Waiting::granted`] says whether it already was).
    pub fn acquire(&self, tenant: TenantId, class: ClassId) -> Result<Waiting, Reject> {
        self.0.join(tenant, class)
    }

    /// [`acquire`](Gate::acquire) at a priority level and flow (`route`; `None`, or any route
    /// without levels, changes nothing: an exempt level's request is granted at once, outside
    /// D), with the cost known at admission (`Some`), which the scheduler is told at enqueue
    /// (VTC charges it at dispatch).
    pub fn acquire_as(
        &self,
        tenant: TenantId,
        class: ClassId,
        route: Option<fairlane_runtime::Route>,
        cost: Option<f64>,
    ) -> Result<Waiting, Reject> {
        let waiting = match cost {
            Some(c) => self.0.acquire_with_cost(tenant, class, c),
            None => self.0.acquire(tenant, class),
        };
        match route {
            Some(r) => waiting.at(r).join(),
            None => waiting.join(),
        }
    }

    /// Change D. Running requests are unaffected; slots beyond the new depth are retired as
    /// their requests complete.
    pub fn set_depth(&self, depth: usize) -> Result<(), GateError> {
        self.0.set_seats(depth).map_err(|error| GateError::Refused {
            what: "depth",
            error,
        })
    }

    /// Set a tenant's weight φ.
    pub fn set_weight(&self, tenant: TenantId, weight: f64) -> Result<(), GateError> {
        self.0
            .set_weight(tenant, weight)
            .map_err(|error| GateError::Refused {
                what: "weight",
                error,
            })
    }

    /// Set a tenant's response-time target, in seconds (EDF's deadline = arrival + target).
    pub fn set_target(&self, tenant: TenantId, target: Option<f64>) -> Result<(), GateError> {
        let target = target
            .map(|t| Duration::try_from_secs_f64(t).map_err(|_| GateError::Target { seconds: t }))
            .transpose()?;
        self.0
            .set_target(tenant, target)
            .map_err(|error| GateError::Refused {
                what: "target",
                error,
            })
    }

    /// Set a tenant's own waiting cap (`None`: the default per-tenant cap).
    pub fn set_tenant_cap(&self, tenant: TenantId, cap: Option<usize>) {
        self.0.set_tenant_cap(tenant, cap);
    }

    /// Set the global and default per-tenant waiting caps.
    pub fn set_caps(&self, max_queued: usize, max_queued_per_tenant: usize) {
        self.0.set_caps(max_queued, max_queued_per_tenant);
    }

    /// Refuse new requests and fail every waiting one with [`Reject::Closed`]. Requests
    /// holding a slot are unaffected.
    pub fn close(&self) {
        self.0.close();
    }

    /// Requests waiting and holding a slot.
    pub fn load(&self) -> (usize, usize) {
        (self.0.waiting(), self.0.holding())
    }

    /// The current depth D.
    pub fn depth(&self) -> usize {
        self.0.seats()
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
