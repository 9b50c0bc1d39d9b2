//! Why an experiment could not be run: the experiment's name and what went wrong, with the
//! file where there is one.

use std::fmt;
use std::path::PathBuf;

/// Why [`run`](crate::run) or [`planned_runs`](crate::planned_runs) failed.
#[derive(Debug)]
pub struct ReproError {
    /// The experiment (its name on the command line).
    pub experiment: &'static str,
    /// What went wrong.
    pub kind: ReproErrorKind,
}

/// What went wrong in a [`ReproError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ReproErrorKind {
    /// The spec file exists but could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The spec is invalid.
    Spec {
        /// The spec's name in messages (its path, or its path in the repository for the
        /// compiled-in copy).
        file: String,
        /// The parser's message, naming the field.
        message: String,
    },
    /// A simulation run failed.
    Run {
        /// The spec the run came from.
        file: String,
        /// The simulator's message.
        message: String,
    },
    /// A section that needs no spec (the worked example, TAM's figures) failed.
    Section(String),
    /// The experiment's analysis needs a spec and has none.
    NoSpec,
    /// The experiment's analysis is for the other server than its spec.
    AnalysisMismatch,
}

impl ReproError {
    pub(crate) fn new(experiment: &'static str, kind: ReproErrorKind) -> Self {
        ReproError { experiment, kind }
    }
}

impl fmt::Display for ReproError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.experiment)?;
        match &self.kind {
            ReproErrorKind::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            ReproErrorKind::Spec { file, message } => {
                // The parsers' messages usually start with the file already.
                if message.starts_with(file.as_str()) {
                    write!(f, "invalid spec: {message}")
                } else {
                    write!(f, "invalid spec {file}: {message}")
                }
            }
            ReproErrorKind::Run { file, message } => write!(f, "a run of {file} failed: {message}"),
            ReproErrorKind::Section(m) => f.write_str(m),
            ReproErrorKind::NoSpec => f.write_str("the analysis needs a spec and there is none"),
            ReproErrorKind::AnalysisMismatch => {
                f.write_str("the analysis does not fit its spec's server")
            }
        }
    }
}

impl std::error::Error for ReproError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ReproErrorKind::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}
