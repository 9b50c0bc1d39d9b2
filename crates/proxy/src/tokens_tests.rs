use super::*;
use proptest::prelude::*;

fn admission(input: u64) -> Admission {
    Admission {
        input,
        h: TokenCost {
            input_weight: 1.0,
            output_weight: 2.0,
        },
        tell_scheduler: true,
    }
}

/// A cost source for a response with an admission estimate of 100 input tokens, fed
/// `pieces`, ended or not; its (input, output, bad) tokens and the metrics.
fn read(stream: bool, pieces: &[&[u8]], ended: bool) -> (u64, u64, Option<BadUsage>, f64) {
    let m = Arc::new(TokenMetrics::default());
    let mut c = UsageCost::new(admission(100), stream, TenantId(0), &m);
    for p in pieces {
        c.data(p);
    }
    if ended {
        c.ended();
    }
    let (p, q, why) = c.tokens();
    let cost = c.cost();
    let bad: u64 = m.bad.iter().map(|b| b.load(Relaxed)).sum();
    assert_eq!(bad, u64::from(why.is_some()));
    let t = m.status(&["a".into()]).unwrap();
    assert_eq!(
        (t.tenants[0].input_tokens, t.tenants[0].output_tokens),
        (p, q)
    );
    (p, q, why, cost)
}

#[test]
fn a_json_body_charges_its_usage() {
    let body = br#"{"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":7,"completion_tokens":12,"total_tokens":19}}"#;
    // Split anywhere: the same answer.
    for cut in [0, 1, 50, body.len()] {
        let (a, b) = body.split_at(cut);
        assert_eq!(read(false, &[a, b], true), (7, 12, None, 7.0 + 24.0));
    }
}

#[test]
fn a_long_json_body_is_read_from_its_tail() {
    let text = "x".repeat(3 * SCAN_BYTES);
    let body = format!(
        r#"{{"choices":[{{"text":"{text} \"usage\": 5"}}],"usage": {{"prompt_tokens":3,"completion_tokens":4000}}}}"#
    );
    let pieces: Vec<&[u8]> = body.as_bytes().chunks(1000).collect();
    let (p, q, why, _) = read(false, &pieces, true);
    assert_eq!((p, q, why), (3, 4000, None));
}

#[test]
fn bad_usage_falls_back_field_by_field_and_is_counted() {
    let case = |usage: &str| {
        let body = format!(r#"{{"choices":[],"usage":{usage}}}"#);
        read(false, &[body.as_bytes()], true)
    };
    let fallback_out =
        |usage: &str| estimate(format!(r#"{{"choices":[],"usage":{usage}}}"#).len() as u64);
    let u = r#"{"prompt_tokens":"7","completion_tokens":3}"#;
    assert_eq!(
        (case(u).0, case(u).1, case(u).2),
        (100, 3, Some(BadUsage::NotANumber))
    );
    let u = r#"{"prompt_tokens":7,"completion_tokens":-3}"#;
    assert_eq!(case(u).2, Some(BadUsage::Negative));
    assert_eq!((case(u).0, case(u).1), (7, fallback_out(u)));
    let u = r#"{"prompt_tokens":1e300,"completion_tokens":3}"#;
    assert_eq!((case(u).0, case(u).2), (100, Some(BadUsage::Absurd)));
    let u = r#"{"prompt_tokens":99999999999,"completion_tokens":3}"#;
    assert_eq!((case(u).0, case(u).2), (100, Some(BadUsage::Absurd)));
    let u = r#"{"prompt_tokens":7.5,"completion_tokens":3}"#;
    assert_eq!(case(u).2, Some(BadUsage::NotANumber));
    let u = r#"{"prompt_tokens":7.0,"completion_tokens":3}"#;
    assert_eq!((case(u).0, case(u).2), (7, None));
    let u = r#"{"completion_tokens":3}"#;
    assert_eq!((case(u).0, case(u).2), (100, Some(BadUsage::Missing)));
    let u = r#""lots""#;
    assert_eq!(case(u).2, Some(BadUsage::NotANumber));
    // No usage at all, or not JSON: the estimate and ⌈bytes / 4⌉.
    let (p, q, why, _) = read(false, &[b"<html>oops</html>"], true);
    assert_eq!((p, q, why), (100, 5, Some(BadUsage::Missing)));
    let (p, q, why, _) = read(false, &[br#"{"usage":null}"#], true);
    assert_eq!((p, q, why), (100, 4, Some(BadUsage::Missing)));
}

fn chunk(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}],\"usage\":null}}\n\n")
}

#[test]
fn a_stream_counts_data_lines_until_its_usage_chunk() {
    let mut s = String::new();
    for t in ["a", "b", "c"] {
        s += &chunk(t);
    }
    s += "event: ping\n: comment\n\n";
    s += "data: {\"choices\":[{\"delta\":{},\"finish_reason\": \"length\"}]}\n\n";
    let usage =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5}}\r\n\r\n";
    let done = "data: [DONE]\n\n";
    // Without the usage chunk: one token per data line, and counted as bad.
    let body = s.clone() + done;
    let (p, q, why, _) = read(true, &[body.as_bytes()], true);
    assert_eq!((p, q, why), (100, 3, Some(BadUsage::NoFinalChunk)));
    // With it, cut into pieces of every size: the usage.
    let body = s + usage + done;
    for size in [1, 2, 7, 64, body.len()] {
        let pieces: Vec<&[u8]> = body.as_bytes().chunks(size).collect();
        let (p, q, why, cost) = read(true, &pieces, true);
        assert_eq!(
            (p, q, why, cost),
            (9, 5, None, 9.0 + 10.0),
            "pieces of {size}"
        );
    }
}

