//! Fair LLM serving through the proxy (`upstream.cost = "openai-usage"`), in front of the
//! test kit's fake OpenAI-compatible server (continuous batching: at most B sequences decode
//! at once, one token each per step): VTC keeps two tenants' token service within its bound,
//! FIFO does not; a client that leaves mid-stream is charged what it was sent and frees its
//! slot at once; bad usage is counted by reason; the official `openai` Python client works
//! through the proxy.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use fairlane_proxy_testkit::openai::{Model, OpenAiServer};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The fake model: a step every 2 ms, at most B = 4 sequences at once. The proxy's D is B.
const WORKERS: usize = 16;
const MODEL: Model = Model {
    step: Duration::from_millis(2),
    batch: 4,
};

async fn llm() -> OpenAiServer {
    OpenAiServer::start("127.0.0.1:0".parse().unwrap(), MODEL)
        .await
        .expect("the fake LLM server starts")
}

/// The proxy in front of an LLM server: token costs, D = the server's batch, and every
/// tenant may stream on all of D (every answer of an LLM server streams while it generates).
fn llm_proxy_config(upstream: SocketAddr, algorithm: &str) -> fairlane_proxy::ProxyConfig {
    let rest = format!(
        "cost = \"openai-usage\"\n[scheduler]\nalgorithm = \"{algorithm}\"\ndepth = {}\n\
         [limits]\nmax_streaming_share = 1.0\n{}",
        MODEL.batch,
        tenants(&[("long", "kl"), ("short", "ks")]),
    );
    config(upstream, &rest)
}

fn post_client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

