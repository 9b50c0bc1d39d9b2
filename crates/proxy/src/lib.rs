//! # fairlane-proxy
//!
//! An interposed fair-scheduling HTTP reverse proxy (Jin, Chase & Kaur, SIGMETRICS '04,
//! §1–§3): it sits in front of one black-box HTTP server, keeps at most **D** requests
//! outstanding upstream, and lets any fairlane-core scheduler (SFQ(D), WFQ, 2DFQᴱ over D
//! slots, FIFO, …) choose which waiting request takes the next free slot.
//!
//! * [`config`] — the TOML configuration, validated with errors that name the field.
//! * [`tenant`] — who a request belongs to (API key or client address) and its class.
//! * [`gate`] — D upstream slots over a core scheduler; per-tenant and global queue caps,
//!   cancel-on-drop, depth changeable at run time.
//! * [`forward`] — streaming a request upstream and the response back, charging the
//!   upstream time (or an upstream-reported cost) at completion.
//! * [`metrics`], [`admin`] — Prometheus `/metrics`, JSON `/status` and the live
//!   `/dashboard` on a separate listener.
//! * [`cluster`] — `[cluster]`: fair shares of one upstream across instances via Redis.
//! * `pool` — keep-alive HTTP/1.1 connections to the upstream.
//! * [`server`] — the listeners, graceful shutdown and reload.
//! * `workers` — `listen.workers`: one single-threaded runtime per core (nginx's workers),
//!   each accepted connection handed to the one with the fewest.
//! * [`upstream`], [`loadgen`] — a small delay server and load generator used by the tests,
//!   the benchmarks and the deployment example.
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
pub mod cli;
pub mod cluster;
pub mod config;
mod conn;
mod dashboard;
mod depth;
pub mod forward;
pub mod gate;
// Used by the raw_forward example (included there by path) and its own tests so far.
#[allow(dead_code)]
mod h1;
mod h1conn;
pub mod loadgen;
pub mod metrics;
mod pool;
mod rawpool;
mod rawreq;
pub mod server;
pub mod tenant;
pub mod upstream;
mod workers;

pub use config::{ConfigError, ProxyConfig};
pub use server::{Proxy, ProxyHandle, WorkerConnections};
