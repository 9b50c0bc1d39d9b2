//! The simulator's errors: [`SpecError`] (a spec is wrong: its file, the field's path, what is
//! allowed), [`FieldError`] (the same before the file is known, as a section checks itself),
//! [`SimError`] (a run failed or was refused) and [`AnyError`] (either, as a command reports
//! it).

use std::fmt;

/// A spec error: which file, which field, and what is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    /// The spec file (or `<string>`).
    pub file: String,
    /// The field, as a path (`tenant[1].cost.std`), or empty for syntax errors.
    pub field: String,
    /// What was wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

/// A field's error as a section of a spec finds it: the field's path relative to the
/// section, and what was wrong. The caller puts it under the section's own path
/// ([`FieldError::under`]) and names the file ([`FieldError::in_file`]).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field's path below the section (`cost.std`), or empty for the section itself.
    pub field: String,
    /// What was wrong and what is allowed.
    pub message: String,
}

impl FieldError {
    /// `field` is wrong: `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error seen from the enclosing section `prefix` (`tenant[2]`): its field
    /// becomes `prefix.field`, or `prefix` when it named the section itself.
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = join(prefix, &self.field);
        self
    }

    /// The error in `file`.
    pub fn in_file(self, file: &str) -> SpecError {
        SpecError {
            file: file.to_string(),
            field: self.field,
            message: self.message,
        }
    }
}

/// `at.key`, or whichever of the two is not empty.
pub(crate) fn join(at: &str, key: &str) -> String {
    match (at.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => at.to_string(),
        _ => format!("{at}.{key}"),
    }
}

/// A finite number > 0, or an error naming `field`.
pub(crate) fn positive(field: &str, x: f64) -> Result<f64, FieldError> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(FieldError::new(
            field,
            format!("must be a finite number > 0, got {x}"),
        ))
    }
}

/// `[server] model` of `kind` spec (`"a database-server"`): `expected`, or an error naming
/// `model`.
pub(crate) fn server_model(kind: &str, expected: &str, got: &str) -> Result<(), FieldError> {
    if got == expected {
        return Ok(());
    }
    Err(FieldError::new(
        "model",
        format!("{kind} spec has model = {expected:?}, got {got:?}"),
    ))
}

/// A finite number ≥ 0, or an error naming `field`.
pub(crate) fn non_negative(field: &str, x: f64) -> Result<f64, FieldError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(FieldError::new(
            field,
            format!("must be a finite number ≥ 0, got {x}"),
        ))
    }
}

/// What kind of failure stopped a run ([`SimError::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimErrorKind {
    /// A scheduler refused what the engine asked: a value it rejects (a weight, a target)
    /// or a bug somewhere.
    Scheduler,
    /// The run would take, or took, more events than its cap (`--max-events`).
    EventCap,
    /// More requests queued or outstanding than the engine holds: the offered load far
    /// exceeds the server's capacity.
    Overload,
    /// The spec cannot be run as written (a policy's parameters, a stage's scheduler).
    Spec,
    /// A TAM architecture stopped with requests waiting and nothing running.
    Deadlock,
    /// The service did something this engine does not model (a request that yields).
    Unsupported,
    /// A run did not finish (its thread panicked).
    Internal,
}

impl SimErrorKind {
    /// A short name for the kind, as in messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            SimErrorKind::Scheduler => "scheduler error",
            SimErrorKind::EventCap => "event cap",
            SimErrorKind::Overload => "overload",
            SimErrorKind::Spec => "spec error",
            SimErrorKind::Deadlock => "deadlock",
            SimErrorKind::Unsupported => "unsupported",
            SimErrorKind::Internal => "internal error",
        }
    }
}

/// A simulation failure: its [`kind`](SimErrorKind) and a message naming the scenario and
/// what was wrong. `Display` shows the message.
///
/// Build one with the constructor of its kind: `SimError::overload(format!(..))`,
/// `SimError::scheduler(e)` for a [`fairlane_core::Error`], or [`SimError::new`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SimError {
    /// What kind of failure.
    pub kind: SimErrorKind,
    /// What was wrong, for a person.
    pub message: String,
}

impl SimError {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: SimErrorKind, message: impl Into<String>) -> Self {
        SimError {
            kind,
            message: message.into(),
        }
    }
    /// A scheduler refused a call: `"scheduler error: {e}"`.
    pub fn scheduler(e: fairlane_core::Error) -> Self {
        SimError::new(SimErrorKind::Scheduler, format!("scheduler error: {e}"))
    }
    /// The event cap ([`SimErrorKind::EventCap`]).
    pub fn event_cap(message: impl Into<String>) -> Self {
        SimError::new(SimErrorKind::EventCap, message)
    }
    /// Too many requests waiting ([`SimErrorKind::Overload`]).
    pub fn overload(message: impl Into<String>) -> Self {
        SimError::new(SimErrorKind::Overload, message)
    }
    /// The spec cannot run as written ([`SimErrorKind::Spec`]).
    pub fn spec(message: impl Into<String>) -> Self {
        SimError::new(SimErrorKind::Spec, message)
    }
    /// The same error with `context` (a scenario or stage name) in front of its message.
    pub fn context(self, context: impl fmt::Display) -> Self {
        SimError::new(self.kind, format!("{context}: {}", self.message))
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for SimError {}

/// A spec error (exit status 2 in the CLI) or a run error (1).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AnyError {
    /// The spec is wrong.
    Spec(SpecError),
    /// A run failed or was refused.
    Run(SimError),
}

impl fmt::Display for AnyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyError::Spec(e) => e.fmt(f),
            AnyError::Run(e) => e.fmt(f),
        }
    }
}

// Display is the inner error's own message (a transparent wrapper), so `source` stays `None`:
// a reporter walking the chain would print the same message twice.
impl std::error::Error for AnyError {}

impl From<SpecError> for AnyError {
    fn from(e: SpecError) -> Self {
        AnyError::Spec(e)
    }
}

impl From<SimError> for AnyError {
    fn from(e: SimError) -> Self {
        AnyError::Run(e)
    }
}
