//! Token costs from OpenAI-compatible responses (`[upstream] cost = "openai-usage"`): the
//! proxy in front of an LLM server charges each tenant the paper's service
//! `h = w_p·n_p + w_q·n_q` (Sheng et al., OSDI '24, §3.1; [`TokenCost`]) instead of its
//! upstream time, so that `scheduler.algorithm = "vtc"` is the Virtual Token Counter.
//!
//! * **At admission** the input tokens are estimated from the request body's size,
//!   ⌈bytes / [`BYTES_PER_TOKEN`]⌉ (a body streamed without a declared length: 0), and VTC
//!   charges `w_p ·` that when it dispatches the request.
//! * **While the response streams** (`text/event-stream`) each `data:` line is one generated
//!   token, reported through the scheduler's `progress` as the stream runs: the cumulative
//!   usage `w_q·tokens so far`, plus `w_p·prompt_tokens` once a usage chunk has told it. A
//!   data line carrying `usage` reports its `completion_tokens` instead; `data: [DONE]`
//!   and a chunk naming a `finish_reason` count nothing. The seam's usage never decreases, so the prompt *estimate* is not
//!   reported as usage (it could exceed the true count): it is the credit VTC charged at
//!   dispatch, which the first tokens use up before they are charged again. A request is
//!   thus charged `max(w_p·estimate, usage so far)` while it streams, and exactly its usage
//!   when it ends.
//! * **When the response ends** the charge is `w_p·usage.prompt_tokens +
//!   w_q·usage.completion_tokens`, read from the JSON body or the stream's final usage chunk
//!   (OpenAI's `stream_options.include_usage`): the admission estimate is corrected
//!   (retroactive charging).
//!
//! Bad usage never fails a request; each case falls back to the rule above and is counted by
//! reason ([`BadUsage`]): no `usage` (a JSON body's output then counts ⌈bytes / 4⌉; a
//! stream's its data lines), a count that is not a non-negative integer, a negative or an
//! absurd one (above [`MAX_TOKENS`]) — the field falls back — and a stream that ends without
//! a usage chunk. A client that goes away mid-stream is charged what it was sent, and that is
//! not counted as bad. The reader keeps at most [`SCAN_BYTES`] of a stream's line or of a
//! JSON body's tail: memory per response is bounded, however long the response.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use fairlane_core::{Algorithm, TenantId, TokenCost};
use serde::Serialize;
use serde_json::Value;

use crate::config::ProxyConfig;
use crate::cost::CostSource;

pub use crate::config::tokens::OPENAI_USAGE;
/// Request body bytes per input token estimated at admission.
pub const BYTES_PER_TOKEN: u64 = 4;
/// The largest token count believed (2²⁴ ≈ 16.8 M, beyond any context window); a larger
/// one is absurd and falls back to the estimate.
pub const MAX_TOKENS: u64 = 1 << 24;
/// The bytes of one stream line, or of a JSON body's tail, that are kept for reading.
pub const SCAN_BYTES: usize = 64 * 1024;
/// The `[cost]` clamp in tokens never cuts a charge below this many input and output tokens
/// each (a 128 Ki-token context window), at the largest configured weights.
pub const FLOOR_TOKENS: u64 = 1 << 17;

/// Why a response's usage was not taken as reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadUsage {
    /// No `usage` (or a count missing from it) in a complete JSON body.
    Missing,
    /// A count (or `usage` itself) that is not a non-negative integer.
    NotANumber,
    /// A negative count.
    Negative,
    /// A count above [`MAX_TOKENS`].
    Absurd,
    /// A stream that ended without a usage chunk.
    NoFinalChunk,
}

impl BadUsage {
    /// Every reason, in the order of the metric's labels.
    pub const ALL: [BadUsage; 5] = [
        BadUsage::Missing,
        BadUsage::NotANumber,
        BadUsage::Negative,
        BadUsage::Absurd,
        BadUsage::NoFinalChunk,
    ];

    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            BadUsage::Missing => "missing",
            BadUsage::NotANumber => "not_a_number",
            BadUsage::Negative => "negative",
            BadUsage::Absurd => "absurd",
            BadUsage::NoFinalChunk => "no_final_chunk",
        }
    }
}

