//! A progress bar for long runs: runs done of the total and an ETA, on stderr, drawn only
//! when stderr is a terminal (and only once the work has taken a second), so logs and
//! pipes stay quiet.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Progress over `total` runs.
pub struct Progress {
    start: Instant,
    total: f64,
    done: f64,
    last: f64,
    shown: bool,
    enabled: bool,
    what: String,
}

impl Progress {
    /// A bar for `total` runs, enabled when stderr is a terminal.
    pub fn new(what: &str, total: usize) -> Self {
        Self::with_output(what, total, std::io::stderr().is_terminal())
    }

    /// A bar that draws only if `enabled`.
    pub fn with_output(what: &str, total: usize, enabled: bool) -> Self {
        Progress {
            start: Instant::now(),
            total: total.max(1) as f64,
            done: 0.0,
            last: -1.0,
            shown: false,
            enabled,
            what: what.to_string(),
        }
    }

    /// Renames the bar (e.g. to the experiment now running).
    pub fn set_what(&mut self, what: &str) {
        self.what = what.to_string();
    }

    /// Sets the number of runs (for a batch whose size is known only once it starts).
    pub fn set_total(&mut self, total: usize) {
        self.total = total.max(1) as f64;
    }

    /// The fraction done, in [0, 1].
    pub fn fraction(&self) -> f64 {
        (self.done / self.total).clamp(0.0, 1.0)
    }

    /// `done` runs of the total are finished (fractions allowed: a run half done is 0.5).
    pub fn update(&mut self, done: f64) {
        self.done = done;
        let f = self.fraction();
        if !self.enabled || self.start.elapsed().as_secs_f64() < 1.0 || f - self.last < 0.005 {
            return;
        }
        self.last = f;
        self.shown = true;
        let width = 30;
        let filled = (f * width as f64) as usize;
        let secs = self.start.elapsed().as_secs_f64();
        let eta = if f > 0.0 { secs / f - secs } else { 0.0 };
        eprint!(
            "\r{} [{}{}] {}/{} runs  {:.0}s elapsed, ~{:.0}s left ",
            self.what,
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.done.floor() as u64,
            self.total as u64,
            secs,
            eta
        );
        let _ = std::io::stderr().flush();
    }

    /// Ends the bar's line if one was drawn.
    pub fn finish(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_runs_and_stays_quiet_off_a_terminal() {
        let mut p = Progress::with_output("x", 4, false);
        p.update(1.0);
        assert_eq!(p.fraction(), 0.25);
        p.update(9.0);
        assert_eq!(p.fraction(), 1.0);
        assert!(!p.shown, "nothing drawn when not a terminal");
        assert_eq!(Progress::with_output("x", 0, false).fraction(), 0.0);
        // A batch that learns its size late: 2 of 8 runs.
        p.set_total(8);
        p.update(2.0);
        assert_eq!(p.fraction(), 0.25);
    }
}
