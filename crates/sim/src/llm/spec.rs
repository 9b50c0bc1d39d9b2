//! The sections of an LLM-server spec (`[server] model = "llm"`, docs/llm.md "Running it"):
//! serde types that check themselves and name their fields, resolved into the model's own
//! types ([`Server`], [`Suite`], [`TokenCost`], [`Policy`], [`LlmOptions`]).

use fairlane_core::TokenCost;
use serde::Deserialize;

use super::{Batching, LlmOptions, Mode, Policy, Server, Speed, Suite};
use crate::doc::{Doc, SweepPoint};
use crate::error::{FieldError, SpecError};

/// An LLM-server spec as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// Short name.
    pub name: String,
    /// One paragraph for the report.
    #[serde(default)]
    pub description: String,
    /// Seed of the workload's random streams.
    #[serde(default = "crate::doc::default::seed")]
    pub seed: u64,
    /// Seconds of arrivals; the suite's own when absent.
    #[serde(default)]
    pub duration: Option<f64>,
    /// Must be 0: the LLM server measures from t = 0 (present so that every kind takes
    /// the same top-level fields).
    #[serde(default)]
    pub warmup: f64,
    /// Policies: core presets (`vtc`, `fifo`, `wfqe`, `2dfqe`, …) or `rpm<N>`.
    pub schedulers: Vec<String>,
    /// `[server]`: `model = "llm"` and the server's memory, limits and speed.
    pub server: ServerSection,
    /// `[cost]`: the service function's token weights.
    #[serde(default)]
    pub cost: CostSection,
    /// `[workload]`: a suite by name, any of its fields replaced.
    pub workload: WorkloadSection,
    /// `[metrics]`: sampling of the series.
    #[serde(default)]
    pub metrics: MetricsSection,
    /// Points of a sweep (each runs under every scheduler).
    #[serde(default)]
    pub sweep: Vec<SweepPoint>,
}

/// `[server]` of an LLM-server spec; absent fields are the paper's set-up
/// ([`Server::a10g_llama2_7b`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// Must be `llm`: the kind of server.
    pub model: String,
    /// M: KV-cache tokens.
    pub kv_tokens: u64,
    /// Most requests in the running batch.
    pub max_batch: usize,
    /// Most prompt tokens per admission round; S-LoRA's max(M/6, 3072) when absent.
    pub max_prefill_tokens: Option<u64>,
    /// `{ kind = "separate", max_wait_tokens = 10 }` or `{ kind = "mixed" }`.
    pub batching: Batching,
    /// `{ fixed, per_prefill_token, per_decode_token }` seconds.
    pub speed: Speed,
}

impl Default for ServerSection {
    fn default() -> Self {
        let paper = Server::a10g_llama2_7b();
        ServerSection {
            model: "llm".into(),
            kv_tokens: paper.kv_tokens,
            max_batch: paper.max_batch,
            max_prefill_tokens: None,
            batching: paper.batching,
            speed: paper.speed,
        }
    }
}

/// `[cost]`: `h = w_p·n_p + w_q·n_q`, the paper's 1 and 2 by default.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostSection {
    /// w_p.
    pub input_token_weight: f64,
    /// w_q.
    pub output_token_weight: f64,
}

impl Default for CostSection {
    fn default() -> Self {
        CostSection {
            input_token_weight: 1.0,
            output_token_weight: 2.0,
        }
    }
}

/// `[workload]`: `suite` names one of [`super::SUITES`]; every other field replaces the
/// suite's value (`fair_bench/exp_suite.py`'s names).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// The suite.
    pub suite: String,
    /// Requests per second per client.
    #[serde(default)]
    pub rates: Option<Vec<f64>>,
    /// Coefficient of variation of the gaps (Poisson modes).
    #[serde(default)]
    pub cv: Option<f64>,
    /// Prompt lengths `[lo, hi)`.
    #[serde(default)]
    pub input: Option<(u64, u64)>,
    /// Output lengths `[lo, hi)`.
    #[serde(default)]
    pub output: Option<(u64, u64)>,
    /// Client 0's ON/OFF period, seconds.
    #[serde(default)]
    pub on_off: Option<f64>,
    /// `trace.py`'s mode.
    #[serde(default)]
    pub mode: Option<String>,
    /// Each client's weight.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
}

/// `[metrics]`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// Seconds between samples of the series (default 1).
    pub sample_every: f64,
    /// Most points kept per series (default 2000).
    pub max_points: usize,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            sample_every: 1.0,
            max_points: 2000,
        }
    }
}

/// A spec resolved into what [`super::simulate`] takes.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The spec's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Seconds of arrivals (the suite's when the spec names none).
    pub duration: f64,
    /// Always 0 (see [`LlmSpec::warmup`]).
    pub warmup: f64,
    /// The workload (its duration the spec's).
    pub suite: Suite,
    /// The seed.
    pub seed: u64,
    /// The server.
    pub server: Server,
    /// The policies, in spec order.
    pub policies: Vec<Policy>,
    /// The service function and sampling.
    pub options: LlmOptions,
}

