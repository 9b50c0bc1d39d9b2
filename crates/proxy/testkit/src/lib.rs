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