/// The token settings a reload swaps: each tenant's weights, and whether the scheduler is
/// told the input estimate at admission (the VTC family charges it at dispatch; the others
/// estimate, as in the simulator's `Disclosure`).
#[derive(Debug)]
pub(crate) struct TokenCosts {
    default: TokenCost,
    /// By tenant id; a tenant without weights of its own has `[cost]`'s.
    tenants: Vec<TokenCost>,
    tell_scheduler: bool,
}

/// What is charged at admission for one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Admission {
    /// Estimated input tokens (⌈body bytes / 4⌉).
    pub input: u64,
    /// The tenant's weights.
    pub h: TokenCost,
    /// Tell the scheduler `w_p · input` at enqueue.
    pub tell_scheduler: bool,
}

impl Admission {
    /// `w_p · input`: the cost known at admission.
    pub fn cost(&self) -> f64 {
        self.h.charge(self.input, 0)
    }
}

impl TokenCosts {
    /// The settings of `config`, `None` unless `upstream.cost = "openai-usage"`. Tenant ids
    /// are the registry's (`intern` returns the id the identifier already gave a name).
    pub fn of(config: &ProxyConfig, registry: &mut crate::tenant::Registry) -> Option<Self> {
        config.upstream.cost.as_ref()?;
        let c = &config.cost;
        let default = TokenCost {
            input_weight: c.input_token_weight,
            output_weight: c.output_token_weight,
        };
        let mut tenants = Vec::new();
        for t in &config.tenants {
            let i = registry.intern(&t.name).0 as usize;
            if tenants.len() <= i {
                tenants.resize(i + 1, default);
            }
            tenants[i] = TokenCost {
                input_weight: t.input_token_weight.unwrap_or(default.input_weight),
                output_weight: t.output_token_weight.unwrap_or(default.output_weight),
            };
        }
        let tell_scheduler = fairlane_core::Config::preset(&config.scheduler.algorithm)
            .is_ok_and(|s| s.algorithm == Algorithm::Vtc);
        Some(TokenCosts {
            default,
            tenants,
            tell_scheduler,
        })
    }

    /// What `tenant`'s request with a body of `body_bytes` (`None`: streamed, length
    /// unknown) is charged at admission.
    pub fn admission(&self, tenant: TenantId, body_bytes: Option<u64>) -> Admission {
        let h = self.tenants.get(tenant.0 as usize).copied();
        Admission {
            input: body_bytes.map_or(0, estimate),
            h: h.unwrap_or(self.default),
            tell_scheduler: self.tell_scheduler,
        }
    }
}

/// Under token costs, what `tenant`'s request with this body is charged at admission: the
/// input estimated from the body's size (a body streamed without a declared length: 0).
pub(crate) fn admission(
    costs: Option<&TokenCosts>,
    tenant: TenantId,
    body: &crate::stream::ReqBody<'_>,
) -> Option<Admission> {
    let bytes = match body {
        crate::stream::ReqBody::Full(b) => Some(b.len() as u64),
        _ => None,
    };
    Some(costs?.admission(tenant, bytes))
}

/// The cost the scheduler is told at enqueue, if any (see [`Admission::tell_scheduler`]).
pub(crate) trait Told {
    /// `w_p · input` for the VTC family under token costs, else `None`.
    fn told(&self) -> Option<f64>;
}

impl Told for Option<Admission> {
    fn told(&self) -> Option<f64> {
        self.filter(|a| a.tell_scheduler).map(|a| a.cost())
    }
}

/// ⌈bytes / [`BYTES_PER_TOKEN`]⌉, at most [`MAX_TOKENS`].
pub fn estimate(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN).min(MAX_TOKENS)
}

/// Tokens charged to one tenant.
#[derive(Debug, Default)]
pub struct TenantTokens {
    input: AtomicU64,
    output: AtomicU64,
}

