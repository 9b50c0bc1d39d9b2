//! Depth D: fixed, or adapted toward the tenants' response-time targets by fairlane-core's
//! [`DepthController`] (the interposed paper's §5.4, after Facade): every interval, if any
//! tenant with a target (`tenant.target_ms`) missed it on average, D shrinks
//! multiplicatively; if all have headroom, D grows by one. Response time here is what the
//! client sees: queueing in the proxy plus upstream time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairlane_core::depth::{DepthConfig, DepthController};
use fairlane_core::TenantId;

use crate::config::ProxyConfig;
use crate::gate::Gate;

/// The shared controller, when the depth is adaptive.
pub(crate) type Controller = Arc<Mutex<DepthController>>;

/// Build the controller for `[scheduler.adaptive]`, if configured.
pub(crate) fn controller(config: &ProxyConfig) -> Result<Option<Controller>, String> {
    let Some(a) = &config.scheduler.adaptive else {
        return Ok(None);
    };
    let c = DepthController::new(DepthConfig {
        min: a.min,
        max: a.max,
        initial: config.scheduler.depth.clamp(a.min, a.max),
        interval: a.interval_ms as f64 / 1000.0,
        ..DepthConfig::default()
    })
    .map_err(|e| e.to_string())?;
    Ok(Some(Arc::new(Mutex::new(c))))
}

/// Give a tenant's response-time target (seconds) to the scheduler (EDF's deadline =
/// arrival + target; the others ignore it) and to the depth controller.
pub(crate) fn set_target(
    gate: &Gate,
    controller: Option<&Controller>,
    tenant: TenantId,
    target: Option<f64>,
) -> Result<(), String> {
    gate.set_target(tenant, target).map_err(|e| e.to_string())?;
    if let Some(c) = controller {
        c.lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_target(tenant, target)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Record a completed request's response time (seconds) for the controller.
pub(crate) fn observe(controller: &Controller, tenant: TenantId, response_time: f64, now: f64) {
    controller
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .observe(tenant, response_time, now);
}

/// Run the controller: ask it for a new depth a few times per interval and apply it to
/// `gate`.
pub(crate) fn spawn(gate: Gate, c: Controller) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let interval = c
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .config()
            .interval;
        let tick = Duration::from_secs_f64((interval / 4.0).clamp(0.001, 10.0));
        loop {
            tokio::time::sleep(tick).await;
            let now = gate.now();
            let new = c.lock().unwrap_or_else(|e| e.into_inner()).update(now);
            if let Some(d) = new {
                if let Err(e) = gate.set_depth(d) {
                    eprintln!("fairlane-proxy: depth controller asked for D = {d}: {e}");
                }
            }
        }
    })
}
