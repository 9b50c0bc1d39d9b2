//! TLS client connections: the handshake (within the header timeout, the ALPN choice and the
//! client certificate's names), and [`TlsSocket`], TLS over a [`TcpStream`] as the own
//! HTTP/1.1 adapter drives it — by readiness and non-blocking reads and writes, as on a
//! plaintext socket, with rustls holding the records in between.

use std::io::{self, BufRead, Read, Write};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ServerConnection;
use tokio::net::TcpStream;

use super::socket::{read_draining, Socket};

/// TLS over a client's TCP connection, after the handshake.
pub(crate) struct TlsSocket {
    tcp: TcpStream,
    /// Never held across an await; the adapter uses a connection from one task.
    tls: Mutex<ServerConnection>,
}

/// The TCP socket as rustls reads and writes it: non-blocking, `WouldBlock` when not ready.
/// A read that drains the socket clears tokio's read readiness as the plaintext socket's
/// does ([`read_draining`]), so the client-gone watch that runs while the upstream answers
/// waits for new bytes instead of costing a read that fails with `EAGAIN`.
struct Raw<'a>(&'a TcpStream);

impl Read for Raw<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = buf.len();
        read_draining(self.0, room, || self.0.try_read(buf))
    }
}

impl Write for Raw<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsSocket {
    /// The connection a finished handshake left (`tokio_rustls`' stream taken apart).
    pub fn new((tcp, tls): (TcpStream, ServerConnection)) -> TlsSocket {
        TlsSocket {
            tcp,
            tls: Mutex::new(tls),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ServerConnection> {
        self.tls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read the records the socket has and process them: `Ok(false)` at its end.
    fn pull(&self, tls: &mut ServerConnection) -> io::Result<bool> {
        if tls.read_tls(&mut Raw(&self.tcp))? == 0 {
            return Ok(false);
        }
        let processed = tls.process_new_packets();
        // Whatever the records asked for (an alert, a key update) goes out now if it can.
        let _ = self.push(tls);
        processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(true)
    }

    /// Send the records rustls holds: `WouldBlock` while the socket is full.
    fn push(&self, tls: &mut ServerConnection) -> io::Result<()> {
        while tls.wants_write() {
            tls.write_tls(&mut Raw(&self.tcp))?;
        }
        Ok(())
    }

    /// What rustls holds for the reader: `Some(false)` plaintext, `Some(true)` the peer's
    /// close (a close_notify, or the stream's end without one), `None` nothing. Every record
    /// read is processed at once ([`TlsSocket::pull`]; the handshake's too), so this looks
    /// only at rustls's plaintext buffer and close flags: no `process_new_packets`, which
    /// cost about 200 instructions on each of the three read-readiness polls per request.
    fn waiting(tls: &mut ServerConnection) -> Option<bool> {
        match tls.reader().fill_buf() {
            Ok(plain) => Some(plain.is_empty()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(_) => Some(true),
        }
    }
}

impl TlsSocket {
    /// After a read readiness: `Some(true)` if the client has closed (or the connection
    /// failed), `Some(false)` if it sent more, `None` if nothing of either came.
    fn gone(&self) -> Option<bool> {
        let mut tls = self.lock();
        if let Some(closed) = Self::waiting(&mut tls) {
            return Some(closed);
        }
        match self.pull(&mut tls) {
            Ok(false) => Some(true),
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Some(true),
            _ => Self::waiting(&mut tls),
        }
    }
}

impl Socket for TlsSocket {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if Self::waiting(&mut self.lock()).is_some() {
            return Poll::Ready(Ok(()));
        }
        self.tcp.poll_read_ready(cx)
    }

    fn try_read(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut tls = self.lock();
        loop {
            let r = read_plaintext(&mut tls, buf);
            match r {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The TCP stream ended without a close_notify: the end all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if !self.pull(&mut tls)? {
                return Ok(0);
            }
        }
    }

    async fn writable(&self) -> io::Result<()> {
        self.tcp.writable().await
    }

    fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        let mut tls = self.lock();
        self.push(&mut tls)?;
        let n = tls.writer().write(data)?;
        match self.push(&mut tls) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn try_flush(&self) -> io::Result<()> {
        self.push(&mut self.lock())
    }

    async fn closed(&self) {
        loop {
            if self.readable().await.is_err() {
                return;
            }
            match self.gone() {
                Some(true) => return,
                // More of the client's bytes: a pipelined request, read later.
                Some(false) => return std::future::pending().await,
                None => {}
            }
        }
    }

    async fn shutdown(&mut self) {
        self.lock().send_close_notify();
        let flushed = async {
            loop {
                match self.try_flush() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if self.tcp.writable().await.is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), flushed).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.tcp).await;
    }
}

/// Move the plaintext rustls holds into `buf`'s spare room (at least one byte's), chunk by
/// chunk: copied once, never zero-filled first (a zeroed 4 KiB or more per read was 18 % of
/// the instructions per request on the HTTPS path). As `Read::read`: `WouldBlock` when
/// nothing is there, `Ok(0)` after a clean close.
fn read_plaintext(tls: &mut ServerConnection, buf: &mut Vec<u8>) -> io::Result<usize> {
    let room = (buf.capacity() - buf.len()).max(1);
    let mut got = 0;
    while got < room {
        let mut reader = tls.reader();
        let n = match reader.fill_buf() {
            Ok(chunk) => {
                let n = chunk.len().min(room - got);
                buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(_) if got > 0 => break,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        reader.consume(n);
        got += n;
    }
    Ok(got)
}
