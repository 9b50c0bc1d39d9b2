//! What decides admission: a core scheduler behind the seam, what it is told of a request
//! at arrival, and optionally the paper's requests-per-minute limiter in front of it.

use std::collections::VecDeque;

use fairlane_core::{Algorithm, Config, EstimatorKind};
use serde::Serialize;

use crate::SimError;

/// What the scheduler learns of a request at arrival (its `Request::cost`). Whatever it is
/// told, `progress` and `complete` report the cumulative cost `w_p·input + w_q·output so
/// far`, so a scheduler's charges reconcile to the same total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Disclosure {
    /// The prompt's cost `w_p · input`: what a gateway knows at admission, and what VTC
    /// charges at dispatch.
    Prompt,
    /// The whole cost, output included: an oracle (the known-cost presets).
    Total,
    /// Nothing: the scheduler estimates (the E presets: WFQᴱ, 2DFQᴱ, DRRᴱ) or does not
    /// care (FIFO).
    Nothing,
}

/// One policy of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The label of its results.
    pub name: String,
    /// The scheduler.
    pub config: Config,
    /// What the scheduler is told at arrival.
    pub disclosure: Disclosure,
    /// At most this many requests per client are accepted in any 60 s; the rest are
    /// rejected at arrival (the paper's RPM baseline, `lshare_req_queue.py`).
    pub rpm: Option<u32>,
}

impl Policy {
    /// A core preset, told what suits it: the VTC family the prompt, the known-cost
    /// presets the whole cost, the estimating ones (and FIFO) nothing.
    pub fn preset(name: &str) -> Result<Self, SimError> {
        let config = Config::preset(name).map_err(SimError::scheduler)?;
        Ok(Self::with_config(name, config))
    }

    /// A configured scheduler under a label, told what suits it (see [`Policy::preset`]).
    pub fn with_config(name: &str, config: Config) -> Self {
        let disclosure = if config.algorithm == Algorithm::Vtc {
            Disclosure::Prompt
        } else if config.estimator == EstimatorKind::Oracle && config.requires_cost() {
            Disclosure::Total
        } else {
            Disclosure::Nothing
        };
        Policy {
            name: name.to_string(),
            config,
            disclosure,
            rpm: None,
        }
    }

    /// The paper's RPM baseline: FCFS behind a limit of `limit` requests per client per
    /// minute (`rpm5`, `rpm20`, …).
    pub fn rpm(limit: u32) -> Self {
        let mut p = Self::with_config(
            &format!("rpm{limit}"),
            Config::preset("fifo").expect("fifo"),
        );
        p.rpm = Some(limit);
        p
    }

    /// A policy by name: a core preset, or `rpm<N>`.
    pub fn by_name(name: &str) -> Result<Self, SimError> {
        match name.strip_prefix("rpm").map(str::parse::<u32>) {
            Some(Ok(n)) if n > 0 => Ok(Self::rpm(n)),
            Some(_) => Err(SimError::spec(format!(
                "scheduler {name:?}: rpm<N> needs a limit N ≥ 1"
            ))),
            None => Self::preset(name),
        }
    }
}

/// The RPM limiter: per client, the acceptance times of the last 60 s.
#[derive(Clone, Debug)]
pub(crate) struct Rpm {
    limit: usize,
    accepted: Vec<VecDeque<f64>>,
}

impl Rpm {
    pub fn new(limit: u32, clients: usize) -> Self {
        Rpm {
            limit: limit as usize,
            accepted: vec![VecDeque::new(); clients],
        }
    }

    /// Whether client `c`'s request arriving at `now` is accepted (`check_past_one_minute`:
    /// refused once `limit` accepted requests arrived within the last 60 s).
    pub fn accept(&mut self, c: usize, now: f64) -> bool {
        let q = &mut self.accepted[c];
        while q.front().is_some_and(|&t| now - t > 60.0) {
            q.pop_front();
        }
        if q.len() >= self.limit {
            return false;
        }
        q.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_preset_is_told_what_suits_it() {
        let d = |n: &str| Policy::by_name(n).unwrap().disclosure;
        assert_eq!(d("vtc"), Disclosure::Prompt);
        assert_eq!(d("lcf"), Disclosure::Prompt);
        assert_eq!(d("vtce"), Disclosure::Prompt);
        assert_eq!(d("wfq"), Disclosure::Total);
        assert_eq!(d("2dfqe"), Disclosure::Nothing);
        assert_eq!(d("fifo"), Disclosure::Nothing);
        let r = Policy::by_name("rpm20").unwrap();
        assert_eq!((r.name.as_str(), r.rpm), ("rpm20", Some(20)));
        assert!(Policy::by_name("rpm0").is_err());
        assert!(Policy::by_name("rpmx").is_err());
        assert!(Policy::by_name("nope").is_err());
    }

    #[test]
    fn the_limiter_counts_a_sliding_minute() {
        let mut r = Rpm::new(2, 1);
        assert!(r.accept(0, 0.0));
        assert!(r.accept(0, 10.0));
        assert!(!r.accept(0, 59.0)); // two in the last minute
        assert!(!r.accept(0, 60.0)); // t = 0 is exactly 60 s old: still counted
        assert!(r.accept(0, 60.5));
        assert!(!r.accept(0, 61.0));
    }
}
