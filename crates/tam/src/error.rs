//! Errors for invalid model files: each names the file, the stage and the field, so the
//! user can act on it without reading the code.

use std::fmt;

/// One thing wrong with a model, located by stage and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The stage (its name, or `#N` for the N-th `[[stage]]` when it has no usable name);
    /// `None` for model-level errors.
    pub stage: Option<String>,
    /// The field, e.g. `scheduling` or `resources.io`; `None` for syntax errors.
    pub field: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl FieldError {
    /// An error in one field of one stage.
    pub fn stage(stage: &str, field: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            stage: Some(stage.to_string()),
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    /// An error in a model-level field (`[model]`, `[hosts]`, top-level keys).
    pub fn model(field: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            stage: None,
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    /// An error that is not about one field (e.g. TOML syntax).
    pub fn general(message: impl Into<String>) -> FieldError {
        FieldError {
            stage: None,
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(stage) = &self.stage {
            write!(f, "stage `{stage}`: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for FieldError {}

/// An invalid model: every problem found, and the file it came from (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// The file the model was read from.
    pub file: Option<String>,
    /// Everything wrong with it, in file order.
    pub errors: Vec<FieldError>,
}

impl ModelError {
    /// An error without a file name (set later with [`ModelError::in_file`]).
    pub fn new(errors: Vec<FieldError>) -> ModelError {
        ModelError { file: None, errors }
    }

    /// Attaches the file name that every message will be prefixed with.
    pub fn in_file(mut self, file: impl Into<String>) -> ModelError {
        self.file = Some(file.into());
        self
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if let Some(file) = &self.file {
                write!(f, "{file}: ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ModelError {}
