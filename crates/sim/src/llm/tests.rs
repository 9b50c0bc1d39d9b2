//! The LLM server against the VTC paper's claims and its own invariants.

use super::model::NO_FIT_CACHE;
use super::*;

fn run(trace: &Trace, server: &Server, policy: &str) -> LlmResult {
    let p = Policy::by_name(policy).unwrap();
    simulate(trace, server, &p, &LlmOptions::default()).unwrap()
}

/// `policy` and FCFS on the overload suite (seed 42) on the paper's server.
fn overload_against_fifo(policy: &str) -> (LlmResult, LlmResult) {
    let trace = Suite::overload().trace(42).unwrap();
    let server = Server::a10g_llama2_7b();
    (run(&trace, &server, policy), run(&trace, &server, "fifo"))
}

fn acc_at(r: &LlmResult, t: f64) -> f64 {
    r.accumulated_difference
        .iter()
        .find(|p| p.0 >= t)
        .map_or(f64::NAN, |p| p.1)
}

/// Figure 3 and Theorem 4.4: with both clients backlogged, VTC's service difference stays
/// within the bound while FCFS's grows with time; the throughput is the same.
#[test]
fn overload_vtc_stays_within_the_bound_and_fcfs_drifts() {
    let (vtc, fifo) = overload_against_fifo("vtc");
    assert_eq!(vtc.bound, 40_000.0);
    let d = vtc.max_backlogged_difference.unwrap();
    assert!(d > 0.0 && d <= vtc.bound, "vtc {d}");
    let f = fifo.max_backlogged_difference.unwrap();
    assert!(f > 4.0 * fifo.bound, "fifo {f}");
    // FCFS's accumulated difference grows about linearly (2 : 1 arrival rates).
    let (half, end) = (acc_at(&fifo, 180.0), acc_at(&fifo, 360.0));
    assert!(end > 1.7 * half && half > 30_000.0, "{half} {end}");
    assert!(acc_at(&vtc, 360.0) < 0.1 * end);
    // Work conservation: the same tokens served in the window, the same makespan.
    let ratio = vtc.window_tokens as f64 / fifo.window_tokens as f64;
    assert!((ratio - 1.0).abs() < 0.01, "{ratio}");
    assert!((vtc.makespan / fifo.makespan - 1.0).abs() < 0.01);
    assert_eq!(vtc.generated_tokens, 1620 * 256);
    assert_eq!(vtc.holds, 0);
    // Shares: equal under VTC, by arrival rate under FCFS.
    let share = |r: &LlmResult| r.clients[1].window_service / r.clients[0].window_service;
    assert!((share(&vtc) - 1.0).abs() < 0.05, "{}", share(&vtc));
    assert!((share(&fifo) - 2.0).abs() < 0.1, "{}", share(&fifo));
}

/// Weighted VTC (§4.3, Fig. 16): four backlogged clients of weights 1 : 2 : 3 : 4 get
/// service in that ratio.
#[test]
fn weighted_vtc_shares_by_weight() {
    let trace = Suite::overload_weighted().trace(42).unwrap();
    let r = run(&trace, &Server::a10g_llama2_7b(), "vtc");
    let base = r.clients[0].window_service;
    for (i, c) in r.clients.iter().enumerate() {
        let ratio = c.window_service / base;
        assert!(
            (ratio / (i + 1) as f64 - 1.0).abs() < 0.05,
            "client {i}: {ratio}"
        );
    }
    assert!(r.max_backlogged_difference.unwrap() <= r.bound);
}

