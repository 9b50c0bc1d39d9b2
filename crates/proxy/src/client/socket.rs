//! The byte stream the own HTTP/1.1 adapter serves, by readiness and non-blocking reads and
//! writes (so that an idle connection holds no buffer): a plaintext [`TcpStream`], or TLS
//! over one ([`super::tls::TlsSocket`]).

use std::future::{poll_fn, Future};
use std::io;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// A client connection as the own HTTP/1.1 adapter drives it.
pub(crate) trait Socket: Send + Sync {
    /// Ready when a read may find bytes or the end of the stream.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Wait until a read may find bytes or the end of the stream.
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        poll_fn(move |cx| self.poll_read_ready(cx))
    }

    /// Read what is there into `buf`'s spare room (which must not be empty), without
    /// waiting: `Ok(0)` at the end of the stream, `WouldBlock` when nothing is there.
    fn try_read(&self, buf: &mut Vec<u8>) -> io::Result<usize>;

    /// Wait until a write may take bytes.
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send;

    /// Write what the stream takes of `data` now (`WouldBlock`: nothing).
    fn try_write(&self, data: &[u8]) -> io::Result<usize>;

    /// Send what was taken but not yet sent (TLS records): `WouldBlock` while the socket
    /// is full.
    fn try_flush(&self) -> io::Result<()>;

    /// Resolves when the client has closed its connection (or it failed). Pending for
    /// ever once the client sends more (a pipelined request: read after this one).
    fn closed(&self) -> impl Future<Output = ()> + Send;

    /// End the connection: a FIN after the last response (TLS: a close_notify first).
    fn shutdown(&mut self) -> impl Future<Output = ()> + Send;
}

impl Socket for TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }

    /// A short read (fewer bytes than there was room for) drained the socket, so tokio's
    /// read readiness is cleared then, as its own `poll_read` does and `try_read_buf` does
    /// not (issue 19): the next wait for the socket to be readable (the idle wait, the
    /// client-gone check) then waits for new bytes or the client's FIN instead of returning
    /// at once and costing a read that fails with `EAGAIN`. Race-free as tokio's is: the
    /// clear is skipped if a readiness event came in after the read, the socket is
    /// edge-triggered, so bytes arriving later raise a new event, and a FIN (read-closed) is
    /// never cleared.
    fn try_read(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let room = buf.capacity() - buf.len();
        read_draining(self, room, || self.try_read_buf(buf))
    }

    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        TcpStream::writable(self)
    }

    fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, data)
    }

    fn try_flush(&self) -> io::Result<()> {
        Ok(())
    }

    /// No timer (issue 19): the request's bytes were read with [`Socket::try_read`], which
    /// leaves the socket's read readiness cleared when they drained it, so the peek waits
    /// for the client's next bytes or its FIN rather than failing with `EAGAIN` at once.
    /// Only when the last read filled the buffer is the readiness stale, and then one peek
    /// finds out.
    ///
    /// By `poll_peek`, not `peek`: a poll registers the task in the socket's own read waker
    /// slot, where `peek` (and `readable`) queue a waiter on the socket's list, locked to
    /// add it and again to remove it when the answer comes first (every request).
    async fn closed(&self) {
        let mut b = [0u8; 1];
        let peeked = poll_fn(|cx| self.poll_peek(cx, &mut tokio::io::ReadBuf::new(&mut b))).await;
        match peeked {
            Ok(0) | Err(_) => {}
            Ok(_) => std::future::pending().await,
        }
    }

    async fn shutdown(&mut self) {
        let _ = tokio::io::AsyncWriteExt::shutdown(self).await;
    }
}

/// One non-blocking read of `tcp` by `read`, into `room` bytes: a short read (fewer bytes
/// than there was room for) drained the socket, so tokio's read readiness is cleared then,
/// and the next wait for the socket to be readable waits for new bytes or the peer's FIN
/// instead of returning at once and costing a read that fails with `EAGAIN`.
pub(crate) fn read_draining(
    tcp: &TcpStream,
    room: usize,
    read: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    let mut got = None;
    let r = tcp.try_io(Interest::READABLE, || {
        let n = read()?;
        got = Some(n);
        if 0 < n && n < room {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match got {
        Some(n) => Ok(n),
        None => r,
    }
}

/// Write all of `data` (and send it: TLS records too); fails when the client accepts no
/// bytes for `send_timeout`.
pub(crate) async fn write_all(
    stream: &impl Socket,
    mut data: &[u8],
    send_timeout: Duration,
) -> io::Result<()> {
    loop {
        let r = match data.is_empty() {
            false => stream.try_write(data).map(|n| data = &data[n..]),
            true => match stream.try_flush() {
                Ok(()) => return Ok(()),
                Err(e) => Err(e),
            },
        };
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tokio::time::timeout(send_timeout, stream.writable())
                    .await
                    .map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            "client accepted no response bytes within the send timeout",
                        )
                    })??;
            }
            Err(e) => return Err(e),
        }
    }
}
