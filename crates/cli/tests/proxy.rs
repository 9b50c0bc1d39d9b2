//! `fairlane proxy` as operators run it, started on free loopback ports in front of a tiny
//! upstream: `/healthz`, reload warnings and key revocation on SIGHUP, and SIGINT. Every
//! wait has a deadline and fails with a message; the test stops exactly the processes it
//! started.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// An upstream answering every request `200 ok`, on a free loopback port, in a thread that
/// ends with the test process.
fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut r = BufReader::new(c.try_clone().unwrap());
                // One request per connection: read the head, answer, close.
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n",
                );
            });
        }
    });
    addr
}

/// GET `path` from `addr`, optionally with an API key; returns (status, body).
fn get(addr: SocketAddr, path: &str, key: Option<&str>) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    let auth = key.map_or(String::new(), |k| format!("authorization: Bearer {k}\r\n"));
    write!(
        c,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp)
        .unwrap_or_else(|e| panic!("GET {path}: no full response within {DEADLINE:?}: {e}"));
    let code = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: not an HTTP response: {resp:?}"));
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

fn config(dir: &Path, upstream: SocketAddr, algorithm: &str, bob_keys: &str) -> PathBuf {
    let p = dir.join("proxy.toml");
    std::fs::write(
        &p,
        format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
             [upstream]\naddr = \"{upstream}\"\n[scheduler]\nalgorithm = \"{algorithm}\"\n\
             [[tenant]]\nname = \"alice\"\nkeys = [\"ka\"]\n\
             [[tenant]]\nname = \"bob\"\nkeys = [{bob_keys}]\n"
        ),
    )
    .unwrap();
    p
}

/// `fairlane proxy` as a child process; its stderr collected line by line.
struct Proxy {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Proxy {
    fn start(config: &Path) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairlane"))
            .args(["proxy", "--config"])
            .arg(config)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut p = Proxy {
            child,
            log,
            addr: "0.0.0.0:0".parse().unwrap(),
            admin: "0.0.0.0:0".parse().unwrap(),
        };
        let line = p.wait_for_log("listening on");
        // "… listening on http://A → upstream U (…); admin http://B/dashboard; …"
        let grab = |after: &str| -> SocketAddr {
            line.split(after)
                .nth(1)
                .and_then(|r| r.split(['/', ' ', ';']).next())
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no address after {after:?} in {line:?}"))
        };
        p.addr = grab("listening on http://");
        p.admin = grab("admin http://");
        p
    }

    /// The first log line containing `needle`, waiting up to the deadline.
    fn wait_for_log(&mut self, needle: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(l) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "proxy exited ({status}) before logging {needle:?}: {:?}",
                    self.log.lock().unwrap()
                );
            }
            assert!(
                Instant::now() < end,
                "no log line {needle:?} within {DEADLINE:?}: {:?}",
                self.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `sig` once the proxy catches it: a signal that arrives before its handler is
    /// installed would kill the process instead (Linux: read from /proc; elsewhere sent
    /// right away).
    fn signal(&self, sig: &str) {
        let num: u32 = match sig {
            "HUP" => 1,
            "INT" => 2,
            "TERM" => 15,
            other => panic!("unknown signal {other}"),
        };
        let status = format!("/proc/{}/status", self.child.id());
        let end = Instant::now() + DEADLINE;
        while cfg!(target_os = "linux") {
            let caught = std::fs::read_to_string(&status)
                .ok()
                .and_then(|s| {
                    let hex = s
                        .lines()
                        .find_map(|l| l.strip_prefix("SigCgt:"))?
                        .trim()
                        .to_string();
                    u64::from_str_radix(&hex, 16).ok()
                })
                .is_some_and(|mask| mask & (1 << (num - 1)) != 0);
            if caught {
                break;
            }
            assert!(
                Instant::now() < end,
                "the proxy did not install its SIG{sig} handler within {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// SIGTERM; the proxy must drain and exit 0.
    fn terminate(mut self) {
        self.signal("TERM");
        assert!(self.wait_exit().success());
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        fairlane_testkit::wait_exit(&mut self.child, DEADLINE)
            .unwrap_or_else(|| panic!("proxy did not exit within {DEADLINE:?}"))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A fresh directory for one test, removed when dropped (also when the test panics).
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fairlane-cli-proxy-{name}-"))
        .tempdir()
        .unwrap()
}

/// A proxy on the usual configuration (`sfq`, bob's key `kb`) in a fresh directory named
/// after the test; the directory lives as long as the returned guard.
fn start_default(name: &str) -> (tempfile::TempDir, Proxy) {
    let tmp = temp_dir(name);
    let p = Proxy::start(&config(tmp.path(), upstream(), "sfq", "\"kb\""));
    (tmp, p)
}

#[test]
fn healthz_and_forwarding() {
    let (_tmp, p) = start_default("healthz");
    assert_eq!(get(p.admin, "/healthz", None), (200, "ok\n".to_string()));
    assert_eq!(get(p.addr, "/", Some("ka")), (200, "ok\n".to_string()));
    assert_eq!(get(p.addr, "/", Some("nobody")).0, 401);
    p.terminate();
}

#[test]
fn reload_revokes_keys_and_warns_about_what_needs_a_restart() {
    let tmp = temp_dir("reload");
    let dir = tmp.path();
    let up = upstream();
    let path = config(dir, up, "sfq", "\"kb\"");
    let mut p = Proxy::start(&path);
    assert_eq!(get(p.addr, "/", Some("kb")).0, 200);
    // Bob's key replaced, and the algorithm changed (which needs a restart).
    config(dir, up, "2dfq", "\"kb2\"");
    p.signal("HUP");
    p.wait_for_log("SIGHUP, reloaded");
    let warning = p.wait_for_log("reload warning");
    assert!(warning.contains("scheduler.algorithm"), "{warning}");
    assert_eq!(
        get(p.addr, "/", Some("kb")).0,
        401,
        "the old key is revoked"
    );
    assert_eq!(get(p.addr, "/", Some("kb2")).0, 200, "the new key works");
    assert_eq!(get(p.addr, "/", Some("ka")).0, 200, "alice is untouched");
    p.terminate();
}

#[test]
fn sigint_drains_and_exits_0() {
    let (_tmp, mut p) = start_default("sigint");
    assert_eq!(get(p.addr, "/", Some("ka")).0, 200);
    p.signal("INT");
    p.wait_for_log("SIGINT, draining");
    assert!(p.wait_exit().success());
    p.wait_for_log("stopped");
}

#[test]
fn a_sighup_as_soon_as_it_listens_reloads() {
    let (_tmp, mut p) = start_default("early-hup");
    // No wait for the handler (unlike `Proxy::signal`): it is installed before the
    // "listening" line is printed.
    let ok = Command::new("kill")
        .args(["-HUP", &p.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
    p.wait_for_log("SIGHUP, reloaded");
    assert_eq!(get(p.addr, "/", Some("ka")).0, 200);
    p.terminate();
}
