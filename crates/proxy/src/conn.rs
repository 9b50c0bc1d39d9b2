//! Client connections: how many may be open (in total and per client address), which one
//! is closed first when the cap is reached (the one idle the longest), and the socket
//! wrapper that enforces the idle and send timeouts. Issue 16: idle floods, slow-loris
//! clients and clients that never read must not lock anyone else out.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, Release},
};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Sleep;

/// One open client connection, as the [`ConnTable`] sees it.
#[derive(Debug)]
pub(crate) struct ConnState {
    id: u64,
    ip: IpAddr,
    /// Requests in progress on it (HTTP/2 may have several).
    active: AtomicUsize,
    /// When it last became idle, in ms since the table's epoch (for "idle the longest").
    idle_since: AtomicU64,
    epoch: Instant,
    /// Woken when the table evicts it: the connection task drops the connection.
    pub evict: Notify,
    /// Set just before `evict` is notified (what a connection's [`crate::bounds::Stop`]
    /// reads on each poll instead of polling its registered `evict` waiter).
    pub evicted: AtomicBool,
}

impl ConnState {
    /// Evict it: its task drops the connection (`notify_one` keeps the wake-up if the task
    /// is not waiting yet).
    fn evict(&self) {
        self.evicted.store(true, Release);
        self.evict.notify_one();
    }

    /// Whether a request is in progress.
    fn is_idle(&self) -> bool {
        self.active.load(Relaxed) == 0
    }
}

/// Marks a request in progress on a connection while it lives (from the service call until
/// the response body has been written or dropped).
#[derive(Debug)]
pub(crate) struct ActiveGuard(Arc<ConnState>);

impl ActiveGuard {
    pub fn new(state: Arc<ConnState>) -> Self {
        state.active.fetch_add(1, Relaxed);
        ActiveGuard(state)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let s = &self.0;
        s.idle_since
            .store(s.epoch.elapsed().as_millis() as u64, Relaxed);
        s.active.fetch_sub(1, Relaxed);
    }
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    conns: HashMap<u64, Arc<ConnState>>,
    per_ip: HashMap<IpAddr, usize>,
}

/// The open connections of one listener and its caps.
#[derive(Debug)]
pub(crate) struct ConnTable {
    open: Mutex<Open>,
    epoch: Instant,
    /// Cap on open connections.
    pub max: AtomicUsize,
    /// Cap per client address (0 = none).
    pub max_per_ip: AtomicUsize,
    /// Connections closed at once because a cap was reached and none was idle.
    pub refused: AtomicU64,
    /// Idle connections closed to make room for a new one.
    pub evicted: AtomicU64,
    /// `accept` calls that failed (EMFILE, ENFILE, …).
    pub accept_errors: AtomicU64,
    /// Connections closed by the idle timeout.
    pub idle_closed: AtomicU64,
}

impl ConnTable {
    pub fn new(max: usize, max_per_ip: usize) -> Self {
        ConnTable {
            open: Mutex::new(Open::default()),
            epoch: Instant::now(),
            max: AtomicUsize::new(max.max(1)),
            max_per_ip: AtomicUsize::new(max_per_ip),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
        }
    }

    /// Close every connection with no request in progress for at least `idle` (since it
    /// opened or its last request ended): idle keep-alive connections, connections that
    /// never sent a request, slow-loris heads. Run periodically by [`sweeper`].
    pub fn sweep(&self, idle: Duration) -> usize {
        let now = self.epoch.elapsed().as_millis() as u64;
        let idle = idle.as_millis() as u64;
        let mut o = self.lock();
        let stale: Vec<_> = o
            .conns
            .values()
            .filter(|c| c.is_idle() && now.saturating_sub(c.idle_since.load(Relaxed)) >= idle)
            .cloned()
            .collect();
        for c in &stale {
            Self::forget(&mut o, c);
            c.evict();
        }
        self.idle_closed.fetch_add(stale.len() as u64, Relaxed);
        stale.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().conns.len()
    }

