//! Memory per client connection (issue 19 target 3; `scripts/bench-proxy-conns.sh`).
//!
//! ```text
//! connmem <proxy addr> <proxy pid> <connections> idle|queued <path> [key] [admin addr] [hold s]
//! ```
//! Reads the proxy's memory from `/proc/<pid>` (VmRSS, and Private_Dirty from
//! `smaps_rollup`), then opens `connections` HTTP/1.1 keep-alive connections to it and holds
//! them all open at once:
//!
//! * `idle`: each sends one request, reads the whole answer and then stays open, idle;
//! * `queued`: each sends one request and reads nothing (run the proxy with a small depth in
//!   front of a slow `path`, so all but `depth` of the requests wait in the gate).
//!
//! Then it reads the proxy's memory again (after the proxy's `/status`, when an admin
//! address is given, shows the connections and queue settled) and prints one line: the
//! memory before and at N, and (at N − before) / N per connection; with `hold`, the same again
//! after holding the connections that many seconds more (an allocator that returns freed
//! pages after a delay, like jemalloc's 10 s decay, shows its steady state there). Raw sockets, not hyper:
//! nothing on this side changes what the proxy holds per connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// VmRSS and Private_Dirty of a process, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let field = |file: &str, name: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/{file}: {e}"))
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("/proc/{pid}/{file}: no {name}"))
    };
    (
        field("status", "VmRSS:"),
        field("smaps_rollup", "Private_Dirty:"),
    )
}

/// One request, written in full.
async fn send(s: &mut TcpStream, req: &[u8]) -> std::io::Result<()> {
    s.write_all(req).await
}

/// Read one whole response (headers and a `Content-Length` body); returns its status.
async fn read_response(s: &mut TcpStream) -> std::io::Result<u16> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + len {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        return Ok(status);
    }
}

/// The proxy's `/status` numbers: (connections, queued).
async fn status(admin: SocketAddr) -> Option<(u64, u64)> {
    let mut s = TcpStream::connect(admin).await.ok()?;
    s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    let num = |name: &str| -> Option<u64> {
        let at = body.find(&format!("\"{name}\":"))? + name.len() + 3;
        let digits: String = body[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    Some((num("connections")?, num("queued")?))
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 5 || !matches!(a[3].as_str(), "idle" | "queued") {
        eprintln!(
            "usage: connmem <proxy addr> <proxy pid> <connections> idle|queued <path> [key] [admin addr] [hold s]"
        );
        std::process::exit(2);
    }
    let addr: SocketAddr = a[0].parse().expect("proxy addr as ip:port");
    let pid: u32 = a[1].parse().expect("proxy pid");
    let n: usize = a[2].parse().expect("connections");
    let queued = a[3] == "queued";
    let key = a.get(5).filter(|k| !k.is_empty());
    let admin: Option<SocketAddr> = a
        .get(6)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("admin addr"));
    let hold: f64 = a.get(7).map_or(0.0, |s| s.parse().expect("hold seconds"));
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {addr}\r\n{}\r\n",
        a[4],
        key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"))
    )
    .into_bytes();
    fairlane_proxy::server::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let before = memory(pid);
        let started = Instant::now();
        let mut conns = Vec::with_capacity(n);
        let mut bad = 0usize;
        // Open in batches so the listen backlog never overflows.
        for batch in (0..n).collect::<Vec<_>>().chunks(200) {
            let mut tasks = Vec::new();
            for _ in batch {
                let req = req.clone();
                tasks.push(tokio::spawn(async move {
                    let mut s = TcpStream::connect(addr).await?;
                    send(&mut s, &req).await?;
                    if !queued {
                        let st = read_response(&mut s).await?;
                        if st != 200 {
                            return Err(std::io::Error::other(format!("status {st}")));
                        }
                    }
                    Ok::<_, std::io::Error>(s)
                }));
            }
            for t in tasks {
                match t.await.expect("task") {
                    Ok(s) => conns.push(s),
                    Err(e) => {
                        if bad == 0 {
                            eprintln!("connmem: first failure: {e}");
                        }
                        bad += 1;
                    }
                }
            }
        }
        // Let the proxy take every request in (queued mode: the last ones may still be on
        // their way into the gate): wait until /status shows every connection and the same
        // numbers twice in a row.
        let mut seen = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let Some(adm) = admin else {
                if started.elapsed() > Duration::from_secs(2) {
                    break;
                }
                continue;
            };
            let now = status(adm).await;
            if now.is_some_and(|(c, _)| c as usize >= conns.len()) && now == seen {
                break;
            }
            seen = now;
        }
        let held = conns.len();
        let line = |what: &str, seen: Option<(u64, u64)>, at: (u64, u64)| {
            let per = |b: u64, a: u64| (a as f64 - b as f64) / held.max(1) as f64;
            println!(
                "{} N={held} (failed {bad}) {what}, proxy status: {} | VmRSS {} -> {} KiB = {:.2} KiB/conn | Private_Dirty {} -> {} KiB = {:.2} KiB/conn",
                a[3],
                seen.map_or("-".into(), |(c, q)| format!("connections {c} queued {q}")),
                before.0,
                at.0,
                per(before.0, at.0),
                before.1,
                at.1,
                per(before.1, at.1),
            );
        };
        line("settled", seen, memory(pid));
        if hold > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(hold)).await;
            if let Some(adm) = admin {
                seen = status(adm).await;
            }
            line(&format!("after {hold} s more"), seen, memory(pid));
        }
        drop(conns);
    });
}
