//! # fairlane-testkit
//!
//! What the workspace's tests that run real programs (PostgreSQL, Redis, psql, pgbench,
//! Chromium, …) share, kept out of the library crates: finding an installed program, a free
//! loopback port, running a command that must succeed. A missing program is a failure naming
//! `scripts/test-deps.sh`, which installs them, not a skip. A program a test started is
//! waited for with a bound, and stopped ([`stop`]) by the test that started it.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

/// The path of the installed `program`: the first found on `PATH`, then in `/usr/sbin`,
/// `/usr/bin` and `/bin`. Panics, naming `scripts/test-deps.sh`, when there is none.
pub fn need(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{program}` is not installed; run scripts/test-deps.sh (scripts/test.sh does)")
        })
}

/// The PostgreSQL server program `name` (`initdb`, `postgres`, `pg_isready`, …) of the newest
/// version under `/usr/lib/postgresql/*/bin` (Debian's layout). Panics when there is none.
pub fn pg_bin(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not installed (/usr/lib/postgresql: {e}); run scripts/test-deps.sh"
            )
        })
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    versions.sort();
    versions.pop().unwrap_or_else(|| {
        panic!("no PostgreSQL `{name}` under /usr/lib/postgresql/*/bin; run scripts/test-deps.sh")
    })
}

/// A loopback port free a moment ago (bound to port 0, then released): for programs that
/// must be told their port. A program that can pick its own and say which is better.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// Runs `cmd` to its end; panics, with `what` and the command's output, unless it succeeded.
pub fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `child`'s exit status once it exits, polled every 20 ms for at most `limit`; `None` if it
/// still runs then.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Gives `child` at most `grace` to exit (after the test asked it to), then kills it; reaped
/// either way. Its exit status, if it could be read.
pub fn stop(mut child: Child, grace: Duration) -> Option<ExitStatus> {
    match wait_exit(&mut child, grace) {
        Some(status) => Some(status),
        None => {
            let _ = child.kill();
            child.wait().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_program_and_runs_it() {
        let sh = need("sh");
        assert!(sh.is_absolute(), "{}", sh.display());
        let out = run(Command::new(&sh).args(["-c", "echo hi"]), "sh");
        assert_eq!(out.stdout, b"hi\n");
    }

    #[test]
    #[should_panic(expected = "scripts/test-deps.sh")]
    fn a_missing_program_names_the_installer() {
        need("fairlane-no-such-program");
    }

    #[test]
    #[should_panic(expected = "false failed")]
    fn a_failing_command_panics() {
        run(Command::new(need("false")).arg("x"), "false");
    }

    #[test]
    fn a_child_is_waited_for_with_a_bound_and_stopped() {
        let mut quick = Command::new(need("true")).spawn().unwrap();
        let status = wait_exit(&mut quick, Duration::from_secs(10));
        assert!(status.is_some_and(|s| s.success()), "{status:?}");
        let mut slow = Command::new(need("sleep")).arg("30").spawn().unwrap();
        assert_eq!(wait_exit(&mut slow, Duration::from_millis(50)), None);
        let status = stop(slow, Duration::from_millis(50));
        // Killed (SIGKILL), not waited out: `sleep 30` would have exited with status 0.
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.and_then(|s| s.signal()), Some(9), "{status:?}");
    }

    #[test]
    fn a_free_port_can_be_bound() {
        let port = free_port();
        assert_ne!(port, 0);
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("still free");
    }
}