/// The admission rule never lets the KV tokens in use pass M, nor the batch its limit,
/// and every request completes, under every preset and the RPM limiter.
#[test]
fn memory_and_batch_limits_hold_and_every_request_completes() {
    let server = Server::a10g_llama2_7b().kv_tokens(3000).max_batch(16);
    for suite in ["poisson_on_off_overload", "poisson_short_long_2"] {
        let trace = Suite::by_name(suite)
            .unwrap()
            .duration(60.0)
            .trace(1)
            .unwrap();
        let names = fairlane_core::PRESETS.iter().copied().chain(["rpm5"]);
        for p in names {
            let r = run(&trace, &server, p);
            assert!(
                r.max_kv_used < server.kv_tokens,
                "{suite} {p}: {}",
                r.max_kv_used
            );
            assert!(r.max_batch_seen <= 16, "{suite} {p}");
            let (arrived, rejected, completed) = r.clients.iter().fold((0, 0, 0), |a, c| {
                (a.0 + c.arrived, a.1 + c.rejected, a.2 + c.completed)
            });
            assert_eq!(arrived as usize, trace.requests.len(), "{suite} {p}");
            assert_eq!(completed + rejected, arrived, "{suite} {p}");
        }
    }
    // Uniform 512-token requests fill the default pool closely.
    let trace = Suite::overload().duration(60.0).trace(42).unwrap();
    let r = run(&trace, &Server::a10g_llama2_7b(), "vtc");
    assert!(
        r.max_kv_used > 9000 && r.max_kv_used < 10_000,
        "{}",
        r.max_kv_used
    );
}

/// RPM(n) accepts at most n requests per client in any minute and serves them FCFS.
#[test]
fn rpm_limits_each_client_per_minute() {
    let (r, fifo) = overload_against_fifo("rpm20");
    for c in &r.clients {
        let accepted = c.arrived - c.rejected;
        // Six minutes of arrivals: at most 20 in each, plus the sliding window's edge.
        assert!(accepted <= 20 * 7, "{}: {accepted}", c.name);
        assert!(accepted >= 20 * 5, "{}: {accepted}", c.name);
    }
    assert!(r.window_tokens * 2 < fifo.window_tokens);
}

#[test]
fn runs_are_deterministic_and_the_fit_cache_changes_nothing() {
    let server = Server::a10g_llama2_7b();
    for suite in [
        "overload",
        "poisson_on_off_overload",
        "poisson_short_long_2",
    ] {
        let trace = Suite::by_name(suite)
            .unwrap()
            .duration(120.0)
            .trace(3)
            .unwrap();
        for p in ["vtc", "fifo", "2dfqe"] {
            let key = |r: &LlmResult| {
                let s: Vec<u64> = r.clients.iter().map(|c| c.service as u64).collect();
                (
                    r.iterations,
                    r.makespan.to_bits(),
                    r.holds,
                    r.max_kv_used,
                    s,
                )
            };
            let a = key(&run(&trace, &server, p));
            assert_eq!(a, key(&run(&trace, &server, p)), "{suite} {p}");
            NO_FIT_CACHE.with(|c| c.set(true));
            let b = key(&run(&trace, &server, p));
            NO_FIT_CACHE.with(|c| c.set(false));
            assert_eq!(a, b, "{suite} {p}: the cache changed the run");
        }
    }
}

/// Theorem 4.4 on random workloads: small pools, two to four clients of random rates and
/// request sizes (one size per client, so the server admits exactly as the artifact does).
#[test]
fn random_workloads_keep_vtc_within_the_bound() {
    let mut rng = crate::rng::Rng::new(17, 0);
    let mut worst = 0.0f64;
    for case in 0..40 {
        let n = 2 + rng.below(3) as usize;
        let len = 8 + rng.below(120);
        let mut suite = Suite::overload().duration(60.0 + rng.below(120) as f64);
        suite.rates = (0..n).map(|_| 0.5 + rng.uniform() * 6.0).collect();
        suite.weights = vec![1.0; n];
        suite.input = (len, len + 1);
        suite.output = (1 + rng.below(2 * len), 2 * len + 1);
        suite.output = (suite.output.0.min(2 * len), suite.output.0.min(2 * len) + 1);
        let m = 4 * len + rng.below(1500);
        let server = Server::a10g_llama2_7b().kv_tokens(m);
        let trace = suite.trace(case).unwrap();
        let r = run(&trace, &server, "vtc");
        let d = r.max_backlogged_difference.unwrap();
        assert_eq!(r.holds, 0);
        assert!(
            d <= r.bound,
            "case {case}: {d} > {} ({suite:?}, M = {m})",
            r.bound
        );
        worst = worst.max(d / r.bound);
    }
    assert!(worst > 0.2, "the bound was never approached: {worst}");
}

