//! `tam discover`: a Thread Architecture Model from a running process tree, with no code
//! changes (after TADalyzer, seeds/004 §2.5, done from outside the process via `/proc`).
//!
//! The pipeline: [`procfs`] snapshots every thread of the tree at a fixed interval;
//! [`group`] puts threads into stages (annotation file or folded names); [`accumulate`]
//! differences the counters per thread and charges them to stages; [`classify`] decides
//! each stage's type and resource vector; [`blocking`] slows one stage at a time and
//! watches the others; [`Discovery::to_toml`] writes a model that `tam check` and
//! `tam draw` accept, with the evidence in notes and placeholders for what cannot be seen
//! from outside. Sampling needs Linux; elsewhere [`discover`] returns
//! [`DiscoverError::Unsupported`].

pub mod accumulate;
pub mod blocking;
pub mod classify;
pub mod group;
pub mod procfs;
mod report;

pub use accumulate::{Accumulator, NullThread, StageStats};
pub use blocking::{BlockingReport, Probe};
pub use group::Annotations;
pub use report::{Discovery, StageEvidence};

use std::fmt;
use std::time::Duration;

/// What to discover.
#[derive(Debug, Clone)]
pub enum Target {
    /// A running process and all its descendants.
    Pid(u32),
    /// A command to start (and to stop when discovery ends).
    Command(Vec<String>),
}

/// Discovery settings. [`Options::new`] gives the defaults of the command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// The process tree.
    pub target: Target,
    /// How long to sample.
    pub duration: Duration,
    /// Time between snapshots.
    pub interval: Duration,
    /// Share of the tree's total above which a resource is extensive for a stage.
    pub threshold: f64,
    /// Stage rules (empty: group by folded names).
    pub annotations: Annotations,
    /// Probe blocking relations by delay injection after sampling.
    pub probe_blocking: bool,
    /// Length of each probe window (baseline, then slowed).
    pub probe_window: Duration,
    /// The CPU kept busy during probes.
    pub probe_cpu: u32,
    /// Fraction of the slowed stage's own fall in progress that another stage's progress
    /// must fall too, in every round, to count as dropped with it.
    pub probe_drop: f64,
    /// Model name (default: the root process's name + " (discovered)").
    pub name: Option<String>,
    /// The command line that produced the model, recorded as its `source`.
    pub command_line: String,
}

impl Options {
    /// Defaults: 30 s of sampling every 0.5 s, 5% threshold, blocking probes of 2 s on
    /// CPU 0 counting drops of 75% or more of the slowed stage's own fall.
    pub fn new(target: Target) -> Options {
        Options {
            target,
            duration: Duration::from_secs(30),
            interval: Duration::from_millis(500),
            threshold: 0.05,
            annotations: Annotations::default(),
            probe_blocking: true,
            probe_window: Duration::from_secs(2),
            probe_cpu: 0,
            probe_drop: 0.75,
            name: None,
            command_line: String::new(),
        }
    }
}

impl Options {
    /// Options from command-line values (seconds, threshold in percent), checked; the
    /// annotation file, if any, is read and parsed.
    #[allow(clippy::too_many_arguments)]
    pub fn from_cli(
        target: Target,
        duration_s: f64,
        interval_s: f64,
        threshold_pct: f64,
        annotate: Option<&std::path::Path>,
        probe_window_s: Option<f64>,
        probe_cpu: u32,
        command_line: String,
    ) -> Result<Options, DiscoverError> {
        let secs = |flag: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v < 1e6 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(DiscoverError::Invalid(format!(
                    "--{flag}: expected a positive number of seconds, found {v}"
                )))
            }
        };
        if !(threshold_pct > 0.0 && threshold_pct < 100.0) {
            return Err(DiscoverError::Invalid(format!(
                "--threshold: expected a percentage between 0 and 100, found {threshold_pct}"
            )));
        }
        let annotations = match annotate {
            None => Annotations::default(),
            Some(path) => {
                let shown = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| {
                    DiscoverError::Annotations(format!("{shown}: cannot read: {e}"))
                })?;
                Annotations::parse(&text, &shown)?
            }
        };
        let mut o = Options::new(target);
        o.duration = secs("duration", duration_s)?;
        o.interval = secs("interval", interval_s)?;
        o.threshold = threshold_pct / 100.0;
        o.annotations = annotations;
        o.probe_blocking = probe_window_s.is_some();
        o.probe_window = secs("probe-window", probe_window_s.unwrap_or(2.0))?;
        o.probe_cpu = probe_cpu;
        o.command_line = command_line;
        Ok(o)
    }
}

