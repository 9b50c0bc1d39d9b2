//! # fairlane-demo
//!
//! The runtime's demonstrations, kept out of the library crates: real work on a
//! [`FairPool`](fairlane_runtime::FairPool) under several schedulers, side by side. The
//! `fairlane demo pool` command and the `demo_pool` example print their reports.
//!
//! * [`pool`] — small, large and unpredictable tenants hashing real data under FIFO, WFQᴱ,
//!   WF²Qᴱ and 2DFQᴱ: per-tenant throughput and p50/p99 latency.
//! * [`reserve`] — CPU reservations under LDF next to bullies, per metering interval, against
//!   2DFQᴱ with equal weights (`fairlane demo pool --reservations`).

#![deny(unsafe_code)]

pub mod pool;
pub mod reserve;
