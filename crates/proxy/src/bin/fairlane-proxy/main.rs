//! `fairlane-proxy --config proxy.toml [--check]`: the proxy alone (the same as
//! `fairlane proxy`), [`fairlane_proxy::program`].

use std::process::ExitCode;

/// jemalloc rather than the system allocator (issue 19): it keeps no header beside each
/// block, so the untouched part of a connection's 8 KiB hyper buffers stays out of memory,
/// and it returns freed pages (10 s decay). About 20 % less memory per held client
/// connection than glibc's malloc; docs/benchmarks.md "Issue 19: memory per connection".
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    fairlane_proxy::program::main(std::env::args().skip(1))
}
