//! The continuous-batching server: its KV-cache budget, batch limits, how iterations
//! alternate between prefill and decode, how long one takes, and the admission rule that
//! reserves KV tokens for the running requests.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// How long one iteration takes: `fixed + per_prefill_token · P + per_decode_token · D`
/// seconds for `P` prompt tokens prefilled and `D` tokens decoded (one per running
/// request).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Speed {
    /// Seconds every iteration costs (kernel launches, sampling, the scheduler).
    pub fixed: f64,
    /// Seconds per prompt token prefilled.
    pub per_prefill_token: f64,
    /// Seconds per token decoded (per running request in a decode iteration).
    pub per_decode_token: f64,
}

impl Speed {
    /// Llama-2-7b on one A10G (24 GB), the paper's set-up (§5.1): the least-squares fit of
    /// the artifact's own profile of that GPU (`fair_bench/cost_profile.json`: prefill of
    /// 8 to 512-token prompts, decode steps of batches of 13 to 138 requests, a 10,000-token
    /// pool) to one fixed part: 34.3 ms per iteration, 0.213 ms per prompt token, 0.171 ms
    /// per decoded token. It predicts the profiled steps within 10 % for batches of 13–78
    /// (12 % low at 138) and a 19-request step of 256-token requests at 37.5 ms (measured
    /// 37.2 ms).
    pub const A10G_LLAMA2_7B: Speed = Speed {
        fixed: 0.034_281,
        per_prefill_token: 0.000_213_34,
        per_decode_token: 0.000_170_87,
    };

    /// Seconds for an iteration that prefills `prefill` tokens and decodes `decode`.
    #[inline]
    pub fn iteration(&self, prefill: u64, decode: u64) -> f64 {
        self.fixed + self.per_prefill_token * prefill as f64 + self.per_decode_token * decode as f64
    }
}

impl Default for Speed {
    /// [`Speed::A10G_LLAMA2_7B`].
    fn default() -> Self {
        Speed::A10G_LLAMA2_7B
    }
}

fn ten() -> u32 {
    10
}

/// How prefill and decode share iterations; in a spec `{ kind = "separate",
/// max_wait_tokens = 10 }` or `{ kind = "mixed" }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Batching {
    /// The artifact's server (S-LoRA on LightLLM, `router/manager.py`): an iteration either
    /// prefills newly admitted requests (each gets its first token) or decodes the running
    /// batch (one token each). With requests running, admission is tried only after
    /// `max_wait_tokens` decode iterations since the last prefill (LightLLM's 10), then at
    /// every iteration until something is admitted.
    Separate {
        /// Decode iterations between admission attempts.
        #[serde(default = "ten")]
        max_wait_tokens: u32,
    },
    /// Each iteration admits what fits, prefills it and decodes every running request
    /// (chunk-free mixed batching).
    Mixed,
}

impl Default for Batching {
    /// The artifact's: [`Batching::Separate`] with LightLLM's 10.
    fn default() -> Self {
        Batching::Separate {
            max_wait_tokens: 10,
        }
    }
}

/// The server: memory, limits, iteration structure and speed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Server {
    /// M: KV-cache tokens (`--max_total_token_num`).
    pub kv_tokens: u64,
    /// Most requests in the running batch (`--running_max_req_size`); the scheduler's
    /// workers.
    pub max_batch: usize,
    /// Most prompt tokens one admission round may prefill (`--batch_max_tokens`).
    pub max_prefill_tokens: u64,
    /// Prefill and decode iterations.
    pub batching: Batching,
    /// Iteration time.
    pub speed: Speed,
}

impl Server {
    /// The paper's set-up (§5.1, `fair_bench/launch_server.py`): Llama-2-7b on an A10G with
    /// a 10,000-token KV pool, S-LoRA's defaults for the rest: up to 1,000 running requests,
    /// prefill rounds of at most max(M/6, 3072) = 3,072 tokens, admission every 10 decode
    /// iterations.
    pub fn a10g_llama2_7b() -> Self {
        Server {
            kv_tokens: 10_000,
            max_batch: 1000,
            max_prefill_tokens: 3072,
            batching: Batching::Separate {
                max_wait_tokens: 10,
            },
            speed: Speed::A10G_LLAMA2_7B,
        }
    }

    /// The same server with another KV budget (and S-LoRA's prefill cap for it).
    pub fn kv_tokens(mut self, m: u64) -> Self {
        self.kv_tokens = m;
        self.max_prefill_tokens = (m / 6).max(3072);
        self
    }