/// The token counters on `/metrics` and `/status`: per tenant, and bad usage by reason.
#[derive(Debug, Default)]
pub struct TokenMetrics {
    /// A token cost has been charged: the counters are shown from then on.
    used: AtomicBool,
    tenants: RwLock<Vec<Arc<TenantTokens>>>,
    bad: [AtomicU64; 5],
}

impl TokenMetrics {
    fn tenant(&self, id: TenantId) -> Arc<TenantTokens> {
        let i = id.0 as usize;
        let r = self.tenants.read().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = r.get(i) {
            return t.clone();
        }
        drop(r);
        let mut w = self.tenants.write().unwrap_or_else(|e| e.into_inner());
        while w.len() <= i {
            w.push(Arc::default());
        }
        w[i].clone()
    }

    fn bad(&self, why: BadUsage) {
        let i = BadUsage::ALL.iter().position(|&b| b == why).unwrap_or(0);
        self.bad[i].fetch_add(1, Relaxed);
    }

    /// The counters for `/status` (`None` before the first token charge).
    pub fn status(&self, names: &[String]) -> Option<TokenStatus> {
        if !self.used.load(Relaxed) {
            return None;
        }
        let all = self.tenants.read().unwrap_or_else(|e| e.into_inner());
        let tenants = (0..names.len().max(all.len()))
            .map(|i| {
                let t = all.get(i).cloned().unwrap_or_default();
                TenantTokenStatus {
                    name: names
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("tenant{i}")),
                    input_tokens: t.input.load(Relaxed),
                    output_tokens: t.output.load(Relaxed),
                }
            })
            .collect();
        let bad = BadUsage::ALL
            .iter()
            .zip(&self.bad)
            .map(|(b, n)| (b.name(), n.load(Relaxed)))
            .collect();
        Some(TokenStatus { tenants, bad })
    }
}

/// Tokens in `/status` (`tokens`): totals, from which the dashboard draws rates.
#[derive(Clone, Debug, Serialize)]
pub struct TokenStatus {
    /// Per tenant.
    pub tenants: Vec<TenantTokenStatus>,
    /// Responses whose usage was not taken as reported, by reason.
    pub bad: std::collections::BTreeMap<&'static str, u64>,
}

/// One tenant's tokens.
#[derive(Clone, Debug, Serialize)]
pub struct TenantTokenStatus {
    /// Tenant name.
    pub name: String,
    /// Input (prompt) tokens charged.
    pub input_tokens: u64,
    /// Output (generated) tokens charged.
    pub output_tokens: u64,
}

impl TokenStatus {
    /// Prometheus text: `fairlane_proxy_input_tokens_total`,
    /// `fairlane_proxy_output_tokens_total` (per tenant) and
    /// `fairlane_proxy_bad_usage_total` (per reason).
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        type Field = fn(&TenantTokenStatus) -> u64;
        let per: [(&str, &str, Field); 2] = [
            ("input", "Input (prompt) tokens charged", |t| t.input_tokens),
            ("output", "Output (generated) tokens charged", |t| {
                t.output_tokens
            }),
        ];
        for (kind, help, f) in per {
            let name = format!("fairlane_proxy_{kind}_tokens_total");
            let _ = writeln!(o, "# HELP {name} {help}.\n# TYPE {name} counter");
            for t in &self.tenants {
                let tenant = crate::prom::label(&t.name);
                let _ = writeln!(o, "{name}{{tenant=\"{tenant}\"}} {}", f(t));
            }
        }
        let name = "fairlane_proxy_bad_usage_total";
        let _ = writeln!(
            o,
            "# HELP {name} Responses whose token usage fell back to the estimate, by reason.\n\
             # TYPE {name} counter"
        );
        for (reason, n) in &self.bad {
            let _ = writeln!(o, "{name}{{reason=\"{reason}\"}} {n}");
        }
        o
    }
}

/// How the response body is read.
#[derive(Debug)]
enum Reader {
    /// A JSON body: at most [`SCAN_BYTES`], its tail once longer.
    Json { kept: Vec<u8>, whole: bool },
    /// An event stream: the line being read (at most [`SCAN_BYTES`]), and whether it was
    /// longer.
    Sse { line: Vec<u8>, long: bool },
}