fn chat_body(prompt_chars: usize, max_tokens: u64, stream: bool) -> String {
    serde_json::json!({
        "model": "fake",
        "messages": [{"role": "user", "content": "p".repeat(prompt_chars)}],
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
    .to_string()
}

fn chat_request(addr: SocketAddr, key: &str, body: String) -> http::Request<Full<Bytes>> {
    http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// Token service as the clients see it: (when, tenant, amount). The prompt (w_p = 1 per
/// token, ⌈chars / 4⌉ tokens, the fake's rule) counts at the first streamed token, each
/// output token (w_q = 1) when it arrives.
type Log = Arc<Mutex<Vec<(Instant, usize, f64)>>>;

/// One streamed request; its service logged as it arrives. Returns the output tokens seen.
async fn stream_one(
    c: &Client<HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
    (tenant, key): (usize, &str),
    (prompt_chars, max_tokens): (usize, u64),
    log: &Log,
) -> u64 {
    let req = chat_request(addr, key, chat_body(prompt_chars, max_tokens, true));
    let resp = c.request(req).await.expect("an answer");
    if resp.status() != 200 {
        let s = resp.status();
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        panic!("{s}: {}", String::from_utf8_lossy(&b));
    }
    let mut body = resp.into_body();
    let (mut seen, mut pending) = (0u64, Vec::new());
    while let Some(f) = body.frame().await {
        let Ok(data) = f.expect("a frame").into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        let now = Instant::now();
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line.starts_with(b"data: {") && line.windows(9).any(|w| w == b"\"content\"") {
                let mut l = log.lock().unwrap();
                if seen == 0 {
                    l.push((now, tenant, prompt_chars.div_ceil(4) as f64));
                }
                l.push((now, tenant, 1.0));
                seen += 1;
            }
        }
    }
    seen
}

/// The largest difference of two tenants' service over any interval of `log` after
/// `from`: the range of `S_0(t) − S_1(t)` (the paper's backlogged-service difference).
fn largest_difference(log: &[(Instant, usize, f64)], from: Instant) -> f64 {
    let mut events: Vec<_> = log.iter().filter(|e| e.0 >= from).collect();
    events.sort_by_key(|e| e.0);
    let (mut d, mut lo, mut hi) = (0.0f64, 0.0f64, 0.0f64);
    for &&(_, t, x) in &events {
        d += if t == 0 { x } else { -x };
        (lo, hi) = (lo.min(d), hi.max(d));
    }
    hi - lo
}

/// Long and short tenants, each with 8 streaming requests always outstanding (so both are
/// backlogged at the proxy throughout: D = 4), until `target` tokens of service have been
/// served; the largest service difference over any interval after a 300 ms warm-up.
async fn two_tenants(algorithm: &str, target: f64) -> f64 {
    let up = llm().await;
    let p = start_proxy(llm_proxy_config(up.addr(), algorithm)).await;
    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut workers = Vec::new();
    for (tenant, key, shape) in [(0, "kl", (1600, 100)), (1, "ks", (40, 10))] {
        for _ in 0..WORKERS {
            let (log, stop, addr) = (log.clone(), stop.clone(), p.addr);
            workers.push(tokio::spawn(async move {
                let c = post_client();
                while !stop.load(Relaxed) {
                    stream_one(&c, addr, (tenant, key), shape, &log).await;
                }
            }));
        }
    }
    let served = || log.lock().unwrap().iter().map(|e| e.2).sum::<f64>();
    eventually(Duration::from_secs(60), "the target service", || async {
        served() >= target
    })
    .await;
    let diff = largest_difference(&log.lock().unwrap(), start + Duration::from_millis(300));
    stop.store(true, Relaxed);
    for w in workers {
        w.abort();
    }
    let max_running = up.counters.max_running.load(Relaxed);
    assert!(
        max_running <= MODEL.batch as u64,
        "{max_running} sequences at once"
    );
    diff
}

/// VTC's Theorem 4.4 adapted to this upstream: 2·max(w_p·L_input, w_q·M) with w_p = w_q =
/// 1, L_input = 400 (the long tenant's prompt: 1,600 characters) and M = the KV tokens a
/// full batch holds, B·(L_input + L_output) = 4·(400 + 100) = 2,000 (the fake server runs at
/// most B = D sequences, each of at most 400 + 100 tokens): 4,000 tokens. Under FIFO the long
/// tenant holds the slots most of the time and the difference grows with the service: over
/// 20,000 tokens it is far beyond the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vtc_keeps_the_token_service_difference_within_its_bound_and_fifo_does_not() {
    let (l_input, l_output, b) = (400.0f64, 100.0f64, MODEL.batch as f64);
    let m = b * (l_input + l_output);
    let bound = 2.0 * (1.0 * l_input).max(1.0 * m);
    assert_eq!(bound, 4000.0);
    let target = 5.0 * bound;
    let vtc = two_tenants("vtc", target).await;
    let fifo = two_tenants("fifo", target).await;
    eprintln!(
        "largest service difference over {target} tokens: vtc {vtc}, fifo {fifo}, bound {bound}"
    );
    assert!(vtc <= bound, "vtc: {vtc} > {bound}");
    assert!(fifo > bound, "fifo: {fifo} ≤ {bound}");
}

/// A streaming client that reads 5 tokens of 2,000 and goes away: the slot is freed at once
/// (the proxy holds nothing for it and the fake server drops the sequence long before its
/// 2,000 tokens), and the tenant is charged the tokens it was sent, not 2,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_is_charged_what_it_was_sent_and_frees_its_slot() {
    let up = llm().await;
    let p = start_proxy(llm_proxy_config(up.addr(), "vtc")).await;
    let c = post_client();
    let req = chat_request(p.addr, "kl", chat_body(400, 2000, true));
    let resp = c.request(req).await.expect("an answer");
    let mut body = resp.into_body();
    let mut lines = 0;
    while lines < 5 {
        let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
        lines += data.windows(9).filter(|w| w == b"\"content\"").count();
    }
    drop(body);
    drop(c);
    eventually(STEP, "the slot is freed", || async {
        let s = status(p.admin).await;
        s["in_flight"] == 0 && tenant(&s, "long")["in_flight"] == 0
    })
    .await;
    eventually(STEP, "the fake server drops the sequence", || async {
        up.counters.abandoned.load(Relaxed) == 1 && up.counters.running.load(Relaxed) == 0
    })
    .await;
    let generated = up.counters.tokens.load(Relaxed);
    assert!(
        generated < 2000,
        "{generated} tokens generated for a client that left"
    );
    let s = status(p.admin).await;
    let t = &s["tokens"]["tenants"][0];
    assert_eq!(t["name"], "long");
    let out = t["output_tokens"].as_u64().unwrap();
    assert!(
        (lines as u64..=generated).contains(&out),
        "charged {out} output tokens; the client read {lines}, the server made {generated}"
    );
    // The input estimate stands (no usage came): ⌈body bytes / 4⌉.
    let estimate = (chat_body(400, 2000, true).len() as u64).div_ceil(4);
    assert_eq!(t["input_tokens"].as_u64().unwrap(), estimate);
    assert_eq!(
        s["tokens"]["bad"]["no_final_chunk"], 0,
        "a client leaving is not bad usage"
    );
}

