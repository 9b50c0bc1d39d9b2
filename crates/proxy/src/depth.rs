//! Depth D: fixed, or adapted toward the tenants' response-time targets (§5.4 of the
//! interposed-scheduling paper, Facade's feedback controller) by fairlane-core's
//! `DepthController` — wired once the core provides it.

use std::sync::Arc;

use fairlane_core::TenantId;

use crate::gate::Gate;
use crate::server::Inner;

/// Give a tenant's response-time target (seconds) to the scheduler (EDF uses it).
pub(crate) fn set_target(_gate: &Gate, _tenant: TenantId, _target: Option<f64>) {}

/// Start the adaptive depth task, if configured.
pub(crate) fn spawn(_inner: Arc<Inner>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}
