//! `fairlane-proxy --config proxy.toml [--check]`: the proxy alone (the same as
//! `fairlane proxy`).

use std::process::ExitCode;

mod program;

/// jemalloc rather than the system allocator (issue 19): it keeps no header beside each
/// block, so the untouched part of a connection's 8 KiB hyper buffers stays out of memory,
/// and it returns freed pages (10 s decay). About 20 % less memory per held client
/// connection than glibc's malloc; docs/benchmarks.md "Issue 19: memory per connection".
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    args.retain(|a| a != "--check");
    let path = match args.as_slice() {
        [flag, path] if flag == "--config" || flag == "-c" => path.clone(),
        [arg] if arg.starts_with("--config=") => arg["--config=".len()..].to_string(),
        _ => {
            eprintln!("usage: fairlane-proxy --config proxy.toml [--check]");
            return ExitCode::from(2);
        }
    };
    let path = std::path::Path::new(&path);
    if check {
        return program::check(path);
    }
    program::run(path)
}