    /// The same server with another batch limit.
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// Check the values; the error names the field within `[server]` (`kv_tokens`).
    pub fn check(&self) -> Result<(), FieldError> {
        let bad = |field: &str, why: String| Err(FieldError::new(field, why));
        if self.kv_tokens < 2 || self.kv_tokens > 1 << 40 {
            return bad(
                "kv_tokens",
                format!("must be in 2..=2^40, got {}", self.kv_tokens),
            );
        }
        if self.max_batch == 0 || self.max_batch > fairlane_core::MAX_WORKERS {
            return bad(
                "max_batch",
                format!(
                    "must be in 1..={}, got {}",
                    fairlane_core::MAX_WORKERS,
                    self.max_batch
                ),
            );
        }
        if self.max_prefill_tokens == 0 || self.max_prefill_tokens > 1 << 40 {
            return bad(
                "max_prefill_tokens",
                format!("must be in 1..=2^40, got {}", self.max_prefill_tokens),
            );
        }
        let s = self.speed;
        for (field, v) in [
            ("speed.fixed", s.fixed),
            ("speed.per_prefill_token", s.per_prefill_token),
            ("speed.per_decode_token", s.per_decode_token),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return bad(
                    field,
                    format!("must be finite seconds in [0, 1e6], got {v}"),
                );
            }
        }
        if s.iteration(1, 1) <= 0.0 {
            return bad("speed", "an iteration must take some time".into());
        }
        Ok(())
    }

    /// Whether a request of `input` prompt and `output` output tokens could ever run: its
    /// reservation fits an empty batch and its prompt one prefill round.
    pub fn admits(&self, input: u64, output: u64) -> bool {
        input >= 1
            && output >= 1
            && input <= self.max_prefill_tokens
            && input.saturating_add(output) < self.kv_tokens
    }
}

/// A request's KV footprint for the admission rule: the tokens it holds now and the output
/// tokens it may still add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footprint {
    pub held: u64,
    pub left: u64,
}

impl Footprint {
    /// A request being admitted (`_can_add_new_req`: `(input + 1, max_output − 1)`).
    pub fn new(input: u64, output: u64) -> Self {
        Footprint {
            held: input + 1,
            left: output - 1,
        }
    }

    /// A running request that has generated `done` tokens (`_init_cache_list`:
    /// `(input + done, max_output − done − 1)`).
    pub fn running(input: u64, output: u64, done: u64) -> Self {
        Footprint {
            held: input + done,
            left: output.saturating_sub(done + 1),
        }
    }
}

/// The artifact's admission test (`req_queue.py`, `_can_add_new_req`): with every request
/// growing to its full output and the ones with the most left finishing last, the KV
/// tokens in use peak at `max_i (Σ_{j ≤ i} held_j + left_i · (i + 1))` over the requests
/// sorted by `left`, largest first. A candidate fits when that peak, with it, stays below
/// M. `scratch` holds the footprints (the running ones and the candidate) and is sorted.
/// Returns `None` when the candidate fits, else by how much a term of the peak reaches past
/// M − 1: a lower bound of `peak − M` (≥ 0).
pub(crate) fn peak_excess(scratch: &mut [Footprint], kv_tokens: u64) -> Option<u64> {
    let total: u64 = scratch.iter().map(|f| f.held + f.left).sum();
    if total < kv_tokens {
        return None; // the peak is at most the sum of every request's full size
    }
    scratch.sort_unstable_by_key(|f| std::cmp::Reverse(f.left));
    let mut held = 0u64;
    for (i, f) in scratch.iter().enumerate() {
        held += f.held;
        let need = held + f.left * (i as u64 + 1);
        if need >= kv_tokens {
            return Some(need - kv_tokens);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The peak formula against a step-by-step replay: grow every request a token at a
    /// time, free it when done, track the most tokens held at once.
    #[test]
    fn peak_matches_a_replay() {
        let mut rng = crate::rng::Rng::new(3, 0);
        for _ in 0..2000 {
            let n = 1 + rng.below(8) as usize;
            let fs: Vec<Footprint> = (0..n)
                .map(|_| Footprint {
                    held: 1 + rng.below(50),
                    left: rng.below(50),
                })
                .collect();
            let mut peak = 0;
            for step in 0..=50 {
                let now: u64 = fs
                    .iter()
                    .filter(|f| f.left >= step)
                    .map(|f| f.held + step)
                    .sum();
                peak = peak.max(now);
            }
            for m in [peak, peak + 1] {
                let mut s = fs.clone();
                match peak_excess(&mut s, m) {
                    None => assert!(peak < m, "{fs:?} M = {m}"),
                    Some(e) => assert!(peak >= m && e <= peak - m, "{fs:?} M = {m}: {e}"),
                }
            }
        }
    }

    #[test]
    fn the_speed_fit_reproduces_the_profile() {
        let s = Speed::A10G_LLAMA2_7B;
        // cost_profile.json: 19 requests of 256 + 256 tokens decode a step in 37.2 ms.
        assert!((s.iteration(0, 19) - 0.0372).abs() < 0.001);
        // 38 prompts of 256 tokens prefill in 2.08 s.
        assert!((s.iteration(38 * 256, 0) - 2.08).abs() < 0.08);
    }

    #[test]
    fn bad_values_name_the_field() {
        let e = Server::a10g_llama2_7b().kv_tokens(0).check().unwrap_err();
        assert_eq!(e.field, "kv_tokens", "{e:?}");
        let mut s = Server::a10g_llama2_7b();
        s.speed.per_decode_token = f64::NAN;
        let e = s.check().unwrap_err();
        assert_eq!(e.field, "speed.per_decode_token", "{e:?}");
        let e = Server::a10g_llama2_7b().max_batch(0).check().unwrap_err();
        assert_eq!(e.field, "max_batch", "{e:?}");
        assert!(Server::a10g_llama2_7b().admits(256, 256));
        assert!(!Server::a10g_llama2_7b().admits(5000, 5000));
        assert!(!Server::a10g_llama2_7b().admits(0, 5));
    }
}
