//! Running the pooler as a program: `fairlane pg --config pg.toml [--check]`. SIGTERM and
//! SIGINT stop it (clients are disconnected; their open transactions roll back on the
//! server).

use std::path::Path;
use std::process::ExitCode;

use crate::{PgConfig, Pooler};

/// Only validate the config: `<file>: ok` and exit 0, or the error naming the file and
/// field and exit 2.
pub fn check(path: &Path) -> ExitCode {
    match PgConfig::from_file(path) {
        Ok(_) => {
            println!("{}: ok", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fairlane pg: {e}");
            ExitCode::from(2)
        }
    }
}

/// Load the config and serve until a signal. Exit code 2 for a bad config, 1 for a
/// start-up failure.
pub fn run(path: &Path) -> ExitCode {
    let config = match PgConfig::from_file(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fairlane pg: {e}");
            return ExitCode::from(2);
        }
    };
    // One thread: a current-thread runtime (one event loop, no wake-ups across threads).
    let rt = match config.listen.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    }
    .enable_all()
    .build();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fairlane pg: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let pooler = match Pooler::start(config).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("fairlane pg: {e}");
                return ExitCode::FAILURE;
            }
        };
        eprintln!(
            "fairlane pg: listening on {}{}",
            pooler.addr(),
            pooler
                .admin_addr()
                .map(|a| format!(", admin on http://{a}/dashboard"))
                .unwrap_or_default()
        );
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("fairlane pg: cannot watch SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        pooler.stop();
        ExitCode::SUCCESS
    })
}