#[test]
fn a_client_that_leaves_is_charged_what_it_was_sent_and_nothing_is_bad() {
    let body = chunk("a") + &chunk("b") + "data: {\"choi";
    let (p, q, why, cost) = read(true, &[body.as_bytes()], false);
    assert_eq!((p, q, why, cost), (100, 2, None, 104.0));
}

#[test]
fn progress_reports_the_usage_so_far_as_the_stream_runs() {
    let m = Arc::new(TokenMetrics::default());
    let mut c = UsageCost::new(admission(10), true, TenantId(3), &m);
    assert_eq!(c.used(), None, "nothing generated yet");
    c.data(chunk("a").as_bytes());
    assert_eq!(
        c.used(),
        Some(2.0),
        "one token (w_q = 2); the estimate is not usage"
    );
    assert_eq!(c.used(), None, "reported once");
    c.data((chunk("b") + &chunk("c")).as_bytes());
    assert_eq!(c.used(), Some(6.0));
    c.data(b"data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n");
    assert_eq!(c.used(), Some(10.0), "the usage adds the prompt");
    c.ended();
    assert_eq!(c.cost(), 10.0);
    // A usage of fewer tokens than were streamed: never below what was reported.
    let mut c = UsageCost::new(admission(10), true, TenantId(3), &m);
    c.data((chunk("a") + &chunk("b") + &chunk("c")).as_bytes());
    assert_eq!(c.used(), Some(6.0));
    c.data(b"data: {\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":1}}\n");
    c.ended();
    assert_eq!(c.cost(), 6.0);
    // A JSON body reports nothing until it ends.
    let mut j = UsageCost::new(admission(10), false, TenantId(3), &m);
    j.data(b"{\"usage\":");
    assert_eq!(j.used(), None);
}

#[test]
fn a_line_too_long_is_counted_unread_and_memory_stays_bounded() {
    let m = Arc::new(TokenMetrics::default());
    let mut c = UsageCost::new(admission(1), true, TenantId(0), &m);
    let big = vec![b'x'; 4 * SCAN_BYTES];
    c.data(b"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"pad\":\"");
    for _ in 0..4 {
        c.data(&big);
        let Reader::Sse { line, long } = &c.reader else {
            unreachable!()
        };
        assert!(line.len() <= SCAN_BYTES && *long);
    }
    c.data(b"\"}\n");
    c.ended();
    assert_eq!(c.tokens(), (1, 1, Some(BadUsage::NoFinalChunk)));
    let mut j = UsageCost::new(admission(1), false, TenantId(0), &m);
    for _ in 0..4 {
        j.data(&big);
        let Reader::Json { kept, .. } = &j.reader else {
            unreachable!()
        };
        assert!(kept.len() <= SCAN_BYTES);
    }
}

