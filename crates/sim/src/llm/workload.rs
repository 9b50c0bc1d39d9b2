//! The synthetic workloads of the VTC paper (§5.2), as the artifact defines them:
//! parameters from `fair_bench/exp_suite.py` (`paper_suite`), arrival and length rules from
//! `fair_bench/trace.py`. Lengths are drawn like numpy's `randint(lo, hi)`, uniform in
//! `lo..hi` (so `[256, 257]` is always 256). The random numbers are this crate's own
//! ([`Rng`]), not numpy's: the same rules, other draws.

use serde::Serialize;

use crate::error::FieldError;
use crate::rng::{purpose, stream_id, Rng};
use crate::SimError;

/// The most clients a suite may have (each keeps its own series).
pub const MAX_CLIENTS: usize = 1024;

/// The most requests a suite may generate (`Σ rates · duration`).
pub const MAX_REQUESTS: u64 = 10_000_000;

/// One request of a workload: when it arrives, whose it is, its prompt and output tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LlmRequest {
    /// Arrival, seconds.
    pub time: f64,
    /// The client's index.
    pub client: u32,
    /// Prompt tokens.
    pub input: u64,
    /// Output tokens (the request's `max_new_tokens`, generated to the end: the artifact's
    /// client sets `ignore_eos`).
    pub output: u64,
}

/// How arrivals and lengths are drawn (`trace.py`'s `mode`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Mode {
    /// `generate_requests_uniform`: client `i` sends `⌊rate_i · duration⌋` requests evenly
    /// spaced `1/rate_i` apart, the first at a random fraction of that gap; with `on_off`,
    /// client 0 drops those falling in odd periods of `on_off` seconds.
    Uniform,
    /// `generate_requests_poisson`: `⌊Σrate · duration⌋` requests, gaps drawn from a gamma
    /// of coefficient of variation `cv` (exponential for |cv| = 1) at the total rate, each
    /// request's client drawn in proportion to the rates; `on_off` drops client 0's in odd
    /// periods.
    Poisson,
    /// `generate_requests_poisson_short_long`: as [`Mode::Poisson`], with client 0's prompt
    /// and output lengths divided by 4.
    PoissonShortLong,
    /// `generate_requests_poisson_short_long_2`: as [`Mode::Poisson`], with client 0's
    /// prompt and output lengths swapped.
    PoissonShortLong2,
    /// `generate_requests_increase`: client 0 evenly at `rate_0` from t = 0; client 1's
    /// rate grows linearly from 0.2/s to `rate_1` over the run, `⌊(0.2 + rate_1)/2 ·
    /// duration⌋` requests.
    Increase,
    /// `generate_requests_dist_shift`: three phases of a third of the run each, uniform
    /// arrivals at rates (0.5, 2) with client 0 ON/OFF every 60 s, then (1, 1), then
    /// (0.5, 1.5).
    DistShift,
}

impl Mode {
    /// The mode by `trace.py`'s name (`uniform`, `poisson`, `poisson-short-long`,
    /// `poisson-short-long-2`, `increase`, `dist_shift`; hyphens or underscores).
    pub fn by_name(name: &str) -> Result<Self, FieldError> {
        Ok(match name.replace('_', "-").as_str() {
            "uniform" => Mode::Uniform,
            "poisson" => Mode::Poisson,
            "poisson-short-long" => Mode::PoissonShortLong,
            "poisson-short-long-2" => Mode::PoissonShortLong2,
            "increase" => Mode::Increase,
            "dist-shift" => Mode::DistShift,
            _ => {
                return Err(FieldError::new(
                    "mode",
                    format!(
                        "unknown mode {name:?}; known: uniform, poisson, poisson-short-long, \
                         poisson-short-long-2, increase, dist_shift"
                    ),
                ))
            }
        })
    }
}

/// A suite: `exp_suite.py`'s `BenchmarkConfig` for one workload, plus the clients' weights
/// (the server's `--fair-weights`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suite {
    /// The suite's name in `exp_suite.py`.
    pub name: String,
    /// Requests per second per client (`req_rate`; unused by [`Mode::DistShift`]).
    pub rates: Vec<f64>,
    /// Coefficient of variation of the gaps ([`Mode::Poisson`] and its variants).
    pub cv: f64,
    /// Seconds of arrivals.
    pub duration: f64,
    /// Prompt lengths, `lo..hi`.
    pub input: (u64, u64),
    /// Output lengths, `lo..hi`.
    pub output: (u64, u64),
    /// ON/OFF period of client 0, seconds.
    pub on_off: Option<f64>,
    /// The arrival and length rules.
    pub mode: Mode,
    /// Each client's weight φ (1 unless the experiment sets `--fair-weights`).
    pub weights: Vec<f64>,
}

