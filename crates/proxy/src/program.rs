//! Running the proxy as a program: what the `fairlane-proxy` binary ([`main`]) and
//! `fairlane proxy` (crates/cli, through [`check`] and [`run`]) both do. SIGTERM / SIGINT
//! drain and stop; SIGHUP re-reads the file and reloads. The signal handlers are installed
//! before the "listening" line is printed, so a signal sent as soon as that line appears
//! is handled, never the default action (which for SIGHUP ends the process).
//!
//! Threads: with `listen.workers = "per-core"` (the default) or a number, client connections
//! run on that many single-threaded runtimes of the proxy's own, and the accept loop, the
//! admin listener and the signals on one more single-threaded runtime (the main thread).
//! With `"shared"`, everything runs on one tokio work-stealing runtime, one thread per core.
//!
//! `FAIRLANE_PROXY_THREADS=N` overrides the thread count: N ≥ 1 is the number of worker
//! runtimes (or, with `"shared"`, of the work-stealing runtime's threads); `0` runs
//! everything on the main thread (tokio's current-thread runtime, one core at most).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::Workers;
use crate::{Proxy, ProxyConfig, ProxyHandle};

/// The `fairlane-proxy` binary: `--config proxy.toml [--check]` (or `-c`, `--config=`),
/// the arguments after the program's name. Exit code 2 for a usage error.
pub fn main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let mut args: Vec<String> = args.into_iter().collect();
    let check_only = args.iter().any(|a| a == "--check");
    args.retain(|a| a != "--check");
    let path = match args.as_slice() {
        [flag, path] if flag == "--config" || flag == "-c" => path.clone(),
        [arg] if arg.starts_with("--config=") => arg["--config=".len()..].to_string(),
        _ => {
            eprintln!("usage: fairlane-proxy --config proxy.toml [--check]");
            return ExitCode::from(2);
        }
    };
    let path = Path::new(&path);
    if check_only {
        return check(path);
    }
    run(path)
}

/// Only validate the config: print `<file>: ok` and exit 0, or the error naming the file
/// and field and exit 2 (what `--check` does).
pub fn check(config_path: &Path) -> ExitCode {
    match ProxyConfig::from_file(config_path).and_then(|c| c.check_files()) {
        Ok(()) => {
            println!("{}: ok", config_path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fairlane proxy: {e}");
            ExitCode::from(2)
        }
    }
}

/// Load the config, start the proxy, and serve until a signal stops it. Exit code 2 for a
/// bad config, 1 for a start-up failure.
pub fn run(config_path: &Path) -> ExitCode {
    let mut config = match ProxyConfig::from_file(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fairlane proxy: {e}");
            return ExitCode::from(2);
        }
    };
    let threads = match std::env::var("FAIRLANE_PROXY_THREADS") {
        Err(_) => None,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => {
                eprintln!(
                    "fairlane proxy: FAIRLANE_PROXY_THREADS: expected a number of threads, got {v:?}"
                );
                return ExitCode::from(2);
            }
        },
    };
    let shared = config.listen.workers == Workers::Shared;
    with_threads(&mut config, threads);
    if let Err(e) = config.validate() {
        eprintln!("fairlane proxy: FAIRLANE_PROXY_THREADS: {e}");
        return ExitCode::from(2);
    }
    let rt = match (threads, shared) {
        // Everything on this thread, or only the accept loop, admin and signals (the
        // connections have runtimes of their own).
        (Some(0), _) | (_, false) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        (Some(n), true) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
        (None, true) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fairlane proxy: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(serve(config, config_path.to_path_buf(), threads))
}

/// `FAIRLANE_PROXY_THREADS` applied to `listen.workers` (at start and on every reload, so a
/// reload does not see it as a change).
fn with_threads(config: &mut ProxyConfig, threads: Option<usize>) {
    match threads {
        Some(0) => config.listen.workers = Workers::Shared,
        Some(n) if config.listen.workers != Workers::Shared => {
            config.listen.workers = Workers::Count(n)
        }
        _ => {}
    }
}