/// JSON and streamed answers are charged their usage, shown per tenant on `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_charged_and_shown_per_tenant() {
    let up = llm().await;
    let p = start_proxy(llm_proxy_config(up.addr(), "vtc")).await;
    let c = post_client();
    let resp = c
        .request(chat_request(p.addr, "ks", chat_body(40, 7, false)))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: serde_json::Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 7);
    let log: Log = Arc::default();
    let seen = stream_one(&c, p.addr, (0, "ks"), (40, 9), &log).await;
    assert_eq!(seen, 9);
    eventually(STEP, "both charged", || async {
        status(p.admin).await["tokens"]["tenants"][1]["output_tokens"] == 16
    })
    .await;
    let (code, _, metrics) = get(p.admin, "/metrics", None).await;
    assert_eq!(code, 200);
    for line in [
        "fairlane_proxy_input_tokens_total{tenant=\"short\"} 20",
        "fairlane_proxy_output_tokens_total{tenant=\"short\"} 16",
        "fairlane_proxy_output_tokens_total{tenant=\"long\"} 0",
        "fairlane_proxy_bad_usage_total{reason=\"missing\"} 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

/// An upstream whose usage is missing, not a number, negative, absurd, or whose stream ends
/// without the usage chunk: every request is answered, each case counted by its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_is_counted_by_reason_and_never_fails_a_request() {
    let (addr, server) = serve_http1(|| {
        hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
            let (ct, body) = match req.uri().path() {
                "/missing" => ("application/json", r#"{"choices":[]}"#.to_string()),
                "/nan" => (
                    "application/json",
                    r#"{"usage":{"prompt_tokens":"many","completion_tokens":2}}"#.into(),
                ),
                "/negative" => (
                    "application/json",
                    r#"{"usage":{"prompt_tokens":3,"completion_tokens":-2}}"#.into(),
                ),
                "/absurd" => (
                    "application/json",
                    r#"{"usage":{"prompt_tokens":1e300,"completion_tokens":2}}"#.into(),
                ),
                _ => (
                    "text/event-stream",
                    "data: {\"choices\":[{}]}\n\n".repeat(3),
                ),
            };
            let mut r = http::Response::new(Full::new(Bytes::from(body)));
            r.headers_mut()
                .insert("content-type", http::HeaderValue::from_static(ct));
            Ok::<_, std::convert::Infallible>(r)
        })
    })
    .await;
    let p = start_proxy(llm_proxy_config(addr, "vtc")).await;
    for path in ["/missing", "/nan", "/negative", "/absurd", "/stream"] {
        assert_eq!(get(p.addr, path, Some("ks")).await.0, 200, "{path}");
    }
    eventually(STEP, "all five counted", || async {
        let bad = &status(p.admin).await["tokens"]["bad"];
        [
            "missing",
            "not_a_number",
            "negative",
            "absurd",
            "no_final_chunk",
        ]
        .iter()
        .all(|r| bad[*r] == 1)
    })
    .await;
    // The stream's 3 data lines are its output tokens.
    let s = status(p.admin).await;
    let out = s["tokens"]["tenants"][1]["output_tokens"].as_u64().unwrap();
    assert!(out >= 3, "{out}");
    server.abort();
}

