//! Priority levels and flow schemas in the proxy as they run (APF's model;
//! docs/priority-levels.md): the schema matcher the pipeline's `classify` runs (`schema`),
//! and what runs beside the gate — per-level counters, the queued requests, the debug dumps'
//! contents, the metrics (`live`) — and the reload. The sections, their checks and the core
//! `LevelsConfig` they build are the configuration's (`crate::config::levels`), re-exported
//! here.
//!
//! Without levels nothing here runs per request: the gate is the flat one (one catch-all
//! level holding all of D), and `classify` checks one `Option`.

use crate::config::levels::{build, core_error};
use crate::config::{ConfigError, ProxyConfig};

mod live;
mod schema;

pub(crate) use live::Live;
pub use live::{prometheus, FlowQueue, LevelQueues, LevelStatus, QueuedRequest};
pub(crate) use schema::{LevelInfo, Leveled, Schemas};

pub(crate) use crate::config::levels::keep_for_restart;
pub use crate::config::levels::{
    check, enabled, FlowSchema, HeaderMatch, LevelsSection, PriorityLevel, SchemaMatch,
    DEFAULT_ADJUST_PERIOD_MS, DEFAULT_PRECEDENCE, MAX_PRECEDENCE,
};

/// Apply `config`'s levels to the gate (a reload; [`keep_for_restart`] has put back what
/// changes at restart): shares, percentages, queue limits and timeouts change in place,
/// levels come and go by name, and every queued request keeps its place.
pub(crate) fn reload(gate: &crate::gate::Gate, config: &ProxyConfig) -> Result<(), ConfigError> {
    let Some(levels) = build(config)? else {
        return Ok(());
    };
    gate.0
        .set_levels(&levels)
        .map_err(|e| core_error(e, config))
}

#[cfg(test)]
mod tests;
