//! A logged-in client's life: wait for a message that needs the server, get a seat from the
//! scheduler and a connection from the pools, relay until the transaction (transaction
//! mode) or the session (session mode) ends, measure the backend's CPU, hand both back.
//! Nothing is lost or leaked: a client that leaves mid-transaction has it rolled back (or
//! the connection closed) before the connection is reused; a server connection that fails
//! is dropped and its client told (SQLSTATE 08006), never left hanging.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use crate::config::Mode;
use crate::handoff::{Parking, Started, Waited, Waiter};
use crate::login::Client;
use crate::pool::Leased;
use crate::relay::{Relay, Step};
use crate::sched::{Joined, QueueTimer, Refusal, Seat};
use crate::server::{ConnectError, ServerConn};
use crate::wire::{self, Severity};
use crate::Shared;

/// The SQLSTATE and message of a refused seat.
pub fn refusal_error(r: &Refusal) -> (String, String) {
    match r {
        Refusal::Full(why) => (
            "53300".into(),
            format!("too many transactions waiting: {why}"),
        ),
        Refusal::Timeout(t) => (
            "57014".into(),
            format!(
                "canceling statement: no server connection within limits.queue_timeout_ms = {} ms",
                t.as_millis()
            ),
        ),
        Refusal::Closed => ("57P01".into(), "the pooler is shutting down".into()),
        Refusal::Internal(why) => ("XX000".into(), format!("the scheduler refused: {why}")),
    }
}

/// The SQLSTATE and message of a failed server login.
pub fn connect_error(e: &ConnectError) -> (String, String) {
    match e {
        ConnectError::Refused { code, message } => (code.clone(), message.clone()),
        ConnectError::Io(e) => ("08006".into(), format!("cannot connect to the server: {e}")),
    }
}

/// How a relay ended.
#[derive(Debug)]
pub enum End {
    /// The transaction ended idle (transaction mode): the connection goes back.
    Idle,
    /// The client left (Terminate, closed, or a protocol violation already answered).
    ClientGone,
    /// The server connection failed.
    ServerGone(io::Error),
}