async fn serve(config: ProxyConfig, path: PathBuf, threads: Option<usize>) -> ExitCode {
    let fds = crate::server::raise_fd_limit();
    let proxy = match Proxy::bind(config.clone()).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fairlane proxy: {e}");
            return ExitCode::FAILURE;
        }
    };
    let signals = Signals::install();
    let listening = match (config.listen.plain_addr(), proxy.tls_addr()) {
        (Some(_), Some(tls)) => format!("http://{}, https://{tls}", proxy.local_addr()),
        (None, Some(tls)) => format!("https://{tls}"),
        _ => format!("http://{}", proxy.local_addr()),
    };
    // With [cluster], D here is this instance's seats until its first sync; the global D is
    // the cluster's.
    let depth = match &config.cluster {
        Some(c) => format!(
            "local D = {} until the first sync, global D = {} over the cluster as instance {}",
            config.scheduler.depth, c.depth, c.instance
        ),
        None => format!("D = {}", config.scheduler.depth),
    };
    eprintln!(
        "fairlane proxy: listening on {listening} → upstream {} ({}, {depth}); admin http://{}/dashboard{}",
        config.upstream.addr,
        config.scheduler.algorithm,
        proxy.admin_addr(),
        fds.map_or(String::new(), |n| format!("; open-files limit {n}")),
    );
    let handle = proxy.handle();
    let counts = proxy.handle();
    let signals = tokio::spawn(watch_signals(signals, handle, path, threads));
    proxy.run().await;
    signals.abort();
    let per_worker: Vec<u64> = counts
        .worker_connections()
        .iter()
        .map(|w| w.accepted)
        .collect();
    if !per_worker.is_empty() {
        // How evenly the accept loop spread the connections (issue 19).
        eprintln!("fairlane proxy: connections per worker runtime: {per_worker:?}");
    }
    eprintln!("fairlane proxy: stopped");
    ExitCode::SUCCESS
}

/// The signals the program handles, installed (their default actions replaced).
#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Install the handlers (`None`, said on stderr, if that fails).
    fn install() -> Option<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(term), Ok(int), Ok(hup)) => Some(Signals { term, int, hup }),
            _ => {
                eprintln!("fairlane proxy: cannot install signal handlers");
                None
            }
        }
    }
}

#[cfg(unix)]
async fn watch_signals(
    signals: Option<Signals>,
    handle: ProxyHandle,
    path: PathBuf,
    threads: Option<usize>,
) {
    let Some(Signals {
        mut term,
        mut int,
        mut hup,
    }) = signals
    else {
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { eprintln!("fairlane proxy: SIGTERM, draining"); handle.shutdown(); }
            _ = int.recv() => { eprintln!("fairlane proxy: SIGINT, draining"); handle.shutdown(); }
            _ = hup.recv() => reload(&handle, &path, threads),
        }
    }
}

/// SIGHUP: read the file again and reload, or keep the old config and say why.
#[cfg(unix)]
fn reload(handle: &ProxyHandle, path: &Path, threads: Option<usize>) {
    let reloaded = ProxyConfig::from_file(path).and_then(|mut c| {
        with_threads(&mut c, threads);
        handle.reload(c)
    });
    match reloaded {
        Ok(warnings) => {
            eprintln!("fairlane proxy: SIGHUP, reloaded {}", path.display());
            for w in warnings {
                eprintln!("fairlane proxy: reload warning: {w}");
            }
        }
        Err(e) => eprintln!("fairlane proxy: SIGHUP, reload refused, kept the old config: {e}"),
    }
}

/// Ctrl-C, registered before the proxy announces itself.
#[cfg(not(unix))]
struct Signals(std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>);

#[cfg(not(unix))]
impl Signals {
    fn install() -> Option<Signals> {
        Some(Signals(Box::pin(tokio::signal::ctrl_c())))
    }
}

#[cfg(not(unix))]
async fn watch_signals(
    signals: Option<Signals>,
    handle: ProxyHandle,
    _path: PathBuf,
    _threads: Option<usize>,
) {
    if let Some(Signals(ctrl_c)) = signals {
        let _ = ctrl_c.await;
        handle.shutdown();
    }
}