    /// Register a new connection from `ip`, closing the connection idle the longest if the
    /// total cap is reached. `None`: refuse it (per-address cap, or nothing idle to close).
    pub fn admit(&self, ip: IpAddr) -> Option<Arc<ConnState>> {
        let mut o = self.lock();
        let per_ip = self.max_per_ip.load(Relaxed);
        if per_ip > 0 && o.per_ip.get(&ip).copied().unwrap_or(0) >= per_ip {
            drop(o);
            self.refused.fetch_add(1, Relaxed);
            return None;
        }
        if o.conns.len() >= self.max.load(Relaxed) && !self.evict_locked(&mut o) {
            drop(o);
            self.refused.fetch_add(1, Relaxed);
            return None;
        }
        o.next_id += 1;
        let state = Arc::new(ConnState {
            id: o.next_id,
            ip,
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
            epoch: self.epoch,
            evict: Notify::new(),
            evicted: AtomicBool::new(false),
        });
        o.conns.insert(state.id, state.clone());
        *o.per_ip.entry(ip).or_insert(0) += 1;
        Some(state)
    }

    /// An `accept` on this table's listener (`what`, its config field) failed: count it,
    /// close the connection idle the longest if out of file descriptors, log at most once a
    /// second, and return how long to back off.
    pub fn accept_failed(
        &self,
        backoff: &mut AcceptBackoff,
        what: &str,
        e: &io::Error,
    ) -> Duration {
        self.accept_errors.fetch_add(1, Relaxed);
        if out_of_fds(e) {
            self.evict_idle();
        }
        backoff.failed(what, e)
    }

    /// Close the connection idle the longest, if any (used when out of file descriptors).
    pub fn evict_idle(&self) -> bool {
        let mut o = self.lock();
        self.evict_locked(&mut o)
    }

    fn evict_locked(&self, o: &mut Open) -> bool {
        let victim = o
            .conns
            .values()
            .filter(|c| c.is_idle())
            .min_by_key(|c| (c.idle_since.load(Relaxed), c.id))
            .cloned();
        let Some(v) = victim else { return false };
        Self::forget(o, &v);
        v.evict();
        self.evicted.fetch_add(1, Relaxed);
        true
    }

    fn forget(o: &mut Open, state: &ConnState) {
        if o.conns.remove(&state.id).is_some() {
            if let Some(n) = o.per_ip.get_mut(&state.ip) {
                *n -= 1;
                if *n == 0 {
                    o.per_ip.remove(&state.ip);
                }
            }
        }
    }

    /// The connection ended (idempotent; an evicted one was already forgotten).
    pub fn remove(&self, state: &ConnState) {
        Self::forget(&mut self.lock(), state);
    }
}

/// Sweep `table` for idle connections every quarter of the idle timeout (at most every
/// second); `idle` is read each time, so a reload takes effect.
pub(crate) async fn sweeper(table: &ConnTable, idle: impl Fn() -> Duration) {
    loop {
        let d = idle();
        tokio::time::sleep((d / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))).await;
        table.sweep(idle());
    }
}

/// Logs a repeated failure at most once a second, with how many were suppressed, and
/// backs off exponentially (10 ms → 100 ms) while it keeps failing.
#[derive(Debug)]
pub(crate) struct AcceptBackoff {
    last_log: Option<Instant>,
    suppressed: u64,
    delay: Duration,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        AcceptBackoff {
            last_log: None,
            suppressed: 0,
            delay: Self::MIN,
        }
    }
}

impl AcceptBackoff {
    const MIN: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_millis(100);

    /// An accept succeeded: the next failure starts from the shortest delay.
    pub fn reset(&mut self) {
        self.delay = Self::MIN;
    }

    /// An accept failed: log (rate-limited) and return how long to wait.
    pub fn failed(&mut self, what: &str, e: &io::Error) -> Duration {
        let now = Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            let more = if self.suppressed > 0 {
                format!(" ({} more since the last report)", self.suppressed)
            } else {
                String::new()
            };
            eprintln!(
                "fairlane-proxy: {what}: accept failed: {e}{more}; backing off up to {} ms",
                Self::MAX.as_millis()
            );
            self.last_log = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        let d = self.delay;
        self.delay = (self.delay * 2).min(Self::MAX);
        d
    }
}

/// Whether an accept error means the process or system is out of file descriptors.
pub(crate) fn out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// A client socket with a send deadline: a client that accepts no response bytes for
/// `send` (it does not read) fails the write with `TimedOut`, which ends the connection and
/// frees whatever it held. (Idle connections are closed by [`ConnTable::sweep`], which costs
/// nothing per request.)
pub(crate) struct ClientIo<T = TcpStream> {
    io: T,
    send: Duration,
    write_timer: Option<Pin<Box<Sleep>>>,
    write_armed: bool,
}