/// The suite names [`Suite::by_name`] knows: the paper's §5.2 suites and the artifact's
/// weighted and eight-client overload (`fair_bench/REVISION.md`).
pub const SUITES: [&str; 11] = [
    "overload",
    "overload_multi",
    "overload_weighted",
    "proportional",
    "increase",
    "on_off_less",
    "on_off_overload",
    "poisson_on_off_overload",
    "poisson_short_long",
    "poisson_short_long_2",
    "dist_shift",
];

impl Suite {
    fn uniform(name: &str, rates: &[f64], duration: f64, on_off: Option<f64>) -> Self {
        Suite {
            name: name.into(),
            rates: rates.to_vec(),
            cv: -1.0,
            duration,
            input: (256, 257),
            output: (256, 257),
            on_off,
            mode: Mode::Uniform,
            weights: vec![1.0; rates.len()],
        }
    }

    /// Figure 3: two clients at 90 and 180 requests/min, 256 + 256 tokens, 6 minutes; both
    /// are backlogged throughout.
    pub fn overload() -> Self {
        Self::uniform("overload", &[1.5, 3.0], 360.0, None)
    }

    /// Eight overloaded clients (the length-prediction experiment, `REVISION.md`).
    pub fn overload_multi() -> Self {
        Self::uniform(
            "overload_multi",
            &[0.4, 0.4, 0.4, 0.6, 0.6, 0.6, 0.6, 0.6],
            360.0,
            None,
        )
    }

    /// Figure 16: four overloaded clients with weights 1 : 2 : 3 : 4 (weighted VTC,
    /// `REVISION.md`: `--fair-weights 1 2 3 4`).
    pub fn overload_weighted() -> Self {
        let mut s = Self::uniform("overload_weighted", &[0.8, 0.8, 1.2, 1.6], 360.0, None);
        s.weights = vec![1.0, 2.0, 3.0, 4.0];
        s
    }

    /// Figure 4: clients at 15, 30 and 90 requests/min for 10 minutes; only the third is
    /// backlogged.
    pub fn proportional() -> Self {
        Self::uniform("proportional", &[0.25, 0.5, 1.5], 600.0, None)
    }

    /// Figure 9: client 0 at 30 requests/min, client 1 growing from 12 to 120.
    pub fn increase() -> Self {
        let mut s = Self::uniform("increase", &[0.5, 2.0], 600.0, None);
        s.mode = Mode::Increase;
        s
    }

    /// Figure 5: client 0 ON/OFF every minute at 30 requests/min, client 1 at 120.
    pub fn on_off_less() -> Self {
        Self::uniform("on_off_less", &[0.5, 2.0], 600.0, Some(60.0))
    }

    /// Figure 6: client 0 ON/OFF every minute at 120 requests/min, client 1 at 180.
    pub fn on_off_overload() -> Self {
        Self::uniform("on_off_overload", &[2.0, 3.0], 600.0, Some(60.0))
    }

    /// Poisson arrivals at 30 and 120 requests/min, 16–511 tokens each way, client 0
    /// ON/OFF every minute.
    pub fn poisson_on_off_overload() -> Self {
        let mut s = Self::uniform("poisson_on_off_overload", &[0.5, 2.0], 600.0, Some(60.0));
        s.mode = Mode::Poisson;
        s.input = (16, 512);
        s.output = (16, 512);
        s
    }

    /// Figure 7: Poisson arrivals, client 0 at 480 requests/min of 64 + 64 tokens, client
    /// 1 at 90 of 256 + 256.
    pub fn poisson_short_long() -> Self {
        let mut s = Self::uniform("poisson_short_long", &[8.0, 1.5], 600.0, None);
        s.mode = Mode::PoissonShortLong;
        s
    }