/// Serve a logged-in client until it leaves.
pub async fn run(shared: &Arc<Shared>, client: Client) {
    // One relay for the client's life: its buffers are reused from transaction to
    // transaction. Boxed with the client: a wait parks both.
    let mut waiter = Box::new(Waiter {
        client,
        relay: Relay::default(),
    });
    // And one queue timer.
    let mut timer = QueueTimer::new();
    // And one parking, where a releaser can start its transactions (transaction mode).
    let transaction = shared.config.pool.mode == Mode::Transaction;
    let parking = Parking::new(transaction.then_some(&shared.handoffs));
    loop {
        let client = &mut waiter.client;
        // The transaction's first message stays in the client's buffer, where the relay
        // reads it.
        let (tag, len) = match client.frames.peek_from(&client.stream).await {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => return violation(client, &e).await,
        };
        match tag {
            b'X' => return,
            // Nothing to synchronize without a server connection.
            b'S' => {
                client.frames.consume(len);
                let mut out = BytesMut::new();
                wire::ready(&mut out, b'I');
                if wire::send(&client.stream, &out).await.is_err() {
                    return;
                }
                continue;
            }
            b'H' => {
                client.frames.consume(len);
                continue;
            }
            b'Q' | b'F' | b'P' | b'B' | b'D' | b'E' | b'C' => {}
            t => {
                let e = wire::invalid(format!("unexpected message type {:?}", t as char));
                return violation(client, &e).await;
            }
        }
        let got;
        (waiter, got) = get_seat(shared, &parking, &mut timer, waiter).await;
        let Waiter { client, relay } = &mut *waiter;
        let (seat, started) = match got {
            Ok(got) => got,
            Err(r) => {
                if Box::pin(refuse(client, (tag, len), refusal_error(&r)))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        };
        if let Some((leased, first)) = started {
            if !serve(shared, client, relay, seat, leased, Some(first)).await {
                return;
            }
            continue;
        }
        let password = || {
            shared
                .config
                .auth
                .password(&client.key.1)
                .unwrap_or_default()
        };
        let leased = match shared
            .pools
            .checkout((client.pool, &client.key), password, &client.state.params)
            .await
        {
            Ok(l) => l,
            Err(e) => {
                seat.finish(None, Instant::now());
                if Box::pin(refuse(client, (tag, len), connect_error(&e)))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        };
        if !serve(shared, client, relay, seat, leased, None).await {
            return;
        }
    }
}

/// A seat, and the holding a releaser started with it, if one did.
type Got<'s> = (Seat<'s>, Option<(Leased<'s>, Result<(), End>)>);

/// A seat for the client's transaction: at once, or after a wait in `parking` (and its
/// waker), where a releaser may start the holding. The client and its relay come back
/// whatever the answer.
async fn get_seat<'s>(
    shared: &'s Shared,
    (parking, waker): &(Arc<Parking>, Waker),
    timer: &mut QueueTimer,
    waiter: Box<Waiter>,
) -> (Box<Waiter>, Result<Got<'s>, Refusal>) {
    let acquire = match shared.sched.join(waiter.client.tenant, timer, waker) {
        Ok(Joined::Seat(s)) => return (waiter, Ok((s, None))),
        Ok(Joined::Queued(a)) => a,
        Err(r) => return (waiter, Err(r)),
    };
    match parking
        .wait(waker, timer, &shared.pools, (acquire, waiter))
        .await
    {
        Waited::Own { waiter, result } => {
            let got = shared.sched.waited(waiter.client.tenant, result);
            (waiter, got.map(|seat| (seat, None)))
        }
        Waited::Started(s) => {
            let got = shared
                .sched
                .waited(s.waiter.client.tenant, Some(Ok(s.permit)));
            let started = (shared.pools.lease(s.conn), s.first);
            (s.waiter, got.map(|seat| (seat, Some(started))))
        }
    }
}

/// One holding of a server connection; whether the client stays. `first`: how its start
/// went, if a releaser did it ([`begin`]).
async fn serve(
    shared: &Arc<Shared>,
    client: &mut Client,
    relay: &mut Relay,
    seat: Seat<'_>,
    mut leased: Leased<'_>,
    first: Option<Result<(), End>>,
) -> bool {
    let conn = leased.conn();
    let session = shared.config.pool.mode == Mode::Session;
    let first = match first {
        Some(f) => f,
        None => begin(client, conn, relay).await,
    };
    let end = match first {
        Ok(()) => relay_loop(client, conn, relay, session).await,
        Err(end) => end,
    };
    let stays = match end {
        End::Idle => true,
        End::ClientGone => {
            // Boxed, as the other cold paths: they stay out of every transaction's future.
            if !Box::pin(reset(conn, relay, &mut client.state, session)).await {
                conn.broken = true;
            }
            false
        }
        End::ServerGone(e) => {
            conn.broken = true;
            let mut out = std::mem::take(&mut relay.to_client);
            wire::error(
                &mut out,
                Severity::Fatal,
                "08006",
                &format!("the server connection failed: {e}"),
            );
            let _ = client.stream.write_all(&out).await;
            false
        }
    };
    set_cancel(client, None);
    let cpu = conn.cpu_since_mark();
    // One clock reading for both: the connection's idle time and the seat's end.
    let now = Instant::now();
    shared.pools.checkin(leased, now).await;
    seat.finish(cpu, now);
    if !session {
        hand_over(shared).await;
    }
    stays
}

/// Start the holdings of the waiters the gate granted (the seat just released, usually):
/// on an idle connection of each one's pool, the one just checked in if it is the same.
async fn hand_over(shared: &Shared) {
    while let Some(p) = shared.handoffs.next() {
        let Some((permit, mut waiter, mut conn)) = p.take(&shared.pools) else {
            continue;
        };
        let Waiter { client, relay } = &mut *waiter;
        let first = begin(client, &mut conn, relay).await;
        p.hand(
            &shared.handoffs,
            Started {
                permit,
                waiter,
                conn,
                first,
            },
        );
    }
}

/// Start a holding of `conn`: the client's cancel key maps to it, the relay starts afresh,
/// the parameters are brought in line and the client's buffered messages are sent.
async fn begin(client: &mut Client, conn: &mut ServerConn, relay: &mut Relay) -> Result<(), End> {
    set_cancel(client, Some((conn.pid, conn.secret)));
    relay.reset();
    relay.sync_params(&client.state, &mut conn.session);
    forward(client, conn, relay).await
}

fn set_cancel(client: &Client, to: Option<(i32, i32)>) {
    client.cancel.set(to);
}

/// [`wire::send`], whose future is made only when the socket does not take everything at
/// once (the relay's every message otherwise).
macro_rules! send {
    ($socket:expr, $bytes:expr) => {{
        let (socket, bytes): (&tokio::net::TcpStream, &[u8]) = ($socket, $bytes);
        match wire::send_now(socket, bytes) {
            Ok(at) if at == bytes.len() => Ok(()),
            Ok(at) => wire::send(socket, &bytes[at..]).await,
            Err(e) => Err(e),
        }
    }};
}

/// Relay until the connection may go back (transaction mode) or one side is gone. The
/// two sockets are driven directly, below tokio's read and write futures: each is read
/// once the runtime has seen it readable (one `recvfrom` that takes all that is
/// buffered), and written straight away (awaiting writability only when its send buffer
/// is full). Messages are read where they lie in each side's buffer; the client's that
/// asked for the connection were sent already ([`begin`]).
async fn relay_loop(
    client: &mut Client,
    conn: &mut ServerConn,
    relay: &mut Relay,
    session: bool,
) -> End {
    loop {
        if !relay.to_client.is_empty() {
            if send!(&client.stream, &relay.to_client).is_err() {
                return End::ClientGone;
            }
            relay.to_client.clear();
        }
        if !session && relay.idle() && !client.frames.has_partial() {
            return End::Idle;
        }
        let side = match readable(conn, client).await {
            Ok(side) => side,
            Err(end) => return end,
        };
        // The server first: what the client waits for.
        if matches!(side, Side::Server | Side::Either) {
            match conn.frames.try_fill(&conn.stream) {
                Ok(Some(0)) => return End::ServerGone(io::ErrorKind::UnexpectedEof.into()),
                // Nothing read after a wake: the client's socket, if either.
                Ok(None) if matches!(side, Side::Either) => {}
                Ok(_) => match server_messages(client, conn, relay) {
                    Ok((used, span)) => {
                        let sent = span.is_empty()
                            || send!(&client.stream, &conn.frames.bytes()[span]).is_ok();
                        conn.frames.consume(used);
                        if !sent {
                            return End::ClientGone;
                        }
                        continue;
                    }
                    Err(e) => return End::ServerGone(e),
                },
                Err(e) => return End::ServerGone(e),
            }
        }
        match client.frames.try_fill(&client.stream) {
            Ok(Some(0)) | Err(_) => return End::ClientGone,
            // A wake with nothing to read on either side: wait again.
            Ok(None) if matches!(side, Side::Either) => {}
            Ok(_) => {
                if let Err(end) = forward(client, conn, relay).await {
                    return end;
                }
            }
        }
    }
}

/// Wait until a socket is readable: at once if the runtime has seen one so (the server
/// first), else until the task is woken, which is taken for "either" without asking the
/// runtime again (the reads that follow ask, without a system call for a socket that is
/// not readable).
async fn readable(conn: &ServerConn, client: &Client) -> Result<Side, End> {
    let mut registered = false;
    std::future::poll_fn(|cx| {
        if registered {
            return Poll::Ready(Ok(Side::Either));
        }
        if let Poll::Ready(r) = conn.stream.poll_read_ready(cx) {
            return Poll::Ready(r.map(|()| Side::Server).map_err(End::ServerGone));
        }
        registered = true;
        client
            .stream
            .poll_read_ready(cx)
            .map(|r| r.map(|()| Side::Client).map_err(|_| End::ClientGone))
    })
    .await
}

/// Relay the client's complete buffered messages to the server.
async fn forward(client: &mut Client, conn: &mut ServerConn, relay: &mut Relay) -> Result<(), End> {
    if let Err(e) = client_messages(client, conn, relay) {
        if let Some(e) = e {
            violation(client, &e).await;
        }
        return Err(End::ClientGone);
    }
    if !relay.to_server.is_empty() {
        send!(&conn.stream, &relay.to_server).map_err(End::ServerGone)?;
        relay.to_server.clear();
    }
    Ok(())
}

/// Relay the client's complete buffered messages, where they lie. `Err(Some(_))`: a
/// protocol violation; `Err(None)`: Terminate.
fn client_messages(
    client: &mut Client,
    conn: &mut ServerConn,
    relay: &mut Relay,
) -> Result<(), Option<io::Error>> {
    let mut off = 0;
    let r = loop {
        let n = match client.frames.len_at(off) {
            Ok(Some(n)) => n,
            Ok(None) => break Ok(()),
            Err(e) => break Err(Some(e)),
        };
        let m = &client.frames.bytes()[off..off + n];
        off += n;
        match relay.client(m, &mut client.state, &mut conn.session) {
            Ok(Step::More) => {}
            Ok(Step::Terminate) => break Err(None),
            Err(e) => break Err(Some(e)),
        }
    };
    client.frames.consume(off);
    r
}

/// Relay the server's complete buffered messages, where they lie: how many bytes they
/// take (to consume once sent), and the span of them that goes to the client as it is,
/// straight from the read buffer (what could not, because the relay hid or answered
/// something in between, is copied to `relay.to_client`, and the span is then empty).
fn server_messages(
    client: &mut Client,
    conn: &mut ServerConn,
    relay: &mut Relay,
) -> io::Result<(usize, Range<usize>)> {
    let (mut off, mut span) = (0, 0..0);
    loop {
        let Some(n) = conn.frames.len_at(off)? else {
            return Ok((off, span));
        };
        let bytes = conn.frames.bytes();
        let m = off..off + n;
        if relay.server_pass(&bytes[m.clone()], &mut client.state, &mut conn.session) {
            if relay.to_client.is_empty() && (span.is_empty() || span.end == m.start) {
                span = if span.is_empty() {
                    m
                } else {
                    span.start..m.end
                };
            } else {
                flush(&mut relay.to_client, &mut span, bytes);
                relay.to_client.extend_from_slice(&bytes[m]);
            }
        }
        if relay.synth_due() {
            flush(&mut relay.to_client, &mut span, bytes);
            relay.drain_synth();
        }
        off += n;
    }
}

/// Copy a span of passed messages to `out` (something else is written behind them).
fn flush(out: &mut BytesMut, span: &mut Range<usize>, bytes: &[u8]) {
    if span.start < span.end {
        out.extend_from_slice(&bytes[span.clone()]);
        *span = 0..0;
    }
}

/// Which socket is readable.
enum Side {
    Server,
    Client,
    /// Either, or neither (the task was woken).
    Either,
}

/// The client is gone while holding `conn`: finish what is outstanding, roll back an open
/// transaction (and `DISCARD ALL` in session mode). Whether the connection is clean.
async fn reset(
    conn: &mut ServerConn,
    relay: &mut Relay,
    state: &mut crate::relay::ClientState,
    session: bool,
) -> bool {
    if relay.copy_in {
        return false;
    }
    if !relay.synced() {
        relay.add_sync();
    }
    if conn.stream.write_all(&relay.to_server).await.is_err() {
        return false;
    }
    relay.to_server.clear();
    let drained = tokio::time::timeout(Duration::from_secs(2), async {
        while relay.outstanding() {
            match conn.frames.next(&mut conn.stream).await {
                Ok(Some(m)) => {
                    relay.server(&m, state, &mut conn.session);
                    relay.to_client.clear();
                }
                _ => return false,
            }
        }
        true
    })
    .await;
    if drained != Ok(true) || relay.copy_in {
        return false;
    }
    let timeout = Duration::from_secs(5);
    if relay.status != b'I'
        && !matches!(
            tokio::time::timeout(timeout, conn.exec("ROLLBACK")).await,
            Ok(Ok(b'I'))
        )
    {
        return false;
    }
    if session {
        if !matches!(
            tokio::time::timeout(timeout, conn.exec("DISCARD ALL")).await,
            Ok(Ok(b'I'))
        ) {
            return false;
        }
        conn.session.prepared.clear();
        // DISCARD ALL went back to the session's start-up values; the reported ones came
        // back as ParameterStatus, the others must be set again.
        conn.session.forget_param("extra_float_digits");
    }
    true
}

/// Answer a message that got no server connection with an error, as PostgreSQL would: a
/// simple query gets ReadyForQuery at once, an extended-protocol batch after its Sync.
/// `first` is the buffered message's tag and length.
async fn refuse(
    client: &mut Client,
    (tag, len): (u8, usize),
    (code, message): (String, String),
) -> io::Result<()> {
    client.frames.consume(len);
    let mut out = BytesMut::new();
    wire::error(&mut out, Severity::Error, &code, &message);
    client.stream.write_all(&out).await?;
    out.clear();
    if !matches!(tag, b'Q' | b'F') {
        loop {
            match client.frames.next(&mut client.stream).await? {
                Some(m) if m[0] == b'S' => break,
                Some(m) if m[0] == b'X' => return Err(io::ErrorKind::UnexpectedEof.into()),
                Some(_) => {}
                None => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
        }
    }
    wire::ready(&mut out, b'I');
    client.stream.write_all(&out).await
}

/// A protocol violation: tell the client (FATAL 08P01) and end its session.
async fn violation(client: &mut Client, e: &io::Error) {
    eprintln!(
        "fairlane pg: closing a client of {:?}: protocol violation: {e}",
        client.key
    );
    let mut out = BytesMut::new();
    wire::error(
        &mut out,
        Severity::Fatal,
        "08P01",
        &format!("protocol violation: {e}"),
    );
    let _ = client.stream.write_all(&out).await;
}