impl<T> ClientIo<T> {
    pub fn new(io: T, send: Duration) -> Self {
        ClientIo {
            io,
            send,
            write_timer: None,
            write_armed: false,
        }
    }
}

/// Arm `timer` for `after` from now unless it is armed already; true when it has fired.
fn expired(
    timer: &mut Option<Pin<Box<Sleep>>>,
    armed: &mut bool,
    after: Duration,
    cx: &mut Context<'_>,
) -> bool {
    if !*armed {
        let deadline = tokio::time::Instant::now() + after;
        match timer {
            Some(t) => t.as_mut().reset(deadline),
            None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        *armed = true;
    }
    timer
        .as_mut()
        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

use std::future::Future;

impl<T: AsyncRead + Unpin> AsyncRead for ClientIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T> ClientIo<T> {
    fn write_result<R>(
        &mut self,
        r: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        match r {
            Poll::Pending => {
                if expired(&mut self.write_timer, &mut self.write_armed, self.send, cx) {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "client accepted no response bytes within the send timeout",
                    )));
                }
                Poll::Pending
            }
            r => {
                self.write_armed = false;
                r
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ClientIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.io).poll_write(cx, buf);
        me.write_result(r, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.io).poll_write_vectored(cx, bufs);
        me.write_result(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.io).poll_flush(cx);
        me.write_result(r, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// Two connections admitted to `t`, the first busy: (a, b, a's guard).
    fn busy_and_idle(t: &ConnTable) -> (Arc<ConnState>, Arc<ConnState>, ActiveGuard) {
        let a = t.admit(ip(1)).unwrap();
        let b = t.admit(ip(2)).unwrap();
        let busy = ActiveGuard::new(a.clone());
        (a, b, busy)
    }

    #[test]
    fn the_connection_idle_longest_makes_room() {
        let t = ConnTable::new(2, 0);
        let (_, b, busy) = busy_and_idle(&t);
        // a is busy, b idle: b goes.
        let c = t.admit(ip(3)).expect("room made by closing an idle one");
        assert_eq!(t.len(), 2);
        assert_eq!(t.evicted.load(Relaxed), 1);
        t.remove(&b); // its task ends later: no double count
        assert_eq!(t.len(), 2);
        // Both busy → refused.
        let _c_busy = ActiveGuard::new(c.clone());
        assert!(t.admit(ip(4)).is_none(), "nothing idle: refused");
        assert_eq!(t.refused.load(Relaxed), 1);
        drop(busy);
        assert!(t.admit(ip(5)).is_some(), "a became idle and made room");
        assert_eq!(t.evicted.load(Relaxed), 2);
    }

    #[test]
    fn sweep_closes_only_idle_connections() {
        let t = ConnTable::new(10, 0);
        let (_a, b, _busy) = busy_and_idle(&t);
        assert_eq!(
            t.sweep(Duration::from_secs(3600)),
            0,
            "nothing idle that long"
        );
        assert_eq!(t.sweep(Duration::ZERO), 1, "b is idle, a is busy");
        assert_eq!(t.len(), 1);
        assert_eq!(t.idle_closed.load(Relaxed), 1);
        t.remove(&b);
        assert_eq!(t.len(), 1, "a stays");
    }

    #[test]
    fn per_address_cap() {
        let t = ConnTable::new(100, 2);
        let a1 = t.admit(ip(1)).unwrap();
        let _a2 = t.admit(ip(1)).unwrap();
        assert!(t.admit(ip(1)).is_none());
        assert!(t.admit(ip(2)).is_some(), "other addresses are unaffected");
        t.remove(&a1);
        assert!(
            t.admit(ip(1)).is_some(),
            "a closed connection frees its place"
        );
    }

    #[test]
    fn backoff_grows_to_its_cap_and_resets() {
        let mut b = AcceptBackoff::default();
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(out_of_fds(&e));
        let delays: Vec<_> = (0..6).map(|_| b.failed("test", &e)).collect();
        assert_eq!(delays[0], Duration::from_millis(10));
        assert_eq!(delays[5], Duration::from_millis(100));
        assert_eq!(
            b.suppressed, 5,
            "one log line for six failures within a second"
        );
        b.reset();
        assert_eq!(b.failed("test", &e), Duration::from_millis(10));
    }
}