    /// Figure 8: Poisson arrivals, client 0 at 480 requests/min of 512-token prompts and
    /// 32-token outputs (the suite's ranges swapped), client 1 at 90 of 32 + 512.
    pub fn poisson_short_long_2() -> Self {
        let mut s = Self::uniform("poisson_short_long_2", &[8.0, 1.5], 600.0, None);
        s.mode = Mode::PoissonShortLong2;
        s.input = (32, 33);
        s.output = (512, 513);
        s
    }

    /// Figure 10: 15 minutes in three phases (ON/OFF with client 1 overloaded, both
    /// overloaded, one under its share).
    pub fn dist_shift() -> Self {
        let mut s = Self::uniform("dist_shift", &[-1.0, -1.0], 900.0, None);
        s.mode = Mode::DistShift;
        s
    }

    /// A suite by its name in `exp_suite.py` (hyphens or underscores).
    pub fn by_name(name: &str) -> Result<Self, FieldError> {
        Ok(match name.replace('-', "_").as_str() {
            "overload" => Self::overload(),
            "overload_multi" => Self::overload_multi(),
            "overload_weighted" => Self::overload_weighted(),
            "proportional" => Self::proportional(),
            "increase" => Self::increase(),
            "on_off_less" => Self::on_off_less(),
            "on_off_overload" => Self::on_off_overload(),
            "poisson_on_off_overload" => Self::poisson_on_off_overload(),
            "poisson_short_long" => Self::poisson_short_long(),
            "poisson_short_long_2" => Self::poisson_short_long_2(),
            "dist_shift" => Self::dist_shift(),
            _ => {
                return Err(FieldError::new(
                    "suite",
                    format!("unknown suite {name:?}; known: {}", SUITES.join(", ")),
                ))
            }
        })
    }

    /// The same suite with `duration` seconds of arrivals.
    pub fn duration(mut self, duration: f64) -> Self {
        self.duration = duration;
        self
    }

    /// How many clients.
    pub fn clients(&self) -> usize {
        self.weights.len()
    }

    /// The longest prompt a request can have (L_input of Theorem 4.4).
    pub fn max_input(&self) -> u64 {
        match self.mode {
            Mode::PoissonShortLong2 => self.input.1.max(self.output.1) - 1,
            _ => self.input.1 - 1,
        }
    }

    /// The longest output a request can have.
    pub fn max_output(&self) -> u64 {
        match self.mode {
            Mode::PoissonShortLong2 => self.input.1.max(self.output.1) - 1,
            _ => self.output.1 - 1,
        }
    }

