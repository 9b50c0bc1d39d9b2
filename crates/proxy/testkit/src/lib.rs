//! # fairlane-proxy-testkit
//!
//! What runs *around* fairlane-proxy in its tests, examples and benchmarks, kept out of the
//! proxy's library:
//!
//! * [`upstream`] — a small HTTP/1.1 delay server to stand behind the proxy;
//! * [`openai`] — a fake OpenAI-compatible LLM server with continuous batching;
//! * [`loadgen`] — a closed- and open-loop HTTP/1.1 load generator;
//! * [`grpc`] — a gRPC unary echo server over h2c (the benchmarks' gRPC rows).

pub mod grpc;
pub mod loadgen;
pub mod openai;
pub mod upstream;

use std::net::SocketAddr;

/// The examples' first argument as a socket address (`default` when there is none); a bad
/// one is an `InvalidInput` error naming it.
pub fn addr_arg(default: &str) -> std::io::Result<SocketAddr> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| default.into());
    addr.parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}")))
}

/// A forwarding example's arguments: its listen and upstream addresses, then the rest;
/// without two it prints `usage` and exits with status 2.
pub fn forward_args(usage: &str) -> (SocketAddr, SocketAddr, Vec<String>) {
    let mut a = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (a.next(), a.next()) else {
        eprintln!("usage: {usage}");
        std::process::exit(2);
    };
    let listen = listen.parse().expect("listen addr as ip:port");
    let upstream = upstream.parse().expect("upstream addr as ip:port");
    (listen, upstream, a.collect())
}
