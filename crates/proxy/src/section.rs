//! What every config section checks itself with: the error naming the field (the runtime's
//! [`ConfigError`], shared with `fairlane-pg`), and the bounds that more than one section uses. Below `config` and the modules whose sections it holds
//! (`cluster`), so none of them imports another in a circle.

pub use fairlane_runtime::config_file::ConfigError;

/// Largest depth accepted.
pub const MAX_DEPTH: usize = 65_536;