/// Why discovery could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscoverError {
    /// There is no process with this ID.
    NoSuchProcess(u32),
    /// The process's `/proc` entries are not readable by us.
    PermissionDenied {
        /// The process.
        pid: u32,
        /// The operating system's message.
        detail: String,
    },
    /// Not Linux (or no procfs with per-thread I/O accounting).
    Unsupported(String),
    /// The annotation file is invalid (the message names the file and field).
    Annotations(String),
    /// The command could not be started.
    Spawn(String),
    /// Delay injection failed (e.g. not permitted to change the target's scheduling).
    Probe(String),
    /// An option is out of range (the message names it).
    Invalid(String),
    /// Any other I/O failure.
    Io(String),
}

impl fmt::Display for DiscoverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiscoverError::NoSuchProcess(pid) => write!(f, "no such process: {pid}"),
            DiscoverError::PermissionDenied { pid, detail } => write!(
                f,
                "permission denied reading /proc/{pid} ({detail}); run as the process's user or as root"
            ),
            DiscoverError::Unsupported(why) => write!(f, "tam discover needs Linux: {why}"),
            DiscoverError::Annotations(m) => write!(f, "annotation file {m}"),
            DiscoverError::Spawn(m) => write!(f, "cannot start the command: {m}"),
            DiscoverError::Probe(m) => write!(f, "blocking probe: {m}"),
            DiscoverError::Invalid(m) | DiscoverError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DiscoverError {}

/// Progress while discovering.
#[derive(Debug, Clone)]
pub struct Progress {
    /// `sampling` or `probing`.
    pub phase: &'static str,
    /// Seconds elapsed in this phase.
    pub elapsed: f64,
    /// Seconds requested for this phase.
    pub requested: f64,
    /// Stages found so far.
    pub stages: usize,
    /// What is happening (e.g. which stage is slowed).
    pub detail: String,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {:.1}/{:.0} s, {} stages{}{}",
            self.phase,
            self.elapsed,
            self.requested,
            self.stages,
            if self.detail.is_empty() { "" } else { "; " },
            self.detail
        )
    }
}

/// Samples the target, classifies its stages, probes blocking and returns the result.
/// When the target exits mid-run, the result holds what was gathered and says so
/// ([`Discovery::target_exited`]).
#[cfg(target_os = "linux")]
pub fn discover(
    options: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Discovery, DiscoverError> {
    run::discover(options, progress)
}

/// Discovery reads Linux's `/proc`; on other systems it reports that clearly.
#[cfg(not(target_os = "linux"))]
pub fn discover(
    _options: &Options,
    _progress: &mut dyn FnMut(&Progress),
) -> Result<Discovery, DiscoverError> {
    Err(DiscoverError::Unsupported(format!(
        "this is {}; discovery reads /proc (threads, their CPU and I/O counters)",
        std::env::consts::OS
    )))
}

#[cfg(target_os = "linux")]
mod run;

/// The `fairlane tam discover` command: discovers with progress on `err`, writes the
/// model to `output`, prints the summary (or JSON) to `out`. Returns the exit status:
/// 0 done, 1 the target exited mid-run (what was gathered is written), 2 error.
pub fn run_cli(
    options: &Options,
    output: &std::path::Path,
    json: bool,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> u8 {
    let found = match discover(options, &mut |p| {
        let _ = write!(err, "\r{p}\x1b[K");
    }) {
        Ok(found) => found,
        Err(e) => {
            let _ = writeln!(err, "\n{e}");
            return 2;
        }
    };
    let _ = writeln!(err);
    if let Err(e) = std::fs::write(output, found.to_toml()) {
        let _ = writeln!(err, "{}: cannot write: {e}", output.display());
        return 2;
    }
    let text = if json {
        found.to_json() + "\n"
    } else {
        found.summary()
    };
    let _ = out.write_all(text.as_bytes());
    if found.target_exited {
        let _ = writeln!(
            err,
            "the target exited mid-run; {} holds what was gathered",
            output.display()
        );
    }
    u8::from(found.target_exited)
}