impl LlmSpec {
    /// Check a parsed document as an LLM-server spec and resolve it.
    pub fn from_doc(doc: &Doc) -> Result<(LlmSpec, Resolved), SpecError> {
        let spec: LlmSpec = doc.typed()?;
        let resolved = spec.resolve().map_err(|e| e.in_file(&doc.file))?;
        Ok((spec, resolved))
    }

    fn resolve(&self) -> Result<Resolved, FieldError> {
        if self.warmup != 0.0 {
            return Err(FieldError::new(
                "warmup",
                format!(
                    "the LLM server measures from t = 0: must be 0, got {}",
                    self.warmup
                ),
            ));
        }
        let mut suite = self.workload.suite().map_err(|e| e.under("workload"))?;
        if let Some(d) = self.duration {
            suite.duration = d;
        }
        suite.check().map_err(|e| {
            // The duration is a top-level field; the rest are the workload's.
            if e.field == "duration" {
                e
            } else {
                e.under("workload")
            }
        })?;
        let server = self.server.resolve().map_err(|e| e.under("server"))?;
        let (input, output) = (suite.max_input(), suite.max_output());
        if !server.admits(input, output) {
            let field = if input > server.max_prefill_tokens {
                "server.max_prefill_tokens"
            } else {
                "server.kv_tokens"
            };
            return Err(FieldError::new(
                field,
                format!(
                    "the longest request ({input} + {output} tokens) never fits: M = {} \
                     must exceed its prompt and output, one prefill round ({} tokens) must \
                     hold its prompt",
                    server.kv_tokens, server.max_prefill_tokens
                ),
            ));
        }
        if self.schedulers.is_empty() {
            return Err(FieldError::new("schedulers", "name at least one scheduler"));
        }
        let mut policies = Vec::new();
        for (i, name) in self.schedulers.iter().enumerate() {
            policies.push(
                Policy::by_name(name)
                    .map_err(|e| FieldError::new(format!("schedulers[{i}]"), e.message))?,
            );
        }
        let options = LlmOptions {
            cost: self.cost.resolve().map_err(|e| e.under("cost"))?,
            sample_every: self.metrics.sample_every,
            max_points: self.metrics.max_points,
            ..LlmOptions::default()
        };
        self.metrics.check().map_err(|e| e.under("metrics"))?;
        Ok(Resolved {
            name: self.name.clone(),
            description: self.description.clone(),
            duration: suite.duration,
            warmup: self.warmup,
            suite,
            seed: self.seed,
            server,
            policies,
            options,
        })
    }
}

impl ServerSection {
    fn resolve(&self) -> Result<Server, FieldError> {
        crate::error::server_model("an LLM-server", "llm", &self.model)?;
        let mut server = Server::a10g_llama2_7b()
            .kv_tokens(self.kv_tokens)
            .max_batch(self.max_batch);
        if let Some(p) = self.max_prefill_tokens {
            server.max_prefill_tokens = p;
        }
        server.batching = self.batching;
        server.speed = self.speed;
        server.check()?;
        Ok(server)
    }
}

impl CostSection {
    fn resolve(&self) -> Result<TokenCost, FieldError> {
        TokenCost::new(self.input_token_weight, self.output_token_weight).map_err(|e| match e {
            fairlane_core::Error::InvalidConfig { field, reason } => FieldError::new(field, reason),
            other => FieldError::new("", other.to_string()),
        })
    }
}

impl WorkloadSection {
    /// The named suite with this section's fields in place of its own.
    fn suite(&self) -> Result<Suite, FieldError> {
        let mut s = Suite::by_name(&self.suite)?;
        if let Some(m) = &self.mode {
            s.mode = Mode::by_name(m)?;
        }
        if let Some(r) = &self.rates {
            s.rates = r.clone();
        }
        if let Some(w) = &self.weights {
            s.weights = w.clone();
        } else if s.weights.len() != s.rates.len() && s.mode != Mode::DistShift {
            // New rates for another number of clients, weights left alone: weight 1 each.
            s.weights = vec![1.0; s.rates.len()];
        }
        if let Some(cv) = self.cv {
            s.cv = cv;
        }
        if let Some(i) = self.input {
            s.input = i;
        }
        if let Some(o) = self.output {
            s.output = o;
        }
        if let Some(p) = self.on_off {
            s.on_off = Some(p);
        }
        Ok(s)
    }
}

impl MetricsSection {
    fn check(&self) -> Result<(), FieldError> {
        crate::error::positive("sample_every", self.sample_every)?;
        if !(2..=100_000).contains(&self.max_points) {
            return Err(FieldError::new(
                "max_points",
                format!("must be in 2..=100000, got {}", self.max_points),
            ));
        }
        Ok(())
    }
}
