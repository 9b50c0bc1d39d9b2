//! Random input, 0 panics. The parsers take random bytes; a live pooler in front of a real
//! server takes random message streams from logged-in clients — well-formed frames of
//! every type with random bodies, truncated and oversized ones, raw garbage — and afterwards
//! still serves a normal client, with no panic anywhere in the process.

mod support;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fairlane_pg::wire::{self, Frames, Parse};
use fairlane_pg::Pooler;
use proptest::prelude::*;
use support::{config, eventually, Postgres};

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parsers_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = wire::parse_startup(&bytes);
        let mut framed = vec![b'P', 0, 0, 0, 0];
        framed.extend_from_slice(&bytes);
        let _ = Parse::read(&framed);
        let _ = wire::bind_statement(&framed);
        let _ = wire::target(&framed);
        let _ = wire::sasl_initial(&framed);
        let _ = wire::error_fields(&framed);
        let mut b: &[u8] = &bytes;
        let _ = wire::cstr(&mut b);
        let v = fairlane_pg::scram::Verifier::new("pw");
        if let Ok((s, _)) = fairlane_pg::scram::ScramServer::start(v, &bytes) {
            let _ = s.finish(&bytes);
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let mut f = Frames::new(1024);
            let mut r: &[u8] = &bytes;
            while let Ok(Some(_)) = f.next(&mut r).await {}
        });
    }
}

/// One random frame: a type the protocol knows (or any byte) and a random body, sometimes
/// with a length that lies.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let tags = prop_oneof![
        Just(b'Q'),
        Just(b'P'),
        Just(b'B'),
        Just(b'D'),
        Just(b'E'),
        Just(b'C'),
        Just(b'S'),
        Just(b'H'),
        Just(b'd'),
        Just(b'c'),
        Just(b'f'),
        Just(b'F'),
        Just(b'p'),
        any::<u8>()
    ];
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        // Mostly printable, NUL-separated: looks like names and queries.
        proptest::collection::vec(prop_oneof![Just(0u8), 32u8..127], 0..64),
        Just(b"select 1\0".to_vec()),
        Just(b"S\0".to_vec()),
        Just(b"\0select 1\0\0\0".to_vec()),
    ];
    (tags, body, 0u8..10).prop_map(|(tag, body, lie)| {
        let mut len = body.len() as i32 + 4;
        match lie {
            0 => len = i32::MAX,
            1 => len = 2,
            2 => len += 3,
            _ => {}
        }
        let mut m = vec![tag];
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(&body);
        m
    })
}

#[test]
fn random_message_streams_never_panic_the_pooler() {
    count_panics();
    let pg = Postgres::start();
    pg.role("alice", "alice-pw");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut c = config(
        &pg,
        &[("alice", "alice-pw")],
        "[pool]\nsize = 2\n[limits]\nmax_message_bytes = 65536\nqueue_timeout_ms = 2000",
    );
    c.auth.trust_loopback = true;
    let pooler = rt.block_on(Pooler::start(c)).unwrap();
    let addr = pooler.addr();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(48));
    runner
        .run(&proptest::collection::vec(frame(), 1..12), |frames| {
            let mut s = support::raw_login(addr, "alice");
            for f in &frames {
                if s.write_all(f).is_err() {
                    break;
                }
            }
            // Read whatever comes back for a moment; the pooler may close the client.
            s.set_read_timeout(Some(Duration::from_millis(150)))
                .unwrap();
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            Ok(())
        })
        .unwrap();
    // Unstructured garbage before any login, too.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(48));
    runner
        .run(&proptest::collection::vec(any::<u8>(), 0..300), |bytes| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let _ = s.write_all(&bytes);
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            Ok(())
        })
        .unwrap();
    let (ok, out, err) = support::psql(
        &pooler,
        "alice",
        "alice-pw",
        "postgres",
        &["-c", "select 42"],
    );
    assert!(ok && out == "42", "{err}");
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "a panic in the pooler (see stderr)"
    );
    // Every server connection comes back (or is closed): none stays held by a vanished
    // client. (An abandoned transaction is drained and rolled back first: give it time.)
    eventually(
        Duration::from_secs(20),
        || pooler.status().to_string(),
        || pooler.status()["holding"] == 0,
    );
}
