//! What an LLM run measures: service per client in weighted tokens (`w_p·n_p + w_q·n_q`,
//! credited when the prompt is prefilled and as each token is generated), its series over
//! time, response and first-token latency, and the largest service difference between two
//! clients over any interval in which both were backlogged (requests waiting for
//! admission: the paper's Definition 4.1), in service per unit weight.

use fairlane_core::TokenCost;
use serde::Serialize;

use crate::metrics::{Latency, Thinned};

/// Pair tracking is quadratic in clients: above this many it is skipped.
pub const MAX_PAIR_CLIENTS: usize = 128;

/// Latency percentiles of one client, seconds (NaN with no sample).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl LatencySummary {
    fn of(l: &Latency) -> Self {
        LatencySummary {
            count: l.len(),
            mean: l.mean(),
            p50: l.quantile(0.5),
            p99: l.quantile(0.99),
        }
    }
}

/// One client's results.
#[derive(Clone, Debug, Serialize)]
pub struct LlmClient {
    /// `client0`, `client1`, …
    pub name: String,
    /// Its weight φ.
    pub weight: f64,
    /// Requests that arrived.
    pub arrived: u64,
    /// Of those, refused by the RPM limiter.
    pub rejected: u64,
    /// Requests completed.
    pub completed: u64,
    /// Service received, weighted tokens.
    pub service: f64,
    /// Service received before the end of the arrivals (the suite's duration).
    pub window_service: f64,
    /// `(t, service received in [0, t))` at each sampling instant.
    pub service_series: Vec<(f64, f64)>,
    /// Arrival to last token.
    pub response: LatencySummary,
    /// Arrival to first token (end of the prefill).
    pub first_token: LatencySummary,
    /// `(t, mean first-token latency of the requests whose first token came in the
    /// sampling interval ending at t)`, for intervals with any.
    pub first_token_series: Vec<(f64, f64)>,
}

/// The per-client counters and series of a run.
pub(crate) struct Meter {
    pub h: TokenCost,
    pub weights: Vec<f64>,
    pub service: Vec<f64>,
    /// Requests waiting for admission, per client (queued in the scheduler or held).
    pub waiting: Vec<u64>,
    pub arrived: Vec<u64>,
    pub rejected: Vec<u64>,
    pub completed: Vec<u64>,
    pub prompt_tokens: u64,
    pub generated_tokens: u64,
    response: Vec<Latency>,
    first_token: Vec<Latency>,
    /// First-token latencies in the current sampling interval: (sum, count).
    ftl_interval: Vec<(f64, u64)>,
    series: Vec<Thinned<f64>>,
    ftl_series: Vec<Thinned<f64>>,
    acc_diff: Thinned<f64>,
    /// Per pair (f < g, row-major): the range of `D = W_f/φ_f − W_g/φ_g` since both became
    /// backlogged, while both are.
    pairs: Vec<Option<(f64, f64)>>,
    worst: f64,
    /// Service and tokens at the end of the arrival window.
    window: Option<(Vec<f64>, u64)>,
}

impl Meter {
    pub fn new(h: TokenCost, weights: &[f64], max_points: usize) -> Self {
        let n = weights.len();
        let pairs = if n <= MAX_PAIR_CLIENTS {
            n * n.saturating_sub(1) / 2
        } else {
            0
        };
        Meter {
            h,
            weights: weights.to_vec(),
            service: vec![0.0; n],
            waiting: vec![0; n],
            arrived: vec![0; n],
            rejected: vec![0; n],
            completed: vec![0; n],
            prompt_tokens: 0,
            generated_tokens: 0,
            response: vec![Latency::default(); n],
            first_token: vec![Latency::default(); n],
            ftl_interval: vec![(0.0, 0); n],
            series: (0..n).map(|_| Thinned::new(max_points)).collect(),
            ftl_series: (0..n).map(|_| Thinned::new(max_points)).collect(),
            acc_diff: Thinned::new(max_points),
            pairs: vec![None; pairs],
            worst: 0.0,
            window: None,
        }
    }

    /// Client `c`'s prompt of `input` tokens was prefilled.
    #[inline]
    pub fn prefilled(&mut self, c: usize, input: u64) {
        self.service[c] += self.h.input_weight * input as f64;
        self.prompt_tokens += input;
    }

    /// Client `c` got `tokens` generated tokens.
    #[inline]
    pub fn generated(&mut self, c: usize, tokens: u32) {
        self.service[c] += self.h.output_weight * f64::from(tokens);
        self.generated_tokens += u64::from(tokens);
    }

