//! A WebSocket tunnel's splice on the own HTTP/1.1 adapter: after a `101`, bytes both ways
//! between the client's socket and the upstream connection (`crate::tunnel` keeps the
//! budgets; `crate::upstream::Upgraded` is the switched connection).

use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::socket::{write_all, Socket};
use crate::bounds::Stop;
use crate::upstream::Upgraded;

/// How a tunnel is bounded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Closed when no byte went either way for this long.
    pub idle: Duration,
    /// A client that takes no bytes for this long is disconnected.
    pub send_timeout: Duration,
}

/// Copy bytes both ways between the client and `up` until either side closes or fails, the
/// tunnel is idle for `limits.idle`, or the proxy stops; `pending` (what the client sent
/// after its request head) goes upstream first. Returns the bytes sent (upstream, client).
pub(crate) async fn splice<S: Socket>(
    client: &S,
    up: Upgraded,
    pending: Vec<u8>,
    limits: Limits,
    hard_stop: &mut Stop<'_>,
) -> (u64, u64) {
    let Upgraded { io, early, pass } = up;
    let (mut up_r, mut up_w) = tokio::io::split(io);
    let start = Instant::now();
    // Milliseconds since `start` of the last byte either way.
    let last = AtomicU64::new(0);
    let touch = || last.store(start.elapsed().as_millis() as u64, Relaxed);
    let (sent_up, sent_down) = (AtomicU64::new(0), AtomicU64::new(0));
    let to_up = async {
        let mut buf = pending;
        loop {
            if !buf.is_empty() {
                up_w.write_all(&buf).await?;
                up_w.flush().await?;
                sent_up.fetch_add(buf.len() as u64, Relaxed);
                touch();
                buf.clear();
            }
            if buf.capacity() < 1024 {
                buf.reserve(16 * 1024);
            }
            client.readable().await?;
            match client.try_read(&mut buf) {
                Ok(0) => return io::Result::Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    };
    let to_client = async {
        let mut buf = early;
        loop {
            if !buf.is_empty() {
                write_all(client, &buf, limits.send_timeout).await?;
                sent_down.fetch_add(buf.len() as u64, Relaxed);
                touch();
                buf.clear();
            }
            if buf.capacity() < 1024 {
                buf.reserve(16 * 1024);
            }
            if up_r.read_buf(&mut buf).await? == 0 {
                return io::Result::Ok(());
            }
        }
    };
    let idle = async {
        loop {
            let since = Duration::from_millis(last.load(Relaxed));
            let due = start + since + limits.idle;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due.into()).await;
        }
    };
    tokio::select! {
        _ = to_up => {}
        _ = to_client => {}
        _ = idle => {}
        _ = poll_fn(|cx| hard_stop.poll_stopped(cx)) => {}
    }
    drop(pass);
    (sent_up.load(Relaxed), sent_down.load(Relaxed))
}