/// A count read from `usage`.
type Count = Result<u64, BadUsage>;

/// The cost source of one response under `openai-usage`.
pub(crate) struct UsageCost {
    admission: Admission,
    reader: Reader,
    bytes: u64,
    /// Data lines counted as tokens.
    lines: u64,
    /// The last usage seen: prompt and completion tokens.
    usage: Option<(Count, Count)>,
    ended: bool,
    /// The cumulative cost last reported as progress.
    reported: f64,
    tenant: Arc<TenantTokens>,
    metrics: Arc<TokenMetrics>,
}

impl UsageCost {
    /// The cost source of a response of `tenant`; `stream`: the response is an event stream.
    pub fn new(
        admission: Admission,
        stream: bool,
        tenant: TenantId,
        m: &Arc<TokenMetrics>,
    ) -> Self {
        m.used.store(true, Relaxed);
        let reader = match stream {
            true => Reader::Sse {
                line: Vec::new(),
                long: false,
            },
            false => Reader::Json {
                kept: Vec::new(),
                whole: true,
            },
        };
        UsageCost {
            reported: 0.0,
            admission,
            reader,
            bytes: 0,
            lines: 0,
            usage: None,
            ended: false,
            tenant: m.tenant(tenant),
            metrics: m.clone(),
        }
    }

    /// One complete line of an event stream.
    fn line(&mut self, line: &[u8], long: bool) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" || finishes(data) {
            return;
        }
        if !long && contains(data, b"\"usage\"") {
            if let Some(u) = serde_json::from_slice::<Value>(data)
                .ok()
                .and_then(|v| usage(v.get("usage")))
            {
                self.usage = Some(u);
                return;
            }
        }
        self.lines += 1;
    }

    /// The input and output tokens to charge now, and why the usage was not taken if it
    /// was not.
    fn tokens(&self) -> (u64, u64, Option<BadUsage>) {
        let fallback_out = match &self.reader {
            Reader::Sse { .. } => self.lines,
            Reader::Json { .. } => estimate(self.bytes),
        };
        let (p, q) = match self.usage {
            Some(u) => u,
            None => {
                let why = match (&self.reader, self.ended) {
                    (_, false) => None, // cut short by the client: what it was sent
                    (Reader::Sse { .. }, true) => Some(BadUsage::NoFinalChunk),
                    (Reader::Json { .. }, true) => Some(BadUsage::Missing),
                };
                return (self.admission.input, fallback_out, why);
            }
        };
        let why = p.err().or(q.err());
        (
            p.unwrap_or(self.admission.input),
            q.unwrap_or(fallback_out),
            why,
        )
    }

    /// Read the usage of a JSON body that ended.
    fn read_json(&mut self) {
        let Reader::Json { kept, whole } = &self.reader else {
            return;
        };
        let found = match whole {
            true => serde_json::from_slice::<Value>(kept)
                .ok()
                .map(|v| usage(v.get("usage"))),
            false => tail_usage(kept).map(|v| usage(Some(&v))),
        };
        self.usage = match found {
            Some(Some(u)) => Some(u),
            Some(None) | None => None,
        };
    }
}

