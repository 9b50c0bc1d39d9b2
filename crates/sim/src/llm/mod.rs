//! A continuous-batching LLM server (the fourth kind of server of the simulator), the
//! workloads of the VTC paper (Sheng et al., *Fairness in Serving Large Language Models*,
//! OSDI '24, §5.2) and the measurements its claims are about. docs/llm.md has the whole
//! story; in short:
//!
//! * **Requests** have a prompt (`input`) and an output length. The output length is the
//!   request's `max_new_tokens`, generated to the end (the artifact's client sets
//!   `ignore_eos`); the server reserves KV memory for it, the scheduler never learns it
//!   (what it is told is [`Disclosure`]).
//! * **The running batch** holds at most [`Server::max_batch`] requests within a KV budget
//!   of M = [`Server::kv_tokens`] tokens. A request is admitted, in the scheduler's order,
//!   when it fits by the artifact's rule: with every request growing to its full length and
//!   those with the most tokens left finishing last, the peak stays below M
//!   (`req_queue.py`, `_can_add_new_req`); and a round prefills at most
//!   [`Server::max_prefill_tokens`]. The first choice that does not fit ends the round.
//! * **Iterations** ([`Batching`]): by default the artifact's (LightLLM's) alternation of
//!   prefill iterations (new requests' prompts; each gets its first token) and decode
//!   iterations (one token per running request), admission tried every 10 decode
//!   iterations; or mixed iterations that do both. An iteration lasts `fixed + per prefill
//!   token + per decode token` ([`Speed`]; [`Speed::A10G_LLAMA2_7B`] fits the artifact's
//!   own A10G profile).
//! * **Through the seam** ([`fairlane_core::vtc`]'s unit convention): a request's cost,
//!   when told, is `w_p·input`; each generated token is reported by `progress` with the
//!   request's cumulative cost `w_p·input + w_q·output so far`, the last by `complete`.
//!   Any core scheduler runs (`vtc`, `fifo`, `wfqe`, `2dfqe`, …), alone or behind the
//!   paper's RPM limiter ([`Policy`]).
//! * **One difference from the artifact.** The seam has no peek: `dequeue` commits. The
//!   server asks only when some client's oldest waiting request fits (when none does,
//!   nothing the scheduler could choose would, and the artifact stops there too), so with
//!   requests of one size per suite the rounds are the artifact's. When sizes differ the
//!   scheduler may choose one that does not fit; the artifact would choose again at the
//!   next round, this server holds it and admits it first (its prompt charged at
//!   dispatch). [`LlmResult::holds`] counts these.
//!
//! ```
//! use fairlane_sim::llm::{simulate, LlmOptions, Policy, Server, Suite};
//! let trace = Suite::overload().duration(60.0).trace(42).unwrap();
//! let server = Server::a10g_llama2_7b();
//! let vtc = simulate(&trace, &server, &Policy::by_name("vtc").unwrap(), &LlmOptions::default()).unwrap();
//! let fifo = simulate(&trace, &server, &Policy::by_name("fifo").unwrap(), &LlmOptions::default()).unwrap();
//! // Both clients are backlogged throughout: VTC serves them alike, FCFS by arrival rate.
//! let ratio = |r: &fairlane_sim::llm::LlmResult| r.clients[1].window_service / r.clients[0].window_service;
//! assert!((ratio(&vtc) - 1.0).abs() < 0.1);
//! assert!(ratio(&fifo) > 1.5);
//! ```

mod meter;
mod model;
mod policy;
pub mod report;
mod run;
mod server;
pub mod spec;
#[cfg(test)]
mod tests;
mod workload;

pub use meter::{LatencySummary, LlmClient, MAX_PAIR_CLIENTS};
pub use policy::{Disclosure, Policy};
pub use run::{run_points, LlmRuns, LlmSpecFile};
pub use server::{Batching, Server, Speed};
pub use workload::{LlmRequest, Mode, Suite, MAX_CLIENTS, MAX_REQUESTS, SUITES};

use fairlane_core::TokenCost;
use serde::Serialize;

use crate::events::{drive, DEFAULT_MAX_EVENTS};
use crate::SimError;
use model::LlmSim;

/// A workload's requests with its clients' weights and the length of its arrival window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trace {
    /// The requests, in arrival order.
    pub requests: Vec<LlmRequest>,
    /// Client `i`'s weight φ.
    pub weights: Vec<f64>,
    /// Seconds of arrivals: throughput and shares are also reported over `[0, window)`.
    pub window: f64,
}

impl Suite {
    /// The suite's requests for `seed` (the artifact's is 42), with its weights.
    pub fn trace(&self, seed: u64) -> Result<Trace, SimError> {
        Ok(Trace {
            requests: self.requests(seed)?,
            weights: self.weights.clone(),
            window: self.duration,
        })
    }
}

/// How to run and measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlmOptions {
    /// The service function: the paper's `w_p = 1`, `w_q = 2` by default.
    pub cost: TokenCost,
    /// Seconds between samples of the series.
    pub sample_every: f64,
    /// Most points per series.
    pub max_points: usize,
    /// The event cap.
    pub max_events: u64,
}

impl Default for LlmOptions {
    fn default() -> Self {
        LlmOptions {
            cost: TokenCost::PAPER,
            sample_every: 1.0,
            max_points: 2000,
            max_events: DEFAULT_MAX_EVENTS,
        }
    }
}