    /// Check the values; the error names the field within `[workload]` (`rates`).
    pub fn check(&self) -> Result<(), FieldError> {
        let bad = |field: &str, why: String| Err(FieldError::new(field, why));
        let n = self.weights.len();
        if n == 0 || n > MAX_CLIENTS {
            return bad(
                "weights",
                format!("needs 1..={MAX_CLIENTS} clients, got {n}"),
            );
        }
        if self.mode != Mode::DistShift && self.rates.len() != n {
            return bad(
                "rates",
                format!(
                    "{} rates for {n} clients (one weight each)",
                    self.rates.len()
                ),
            );
        }
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 1e9) {
            return bad(
                "duration",
                format!("must be in (0, 1e9] s, got {}", self.duration),
            );
        }
        for (field, (lo, hi)) in [("input", self.input), ("output", self.output)] {
            if lo == 0 || hi <= lo || hi > 1 << 32 {
                return bad(field, format!("needs 1 ≤ lo < hi ≤ 2^32, got [{lo}, {hi})"));
            }
        }
        self.check_rates()?;
        if !(self.cv.is_finite() && self.cv != 0.0 && self.cv.abs() <= 100.0) {
            return bad(
                "cv",
                format!("must be finite, non-zero, |cv| ≤ 100, got {}", self.cv),
            );
        }
        if let Some(p) = self.on_off {
            if !(p.is_finite() && p > 0.0) {
                return bad("on_off", format!("must be a positive period, got {p}"));
            }
        }
        for (i, &w) in self.weights.iter().enumerate() {
            if !(fairlane_core::MIN_WEIGHT..=fairlane_core::MAX_WEIGHT).contains(&w) {
                return bad(
                    &format!("weights[{i}]"),
                    format!(
                        "must be in [{}, {}], got {w}",
                        fairlane_core::MIN_WEIGHT,
                        fairlane_core::MAX_WEIGHT
                    ),
                );
            }
        }
        Ok(())
    }

    /// The rates: finite, not all zero, at most [`MAX_REQUESTS`] requests in all.
    fn check_rates(&self) -> Result<(), FieldError> {
        let n = self.weights.len();
        if self.mode == Mode::DistShift {
            return if n == 2 {
                Ok(())
            } else {
                Err(FieldError::new("mode", "dist_shift needs two clients"))
            };
        }
        for (i, &r) in self.rates.iter().enumerate() {
            if !(r.is_finite() && r >= 0.0) {
                return Err(FieldError::new(
                    format!("rates[{i}]"),
                    format!("must be a finite rate ≥ 0 (requests/s), got {r}"),
                ));
            }
        }
        if matches!(self.mode, Mode::Increase) && n != 2 {
            return Err(FieldError::new("mode", "increase needs two clients"));
        }
        let total: f64 = self.rates.iter().sum();
        if total <= 0.0 {
            return Err(FieldError::new("rates", "no client sends anything"));
        }
        if total * self.duration > MAX_REQUESTS as f64 {
            return Err(FieldError::new(
                "rates",
                format!(
                    "{total}/s over {} s is more than {MAX_REQUESTS} requests",
                    self.duration
                ),
            ));
        }
        Ok(())
    }

    /// [`Suite::check`] as a run error (`workload.FIELD (suite): …`).
    fn checked(&self) -> Result<(), SimError> {
        self.check().map_err(|e| {
            SimError::spec(format!(
                "workload.{} ({}): {}",
                e.field, self.name, e.message
            ))
        })
    }

    /// The requests of this suite for `seed`, in arrival order.
    pub fn requests(&self, seed: u64) -> Result<Vec<LlmRequest>, SimError> {
        self.checked()?;
        let mut out = match self.mode {
            Mode::Uniform => self.uniform_phase(&self.rates, 0.0, self.duration, self.on_off, seed),
            Mode::Increase => self.increase_requests(seed),
            Mode::DistShift => {
                let third = self.duration / 3.0;
                let mut v = self.uniform_phase(&[0.5, 2.0], 0.0, third, Some(60.0), seed);
                v.extend(self.uniform_phase(&[1.0, 1.0], third, third, None, seed ^ 1));
                v.extend(self.uniform_phase(&[0.5, 1.5], 2.0 * third, third, None, seed ^ 2));
                v
            }
            Mode::Poisson | Mode::PoissonShortLong | Mode::PoissonShortLong2 => {
                self.poisson_requests(seed)
            }
        };
        out.sort_by(|a, b| a.time.total_cmp(&b.time));
        Ok(out)
    }

    fn lengths(&self, rng: &mut Rng) -> (u64, u64) {
        let draw = |rng: &mut Rng, (lo, hi): (u64, u64)| lo + rng.below(hi - lo);
        (draw(rng, self.input), draw(rng, self.output))
    }

    fn stream(&self, client: usize, seed: u64, what: u64) -> Rng {
        Rng::new(seed, stream_id(&format!("client{client}")) ^ what)
    }

    /// Whether client 0 is OFF at `t` (`int(t // on_off) & 1 == 1`).
    fn off(on_off: Option<f64>, client: usize, t: f64) -> bool {
        on_off.is_some_and(|p| client == 0 && ((t / p).floor() as u64) & 1 == 1)
    }

    /// `generate_requests_uniform` over `[start, start + duration)`.
    fn uniform_phase(
        &self,
        rates: &[f64],
        start: f64,
        duration: f64,
        on_off: Option<f64>,
        seed: u64,
    ) -> Vec<LlmRequest> {
        let mut out = Vec::new();
        for (i, &rate) in rates.iter().enumerate() {
            if rate <= 0.0 {
                continue;
            }
            let mut arrivals = self.stream(i, seed, purpose::ARRIVALS);
            let mut lengths = self.stream(i, seed, purpose::COSTS);
            let total = (rate * duration) as u64;
            let mut t = start + arrivals.uniform() / rate;
            for _ in 0..total {
                t += 1.0 / rate;
                let (input, output) = self.lengths(&mut lengths);
                if !Self::off(on_off, i, t) {
                    out.push(LlmRequest {
                        time: t,
                        client: i as u32,
                        input,
                        output,
                    });
                }
            }
        }
        out
    }

    /// `generate_requests_increase`.
    fn increase_requests(&self, seed: u64) -> Vec<LlmRequest> {
        let mut out = Vec::new();
        let (r0, end) = (self.rates[0], self.rates[1]);
        let mut lengths = self.stream(0, seed, purpose::COSTS);
        let mut t = 0.0;
        for _ in 0..(r0 * self.duration) as u64 {
            t += 1.0 / r0;
            let (input, output) = self.lengths(&mut lengths);
            if !Self::off(self.on_off, 0, t) {
                out.push(LlmRequest {
                    time: t,
                    client: 0,
                    input,
                    output,
                });
            }
        }
        let start = 0.2;
        let mut lengths = self.stream(1, seed, purpose::COSTS);
        let mut t = 0.0;
        for _ in 0..(0.5 * (start + end) * self.duration) as u64 {
            let rate = start + (end - start) * t / self.duration;
            t += 1.0 / rate;
            let (input, output) = self.lengths(&mut lengths);
            out.push(LlmRequest {
                time: t,
                client: 1,
                input,
                output,
            });
        }
        out
    }

    /// `generate_requests_poisson` and its short/long variants.
    fn poisson_requests(&self, seed: u64) -> Vec<LlmRequest> {
        let total_rate: f64 = self.rates.iter().sum();
        let total = (total_rate * self.duration) as u64;
        let mut rng = Rng::new(seed, stream_id("poisson") ^ purpose::ARRIVALS);
        let mut lengths = Rng::new(seed, stream_id("poisson") ^ purpose::COSTS);
        let shape = 1.0 / (self.cv * self.cv);
        let scale = self.cv * self.cv / total_rate;
        let mut out = Vec::with_capacity(total as usize);
        let mut t = 0.0;
        for _ in 0..total {
            // The client in proportion to the rates (trace.py: `rand > r0 / (r0 + r1)`).
            let mut u = rng.uniform() * total_rate;
            let mut client = self.rates.len() - 1;
            for (i, &r) in self.rates.iter().enumerate() {
                if u < r {
                    client = i;
                    break;
                }
                u -= r;
            }
            let (input, output) = self.lengths(&mut lengths);
            t += gamma(&mut rng, shape) * scale;
            if Self::off(self.on_off, client, t) {
                continue;
            }
            let (input, output) = match (&self.mode, client) {
                (Mode::PoissonShortLong, 0) => (input / 4, output / 4),
                (Mode::PoissonShortLong2, 0) => (output, input),
                _ => (input, output),
            };
            out.push(LlmRequest {
                time: t,
                client: client as u32,
                input: input.max(1),
                output: output.max(1),
            });
        }
        out
    }
}