impl CostSource for UsageCost {
    fn data(&mut self, chunk: &[u8]) {
        self.bytes = self.bytes.saturating_add(chunk.len() as u64);
        match &mut self.reader {
            Reader::Json { kept, whole } => {
                kept.extend_from_slice(chunk);
                if kept.len() > SCAN_BYTES {
                    let cut = kept.len() - SCAN_BYTES;
                    kept.drain(..cut);
                    *whole = false;
                }
            }
            Reader::Sse { .. } => {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let Reader::Sse { line, long } = &mut self.reader else {
                        return;
                    };
                    let end = rest.iter().position(|&b| b == b'\n');
                    let piece = &rest[..end.unwrap_or(rest.len())];
                    let room = SCAN_BYTES - line.len();
                    *long |= piece.len() > room;
                    line.extend_from_slice(&piece[..piece.len().min(room)]);
                    let Some(end) = end else { break };
                    rest = &rest[end + 1..];
                    let (done, was_long) = (std::mem::take(line), std::mem::take(long));
                    self.line(&done, was_long);
                }
            }
        }
    }

    fn used(&mut self) -> Option<f64> {
        if !matches!(self.reader, Reader::Sse { .. }) {
            return None;
        }
        let p = match self.usage {
            Some((Ok(p), _)) => p,
            _ => 0,
        };
        let (_, q, _) = self.tokens();
        let used = self
            .admission
            .h
            .charge(p, q.max(self.lines).min(MAX_TOKENS));
        (used > self.reported).then(|| {
            self.reported = used;
            used
        })
    }

    fn ended(&mut self) {
        self.ended = true;
        if let Reader::Sse { line, long } = &mut self.reader {
            if !line.is_empty() {
                let (done, was_long) = (std::mem::take(line), std::mem::take(long));
                self.line(&done, was_long);
            }
        }
        self.read_json();
    }

    fn cost(&mut self) -> f64 {
        let (p, q, why) = self.tokens();
        if let Some(why) = why {
            self.metrics.bad(why);
        }
        self.tenant.input.fetch_add(p, Relaxed);
        self.tenant.output.fetch_add(q, Relaxed);
        // Never below what was reported as progress (a usage of fewer tokens than data lines).
        self.admission.h.charge(p, q).max(self.reported)
    }
}

/// Whether a chunk names a finish reason (`"finish_reason": "length"`): the last chunk of a
/// choice, which carries no new token on OpenAI's servers (vLLM's may carry one: it is then
/// left out of the running count, and the usage counts it).
fn finishes(data: &[u8]) -> bool {
    let key = b"\"finish_reason\"";
    let Some(at) = data.windows(key.len()).position(|w| w == key) else {
        return false;
    };
    let mut rest = data[at + key.len()..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace());
    rest.next() == Some(&b':') && rest.find(|b| !b.is_ascii_whitespace()) == Some(&b'"')
}

/// Whether `hay` contains `needle`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The value after the last `"usage":` key in `tail` (the end of a JSON body too long to
/// keep whole), if it parses.
fn tail_usage(tail: &[u8]) -> Option<Value> {
    let key = b"\"usage\"";
    let at = (0..=tail.len().checked_sub(key.len())?)
        .rev()
        .find(|&i| &tail[i..i + key.len()] == key && (i == 0 || tail[i - 1] != b'\\'))?;
    let rest = &tail[at + key.len()..];
    let colon = rest.iter().position(|&b| !b.is_ascii_whitespace())?;
    let rest = rest[colon..].strip_prefix(b":")?;
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
    values.next()?.ok()
}

/// The counts of a `usage` value: `None` when there is none (absent or `null`).
fn usage(v: Option<&Value>) -> Option<(Count, Count)> {
    match v? {
        Value::Null => None,
        Value::Object(o) => Some((
            count(o.get("prompt_tokens")),
            count(o.get("completion_tokens")),
        )),
        _ => Some((Err(BadUsage::NotANumber), Err(BadUsage::NotANumber))),
    }
}

/// One count: a non-negative integer up to [`MAX_TOKENS`] (`12.0` is 12).
fn count(v: Option<&Value>) -> Count {
    let n = match v {
        None | Some(Value::Null) => return Err(BadUsage::Missing),
        Some(Value::Number(n)) => n,
        Some(_) => return Err(BadUsage::NotANumber),
    };
    if let Some(u) = n.as_u64() {
        return if u > MAX_TOKENS {
            Err(BadUsage::Absurd)
        } else {
            Ok(u)
        };
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f < 0.0 {
        Err(BadUsage::Negative)
    } else if f > MAX_TOKENS as f64 {
        Err(BadUsage::Absurd)
    } else if f.fract() == 0.0 {
        Ok(f as u64)
    } else {
        Err(BadUsage::NotANumber)
    }
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