/// What one policy did on one trace.
#[derive(Clone, Debug, Serialize)]
pub struct LlmResult {
    /// The policy's label.
    pub policy: String,
    /// The scheduler's name.
    pub scheduler: String,
    /// Wall-clock seconds of the run (the only field that is not deterministic).
    pub wall_seconds: f64,
    /// Events handled, each decoded token counted as one (the work the event cap bounds).
    pub events: u64,
    /// When the last request completed, seconds.
    pub makespan: f64,
    /// The arrival window, seconds.
    pub window: f64,
    /// Iterations, and of those prefill iterations.
    pub iterations: u64,
    /// Iterations that prefilled.
    pub prefill_iterations: u64,
    /// Prompt tokens prefilled.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Prompt and generated tokens served in the arrival window.
    pub window_tokens: u64,
    /// Service (weighted tokens) over all clients.
    pub service: f64,
    /// Scheduler choices that did not fit and were held for a later round (see the module
    /// documentation; 0 when the suite's requests are of one size).
    pub holds: u64,
    /// Most requests in one iteration.
    pub max_batch_seen: usize,
    /// Most KV tokens held during an iteration (< M).
    pub max_kv_used: u64,
    /// Theorem 4.4's bound for this trace and server: `2·max(w_p·L_input, w_q·M)`.
    pub bound: f64,
    /// The largest `|ΔW_f/φ_f − ΔW_g/φ_g|` over intervals in which clients f and g were
    /// both backlogged (`None` above [`MAX_PAIR_CLIENTS`] clients).
    pub max_backlogged_difference: Option<f64>,
    /// `(t, max_{i,j} |W_i(0,t) − W_j(0,t)|)` at each sample (the paper's Fig. 3a).
    pub accumulated_difference: Vec<(f64, f64)>,
    /// Per client.
    pub clients: Vec<LlmClient>,
}

/// One policy's run at one point of a spec.
#[derive(Clone, Debug)]
pub struct LlmRun {
    /// The point's label (empty without a sweep).
    pub label: String,
    /// What the run measured.
    pub result: LlmResult,
}

impl LlmResult {
    /// Tokens (prompt and generated) per second over the arrival window.
    pub fn window_throughput(&self) -> f64 {
        self.window_tokens as f64 / self.window
    }
}

fn check(trace: &Trace, server: &Server, opts: &LlmOptions) -> Result<(), SimError> {
    server
        .check()
        .map_err(|e| SimError::spec(format!("server.{}: {}", e.field, e.message)))?;
    TokenCost::new(opts.cost.input_weight, opts.cost.output_weight).map_err(SimError::scheduler)?;
    if !(opts.sample_every.is_finite() && opts.sample_every > 0.0) {
        return Err(SimError::spec(format!(
            "metrics.sample_every: must be finite and > 0, got {}",
            opts.sample_every
        )));
    }
    if !(trace.window.is_finite() && trace.window > 0.0) {
        return Err(SimError::spec(format!(
            "workload.duration: {}",
            trace.window
        )));
    }
    let clients = trace.weights.len();
    let mut last = 0.0;
    for (i, r) in trace.requests.iter().enumerate() {
        let why = if (r.client as usize) >= clients {
            format!("client {} of {clients}", r.client)
        } else if !(r.time.is_finite() && r.time >= last) {
            format!("arrival {} before {last} or not finite", r.time)
        } else if !server.admits(r.input, r.output) {
            format!(
                "{} + {} tokens never fit M = {} (or the prompt a {}-token prefill)",
                r.input, r.output, server.kv_tokens, server.max_prefill_tokens
            )
        } else {
            last = r.time;
            continue;
        };
        return Err(SimError::spec(format!("workload request {i}: {why}")));
    }
    Ok(())
}

/// Run `policy` on `trace` on `server` until every request has completed.
pub fn simulate(
    trace: &Trace,
    server: &Server,
    policy: &Policy,
    opts: &LlmOptions,
) -> Result<LlmResult, SimError> {
    check(trace, server, opts)?;
    let wall = std::time::Instant::now();
    let mut sched = policy
        .config
        .workers(server.max_batch)
        .build::<u64>()
        .map_err(SimError::scheduler)?;
    for (i, &w) in trace.weights.iter().enumerate() {
        sched
            .set_weight(fairlane_core::TenantId(i as u64), w, 0.0)
            .map_err(SimError::scheduler)?;
    }
    let scheduler = sched.name().to_string();
    let n = trace.weights.len();
    let mut m = LlmSim::new(trace, *server, policy, sched, opts);
    drive(&mut m, f64::INFINITY, opts.max_events, &mut |_| {})?;
    let max_input = trace.requests.iter().map(|r| r.input).max().unwrap_or(0);
    let names: Vec<String> = (0..n).map(|i| format!("client{i}")).collect();
    let (window_tokens, _) = m.meter.window();
    Ok(LlmResult {
        policy: policy.name.clone(),
        scheduler,
        wall_seconds: wall.elapsed().as_secs_f64(),
        events: m.q.events(),
        makespan: m.last_completion,
        window: trace.window,
        iterations: m.iterations,
        prefill_iterations: m.prefill_iterations,
        prompt_tokens: m.meter.prompt_tokens,
        generated_tokens: m.meter.generated_tokens,
        window_tokens,
        service: m.meter.service.iter().sum(),
        holds: m.holds,
        max_batch_seen: m.max_batch_seen,
        max_kv_used: m.max_kv_used,
        bound: opts.cost.bound(max_input, server.kv_tokens),
        max_backlogged_difference: m.meter.worst(),
        accumulated_difference: m.meter.acc_diff(),
        clients: m.meter.clients(&names),
    })
}
