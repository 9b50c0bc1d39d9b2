//! What every config section checks itself with: the error naming the field, and the bounds
//! that more than one section uses. Below `config` and the modules whose sections it holds
//! (`cluster`), so none of them imports another in a circle.

use std::fmt;

/// A configuration error: which field, and what is wrong with it.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The file, when the config came from one.
    pub file: Option<String>,
    /// The field (`tenant[1].weight`), or `"toml"` for a syntax error.
    pub field: String,
    /// What is allowed and what was given.
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
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

/// Largest depth accepted.
pub const MAX_DEPTH: usize = 65_536;
