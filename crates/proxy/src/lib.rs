//! # fairlane-proxy
//!
//! An interposed fair-scheduling HTTP reverse proxy (Jin, Chase & Kaur, SIGMETRICS '04,
//! §1–§3): it sits in front of one black-box HTTP server, keeps at most **D** requests
//! outstanding upstream, and lets any fairlane-core scheduler (SFQ(D), WFQ, 2DFQᴱ over D
//! slots, FIFO, …) choose which waiting request takes the next free slot.
//!
//! The request path is one pipeline, in one direction, whichever HTTP the client spoke and
//! whichever wire carries the request upstream:
//!
//! ```text
//! accept (server, conn) → client adapter (client::h1 | client::on_hyper) → RequestHead
//!   → pipeline: identify → classify → check → [body read] → gate → upstream::Wire
//!   → respond: Answer (buffered, or streamed past the buffer) → charge at slot release
//!   → the client adapter writes the Answer
//! ```
//!
//! * [`config`] — the TOML configuration, validated with errors that name the field.
//! * [`tenant`] — who a request belongs to (API key or client address) and its class.
//! * [`gate`] — D upstream slots over a core scheduler; per-tenant and global queue caps,
//!   cancel-on-drop, depth changeable at run time.
//! * `head` — the one head type (request and response header lines in one buffer);
//!   `rewrite` — the one place headers are rewritten (hop-by-hop, forwarding headers).
//! * `pipeline` — admission, classification, the gate, forwarding; `respond` — the answer,
//!   buffering and streaming, and the charge; `cost` — the `CostSource` seam.
//! * `stream` — request bodies read in full before queueing, or streamed once admitted.
//! * `client` — the client adapters: the own HTTP/1.1 server and hyper's (HTTP/2).
//! * `upstream` — the `Wire` trait and its implementations (HTTP/1.1 on own sockets).
//! * [`h1`] — HTTP/1.1 framing on `httparse` (the own adapters' and wires').
//! * [`tokens`] — token costs read from OpenAI-compatible responses (`openai-usage`).
//! * [`metrics`] — the per-tenant counters and histograms; [`status`] — the `/status`
//!   document read from them and its Prometheus text; [`admin`] — `/metrics`, `/status` and
//!   the live `/dashboard` on a separate listener.
//! * [`levels`] — APF's priority levels as they run: the schema matcher `classify` runs, the
//!   per-level counters and metrics (the `[[priority_level]]` and `[[flow_schema]]` sections
//!   are `config::levels`').
//! * [`cluster`] — `[cluster]`: fair shares of one upstream across instances via Redis.
//! * [`server`] — the listeners, graceful shutdown and reload; `state` — what they share.
//! * [`program`] — the proxy as a program (runtimes, signals): the `fairlane-proxy` binary
//!   and `fairlane proxy` both run it.
//! * `tunnel` — WebSocket upgrades: tunnel budgets per tenant (the splice after a `101` is
//!   the client adapter's).
//! * `workers` — `listen.workers`: one single-threaded runtime per core (nginx's workers),
//!   each accepted connection handed to the one with the fewest.
//!
//! The delay server and load generator the tests and benchmarks use are in the
//! `fairlane-proxy-testkit` crate (crates/proxy/testkit).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = fairlane_proxy::config::ProxyConfig::from_toml_str(r#"
//!     [listen]
//!     addr = "127.0.0.1:8080"
//!     admin = "127.0.0.1:9090"
//!     [upstream]
//!     addr = "127.0.0.1:8000"
//!     [scheduler]
//!     algorithm = "sfq"
//!     depth = 8
//!     [[tenant]]
//!     name = "alice"
//!     keys = ["alice-secret"]
//! "#)?;
//! let proxy = fairlane_proxy::Proxy::bind(config).await?;
//! let handle = proxy.handle(); // handle.shutdown() / handle.reload(new_config)
//! proxy.run().await;
//! # Ok(()) }
//! ```

#![deny(unsafe_code)] // only `server::raise_fd_limit` / `fd_limit` call get/setrlimit

pub mod admin;
mod ascii;
mod bounds;
mod cidr;
mod civil;
mod client;
pub mod cluster;
mod cluster_config;
pub mod config;
mod conn;
mod cost;
mod dashboard;
mod depth;
pub mod gate;
pub mod h1;
mod head;
mod histogram;
pub mod levels;
pub mod metrics;
mod pipeline;
pub mod program;
mod prom;
mod respond;
mod rewrite;
mod section;
pub mod server;
mod state;
pub mod status;
mod stream;
pub mod tenant;
mod tls;
pub mod tokens;
mod tunnel;
mod upstream;
mod workers;

pub use config::{ConfigError, ProxyConfig};
pub use server::{Proxy, ProxyHandle, WorkerConnections};

/// `make()`'s future, pinned in a box allocated before it is made: the future is written
/// straight into the box, where `Box::pin(make())` builds it on the stack and then copies
/// all of it (its whole size, however little of it is set before its first poll).
pub(crate) fn boxed<F: std::future::Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}