#[test]
fn the_estimate_is_a_quarter_of_the_bytes_rounded_up() {
    assert_eq!(
        (estimate(0), estimate(1), estimate(4), estimate(5)),
        (0, 1, 1, 2)
    );
    assert_eq!(estimate(u64::MAX), MAX_TOKENS);
}

#[test]
fn config_checks_name_the_field() {
    let base = "[upstream]\naddr = \"127.0.0.1:1\"\n";
    let err = |extra: &str| {
        ProxyConfig::from_toml_str(&format!("{base}{extra}"))
            .unwrap_err()
            .to_string()
    };
    let e = err("cost = \"openai-usage\"\ncost_header = \"x-cost\"\n");
    assert!(
        e.contains("upstream.cost") && e.contains("cost_header"),
        "{e}"
    );
    let e = err("cost = \"tokens\"\n");
    assert!(e.starts_with("upstream.cost:"), "{e}");
    for bad in ["0.0", "-1.0", "nan", "inf", "1e9"] {
        let e = err(&format!("[cost]\ninput_token_weight = {bad}\n"));
        assert!(e.starts_with("cost.input_token_weight:"), "{bad}: {e}");
    }
    let e = err("[[tenant]]\nname = \"a\"\noutput_token_weight = 0.0\n");
    assert!(e.starts_with("tenant[0].output_token_weight:"), "{e}");
    let ok = "cost = \"openai-usage\"\n[scheduler]\nalgorithm = \"vtc\"\n[cost]\n\
              output_token_weight = 2.0\n[[tenant]]\nname = \"a\"\ninput_token_weight = 3.0\n";
    let c = ProxyConfig::from_toml_str(&format!("{base}{ok}")).unwrap();
    let mut registry = crate::tenant::Registry::default();
    let t = TokenCosts::of(&c, &mut registry).unwrap();
    let a = t.admission(registry.intern("a"), Some(40));
    assert_eq!(
        (a.input, a.h.input_weight, a.h.output_weight),
        (10, 3.0, 2.0)
    );
    assert!(a.tell_scheduler);
    let other = t.admission(registry.intern("b"), None);
    assert_eq!((other.input, other.h.input_weight), (0, 1.0));
    let p = crate::metrics::CostPolicy::of(&c);
    assert_eq!(p.floor, FLOOR_TOKENS as f64 * 5.0);
}

proptest! {
    /// Any bytes, cut anywhere, as a stream or a JSON body, ended or not: no panic, counts
    /// within bounds, a finite non-negative cost, memory within bounds.
    #[test]
    fn random_bytes_never_break_the_reader(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        words in proptest::collection::vec(0usize..12, 0..40),
        cuts in proptest::collection::vec(1usize..300, 1..20),
        stream in any::<bool>(),
        ended in any::<bool>(),
    ) {
        // Random bytes, mixed with pieces of real responses.
        const WORDS: [&str; 12] = ["data: ", "\n", "\r\n", "[DONE]", "\"usage\"", ":",
            "{\"prompt_tokens\":", "\"completion_tokens\":", "-5", "1e400", "}", "null"];
        let mut body = bytes;
        for w in words {
            body.extend_from_slice(WORDS[w].as_bytes());
        }
        let m = Arc::new(TokenMetrics::default());
        let mut c = UsageCost::new(admission(100), stream, TenantId(0), &m);
        let mut rest = &body[..];
        let mut k = 0;
        let mut last = 0.0;
        while !rest.is_empty() {
            let n = cuts[k % cuts.len()].min(rest.len());
            c.data(&rest[..n]);
            rest = &rest[n..];
            k += 1;
            if let Some(u) = c.used() {
                prop_assert!(u.is_finite() && u > last);
                last = u;
            }
        }
        if ended {
            c.ended();
        }
        let (p, q, _) = c.tokens();
        prop_assert!(p <= MAX_TOKENS && q <= MAX_TOKENS.max(body.len() as u64));
        let cost = c.cost();
        prop_assert!(cost.is_finite() && cost >= last, "the total never below the progress");
    }
}