    /// A request of client `c` that arrived at `arrival` got its first token at `now`.
    pub fn first_token(&mut self, c: usize, arrival: f64, now: f64) {
        let l = now - arrival;
        self.first_token[c].record(l);
        let (s, k) = &mut self.ftl_interval[c];
        *s += l;
        *k += 1;
    }

    /// A request of client `c` that arrived at `arrival` completed at `now`.
    pub fn completed(&mut self, c: usize, arrival: f64, now: f64) {
        self.response[c].record(now - arrival);
        self.completed[c] += 1;
    }

    /// Service or backlogs changed: extend the ranges of the backlogged pairs.
    pub fn observe(&mut self) {
        if self.pairs.is_empty() {
            return;
        }
        let n = self.service.len();
        let mut k = 0;
        for f in 0..n {
            let (wf, bf) = (self.service[f] / self.weights[f], self.waiting[f] > 0);
            for g in f + 1..n {
                let p = &mut self.pairs[k];
                k += 1;
                if !(bf && self.waiting[g] > 0) {
                    *p = None;
                    continue;
                }
                let d = wf - self.service[g] / self.weights[g];
                let r = p.get_or_insert((d, d));
                r.0 = r.0.min(d);
                r.1 = r.1.max(d);
                self.worst = self.worst.max(r.1 - r.0);
            }
        }
    }

    /// The end of the arrival window: remember what was served before it.
    pub fn close_window(&mut self) {
        if self.window.is_none() {
            let tokens = self.prompt_tokens + self.generated_tokens;
            self.window = Some((self.service.clone(), tokens));
        }
    }

    /// A sampling instant.
    pub fn sample(&mut self, now: f64) {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for (c, &s) in self.service.iter().enumerate() {
            self.series[c].push(now, s);
            lo = lo.min(s);
            hi = hi.max(s);
            let (sum, k) = std::mem::take(&mut self.ftl_interval[c]);
            if k > 0 {
                self.ftl_series[c].push(now, sum / k as f64);
            }
        }
        self.acc_diff.push(now, hi - lo);
    }

    /// The largest backlogged difference, if pairs were tracked.
    pub fn worst(&self) -> Option<f64> {
        (!self.pairs.is_empty() || self.service.len() < 2).then_some(self.worst)
    }

    /// `max_{i,j} |W_i(0,t) − W_j(0,t)|` at each sampling instant (the paper's Fig. 3a).
    pub fn acc_diff(&self) -> Vec<(f64, f64)> {
        self.acc_diff.points.clone()
    }

    /// Tokens (prompt and generated) served before the end of the arrival window, and
    /// per client the service then (everything if the window never closed).
    pub fn window(&self) -> (u64, Vec<f64>) {
        match &self.window {
            Some((s, t)) => (*t, s.clone()),
            None => (
                self.prompt_tokens + self.generated_tokens,
                self.service.clone(),
            ),
        }
    }

    /// The per-client results.
    pub fn clients(&self, names: &[String]) -> Vec<LlmClient> {
        let (_, window) = self.window();
        (0..self.service.len())
            .map(|c| LlmClient {
                name: names[c].clone(),
                weight: self.weights[c],
                arrived: self.arrived[c],
                rejected: self.rejected[c],
                completed: self.completed[c],
                service: self.service[c],
                window_service: window[c],
                service_series: self.series[c].points.clone(),
                response: LatencySummary::of(&self.response[c]),
                first_token: LatencySummary::of(&self.first_token[c]),
                first_token_series: self.ftl_series[c].points.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_count_only_common_backlogged_intervals() {
        let mut m = Meter::new(TokenCost::PAPER, &[1.0, 1.0, 2.0], 100);
        m.waiting = vec![1, 1, 0];
        m.observe(); // D01 = 0
        m.service[0] = 10.0;
        m.observe(); // D01 = 10
        m.waiting[1] = 0; // the interval ends
        m.service[0] = 100.0;
        m.observe();
        m.waiting[1] = 1; // a new interval starts at D01 = 100
        m.observe();
        m.service[1] = 95.0;
        m.observe(); // D01 = 5: range 95
        assert_eq!(m.worst(), Some(95.0));
        // Client 2 (weight 2) joins: D02 = W0 − W2/2.
        m.waiting[2] = 1;
        m.observe();
        m.service[2] = 400.0; // D02 from 100 to −100
        m.observe();
        assert_eq!(m.worst(), Some(200.0));
    }
}