#[test]
fn mixed_batching_is_fair_too() {
    let trace = Suite::overload().trace(42).unwrap();
    let mut server = Server::a10g_llama2_7b();
    server.batching = Batching::Mixed;
    let r = run(&trace, &server, "vtc");
    let share = r.clients[1].window_service / r.clients[0].window_service;
    assert!((share - 1.0).abs() < 0.05, "{share}");
    assert!(r.max_backlogged_difference.unwrap() <= r.bound);
    assert_eq!(r.prefill_iterations, r.iterations.min(r.prefill_iterations));
}

#[test]
fn first_token_and_response_times_are_measured() {
    let trace = Suite::proportional().trace(42).unwrap();
    let r = run(&trace, &Server::a10g_llama2_7b(), "vtc");
    for c in &r.clients {
        assert_eq!(c.response.count, c.completed);
        assert!(c.first_token.mean > 0.0 && c.first_token.mean < c.response.mean);
        assert!(!c.first_token_series.is_empty() && !c.service_series.is_empty());
    }
    // The clients under their share get their first token once memory frees (uniform
    // requests admitted together finish together: a few seconds); the overloaded one
    // waits behind its own backlog, and under FCFS everybody does.
    let fifo = run(&trace, &Server::a10g_llama2_7b(), "fifo");
    let p50 = |r: &LlmResult, c: usize| r.clients[c].first_token.p50;
    assert!(p50(&r, 0) < 10.0, "{:?}", r.clients[0].first_token);
    assert!(
        p50(&r, 2) > 5.0 * p50(&r, 0),
        "{} {}",
        p50(&r, 2),
        p50(&r, 0)
    );
    assert!(
        p50(&fifo, 0) > 5.0 * p50(&r, 0),
        "{} {}",
        p50(&fifo, 0),
        p50(&r, 0)
    );
}

#[test]
fn bad_input_is_refused_with_the_field_named() {
    let server = Server::a10g_llama2_7b();
    let p = Policy::by_name("vtc").unwrap();
    let o = LlmOptions::default();
    let req = |time, client, input, output| LlmRequest {
        time,
        client,
        input,
        output,
    };
    let trace = |reqs: Vec<LlmRequest>| Trace {
        requests: reqs,
        weights: vec![1.0, 1.0],
        window: 10.0,
    };
    let err = |t: &Trace| simulate(t, &server, &p, &o).unwrap_err().message;
    let e = err(&trace(vec![req(0.0, 0, 10, 10), req(1.0, 1, 9000, 2000)]));
    assert!(
        e.contains("workload request 1") && e.contains("never fit"),
        "{e}"
    );
    let e = err(&trace(vec![req(0.0, 5, 10, 10)]));
    assert!(e.contains("client 5 of 2"), "{e}");
    let e = err(&trace(vec![req(2.0, 0, 10, 10), req(1.0, 0, 10, 10)]));
    assert!(e.contains("request 1"), "{e}");
    let e = err(&trace(vec![req(f64::NAN, 0, 10, 10)]));
    assert!(e.contains("request 0"), "{e}");
    let e = err(&trace(vec![req(0.0, 0, 0, 10)]));
    assert!(e.contains("request 0"), "{e}");
    let bad = LlmOptions {
        sample_every: f64::NAN,
        ..o
    };
    let t = trace(vec![req(0.0, 0, 10, 10)]);
    assert!(simulate(&t, &server, &p, &bad)
        .unwrap_err()
        .message
        .contains("sample_every"));
    let mut t = trace(vec![req(0.0, 0, 10, 10)]);
    t.weights[1] = 0.0;
    assert!(simulate(&t, &server, &p, &o).is_err());
    // An empty trace is a run with nothing to do.
    let r = simulate(&trace(Vec::new()), &server, &p, &o).unwrap();
    assert_eq!((r.generated_tokens, r.iterations), (0, 0));
}