/// The official `openai` Python client (PyPI; scripts/test-deps.sh installs it in the test
/// venv) through the proxy, streaming and not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_client_works_through_the_proxy() {
    let python = test_dep("venv/bin/python");
    let up = llm().await;
    let p = start_proxy(llm_proxy_config(up.addr(), "vtc")).await;
    let script = format!(
        r#"
import openai
c = openai.OpenAI(base_url="http://{addr}/v1", api_key="ks", max_retries=0)
r = c.chat.completions.create(model="fake", messages=[{{"role": "user", "content": "hello there"}}], max_tokens=5)
assert r.usage.completion_tokens == 5 and r.choices[0].message.content.count("tok") == 5, r
n = 0
for chunk in c.chat.completions.create(model="fake", messages=[{{"role": "user", "content": "hi"}}],
                                       max_tokens=6, stream=True, stream_options={{"include_usage": True}}):
    if chunk.choices and chunk.choices[0].delta.content:
        n += 1
    if chunk.usage:
        usage = chunk.usage
assert n == 6 and usage.completion_tokens == 6, (n, usage)
t = c.completions.create(model="fake", prompt="once upon", max_tokens=3)
assert t.usage.completion_tokens == 3 and t.choices[0].text.count("tok") == 3, t
print("ok")
"#,
        addr = p.addr
    );
    let mut cmd = std::process::Command::new(python);
    cmd.arg("-c").arg(script);
    let out = run_ok(cmd, "the openai client").await;
    assert_eq!(out.trim(), "ok", "the openai client: {out}");
    let s = status(p.admin).await;
    let out = s["tokens"]["tenants"][1]["output_tokens"].as_u64().unwrap();
    assert_eq!(out, 5 + 6 + 3, "{s}");
}

/// The dashboard, in headless Chromium (installed by scripts/test-deps.sh), shows each
/// tenant's input and output tokens per second while streams run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_token_rates_per_tenant() {
    let up = llm().await;
    let p = start_proxy(llm_proxy_config(up.addr(), "vtc")).await;
    let (log, stop): (Log, _) = (Arc::default(), Arc::new(AtomicBool::new(false)));
    let load = {
        let (log, stop, addr) = (log.clone(), stop.clone(), p.addr);
        tokio::spawn(async move {
            let c = post_client();
            while !stop.load(Relaxed) {
                stream_one(&c, addr, (1, "ks"), (40, 50), &log).await;
            }
        })
    };
    let url = format!("http://{}/dashboard", p.admin);
    let dom = chromium_dom(url).await;
    stop.store(true, Relaxed);
    load.abort();
    // The short tenant's row: name, input and output tokens per second, the two totals.
    let row = dom
        .split("<tr class=\"tenant-tokens\">")
        .find(|r| r.starts_with("<td>short</td>"))
        .unwrap_or_else(|| panic!("no token row for tenant short in\n{dom}"));
    let cells: Vec<&str> = row
        .split("<td>")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap())
        .collect();
    // Chromium runs the page's timers on virtual time, so the rate between its last two
    // samples may be 0: that it is a number (not "–") shows it was computed; the totals show
    // the tokens charged.
    for c in &cells[1..3] {
        let rate: f64 = c.parse().unwrap_or_else(|_| panic!("a rate in {cells:?}"));
        assert!(rate >= 0.0, "{cells:?}");
    }
    let output: u64 = cells[4].parse().unwrap();
    assert!(output >= 50, "{cells:?}");
    assert!(
        dom.contains("usage not taken as reported: absurd 0,"),
        "{dom}"
    );
}
