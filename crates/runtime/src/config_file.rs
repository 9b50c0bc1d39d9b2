//! The error a service's configuration file gives, shared by the front ends built on the
//! executors (`fairlane-proxy`, `fairlane-pg`): the file, the field path and what is wrong.
//!
//! ```
//! use fairlane_runtime::config_file::{read, ConfigError};
//! let e = read("/no/such/file.toml", |_| Ok(())).unwrap_err();
//! assert_eq!(e.field, "file");
//! assert!(e.to_string().starts_with("/no/such/file.toml: file: cannot read"), "{e}");
//! let e = ConfigError::new("pool.size", "must be ≥ 1, got 0");
//! assert_eq!(e.to_string(), "pool.size: must be ≥ 1, got 0");
//! ```

use std::fmt;
use std::path::Path;

/// A configuration error: the file (when there is one), the field, and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The file the configuration came from.
    pub file: Option<String>,
    /// The field (`tenant[1].weight`), or the key at a TOML syntax or type error (`"toml"`
    /// when no key is known).
    pub field: String,
    /// What is allowed and what was given.
    pub reason: String,
}

impl ConfigError {
    /// `field` is wrong: `reason`; no file yet.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            file: None,
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Read the file at `path` and `parse` its text; every error, the reader's and the parser's,
/// names the file.
pub fn read<T>(
    path: impl AsRef<Path>,
    parse: impl FnOnce(&str) -> Result<T, ConfigError>,
) -> Result<T, ConfigError> {
    let name = path.as_ref().display().to_string();
    let in_file = |mut e: ConfigError| {
        e.file = Some(name.clone());
        e
    };
    let text = std::fs::read_to_string(path.as_ref())
        .map_err(|e| in_file(ConfigError::new("file", format!("cannot read: {e}"))))?;
    parse(&text).map_err(in_file)
}