/// A gamma variate of shape `k` and scale 1 (Marsaglia & Tsang, 2000; for k < 1 by
/// `Gamma(k + 1) · U^{1/k}`); k = 1 is the exponential.
fn gamma(rng: &mut Rng, k: f64) -> f64 {
    if k == 1.0 {
        return rng.exp(1.0);
    }
    if k < 1.0 {
        return gamma(rng, k + 1.0) * rng.open01().powf(1.0 / k);
    }
    let d = k - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.open01();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(reqs: &[LlmRequest], client: u32) -> usize {
        reqs.iter().filter(|r| r.client == client).count()
    }

    #[test]
    fn overload_is_evenly_spaced_and_uniformly_long() {
        let r = Suite::overload().requests(42).unwrap();
        assert_eq!((count(&r, 0), count(&r, 1)), (540, 1080));
        assert!(r.iter().all(|q| q.input == 256 && q.output == 256));
        assert!(r.windows(2).all(|w| w[0].time <= w[1].time));
        let c1: Vec<f64> = r.iter().filter(|q| q.client == 1).map(|q| q.time).collect();
        assert!(c1
            .windows(2)
            .all(|w| ((w[1] - w[0]) - 1.0 / 3.0).abs() < 1e-9));
        assert!(c1[0] > 1.0 / 3.0 && c1[0] <= 2.0 / 3.0);
    }

    #[test]
    fn on_off_drops_client_0_in_odd_minutes() {
        let r = Suite::on_off_less().requests(1).unwrap();
        assert!(r
            .iter()
            .filter(|q| q.client == 0)
            .all(|q| ((q.time / 60.0).floor() as u64).is_multiple_of(2)));
        // About half of client 0's 300 requests survive; client 1 keeps its 1,200.
        assert!((140..=160).contains(&count(&r, 0)), "{}", count(&r, 0));
        assert_eq!(count(&r, 1), 1200);
    }

    #[test]
    fn poisson_short_long_shares_and_lengths() {
        let r = Suite::poisson_short_long().requests(7).unwrap();
        let (a, b) = (count(&r, 0) as f64, count(&r, 1) as f64);
        assert_eq!(r.len(), 5700);
        assert!((a / (a + b) - 8.0 / 9.5).abs() < 0.02, "{a} {b}");
        assert!(r.iter().all(|q| match q.client {
            0 => q.input == 64 && q.output == 64,
            _ => q.input == 256 && q.output == 256,
        }));
        // Exponential gaps at 9.5/s overall: the run lasts about 600 s.
        let last = r.last().unwrap().time;
        assert!((last - 600.0).abs() < 30.0, "{last}");
        let r = Suite::poisson_short_long_2().requests(7).unwrap();
        assert!(r.iter().all(|q| match q.client {
            0 => q.input == 512 && q.output == 32,
            _ => q.input == 32 && q.output == 512,
        }));
    }

    #[test]
    fn increase_ramps_client_1() {
        let r = Suite::increase().requests(3).unwrap();
        assert_eq!(count(&r, 0), 300);
        assert_eq!(count(&r, 1), 660);
        let c1: Vec<f64> = r.iter().filter(|q| q.client == 1).map(|q| q.time).collect();
        let early = c1.iter().filter(|&&t| t < 150.0).count();
        let late = c1.iter().filter(|&&t| t >= 450.0).count();
        assert!(late > 3 * early, "{early} early, {late} late");
    }

    #[test]
    fn dist_shift_has_three_phases() {
        let r = Suite::dist_shift().requests(5).unwrap();
        let in_phase = |c, lo, hi| {
            r.iter()
                .filter(|q| q.client == c && q.time >= lo && q.time < hi)
                .count()
        };
        // A phase's last request may land up to one gap past its end.
        assert_eq!(count(&r, 1), 600 + 300 + 450);
        assert!((598..=600).contains(&in_phase(1, 0.0, 300.0)));
        assert!(in_phase(0, 0.0, 300.0) < 100);
        assert!((299..=301).contains(&in_phase(0, 300.0, 600.0)));
        assert!((449..=452).contains(&in_phase(1, 600.0, 901.0)));
    }

    #[test]
    fn gamma_has_its_mean_and_variance() {
        let mut rng = Rng::new(9, 0);
        for k in [0.25, 1.0, 4.0] {
            let n = 200_000;
            let xs: Vec<f64> = (0..n).map(|_| gamma(&mut rng, k)).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
            assert!((mean / k - 1.0).abs() < 0.02, "k {k}: mean {mean}");
            assert!((var / k - 1.0).abs() < 0.05, "k {k}: var {var}");
        }
    }

    #[test]
    fn every_named_suite_builds_and_bad_values_name_the_field() {
        for name in SUITES {
            let s = Suite::by_name(name).unwrap();
            assert!(!s.requests(1).unwrap().is_empty(), "{name}");
        }
        assert!(Suite::by_name("nope")
            .unwrap_err()
            .message
            .contains("known: overload"));
        for (name, mode) in [
            ("uniform", Mode::Uniform),
            ("poisson-short-long-2", Mode::PoissonShortLong2),
            ("dist_shift", Mode::DistShift),
        ] {
            assert_eq!(Mode::by_name(name).unwrap(), mode);
        }
        assert!(Mode::by_name("gamma").is_err());
        let e = Suite::overload().duration(f64::NAN).check().unwrap_err();
        assert_eq!(e.field, "duration", "{e:?}");
        let e = Suite::overload()
            .duration(f64::NAN)
            .requests(1)
            .unwrap_err();
        assert!(e.message.starts_with("workload.duration (overload)"), "{e}");
        let mut s = Suite::overload();
        s.input = (0, 5);
        assert_eq!(s.check().unwrap_err().field, "input");
        s = Suite::overload();
        s.rates[1] = f64::INFINITY;
        assert_eq!(s.check().unwrap_err().field, "rates[1]");
        s = Suite::overload();
        s.rates = vec![1e6, 1e6];
        assert_eq!(s.check().unwrap_err().field, "rates");
        s = Suite::overload();
        s.weights[0] = 0.0;
        assert_eq!(s.check().unwrap_err().field, "weights[0]");
    }
}
