//! The server side of PostgreSQL's protocol v3: the pooler reading what clients send
//! (startup packets, typed messages, the fields of Parse / Bind / Describe / Close it
//! rewrites) and writing what a server would answer (authentication requests, errors,
//! ParameterStatus, ReadyForQuery). Messages to and from the real server use
//! `postgres-protocol` (`server.rs`). Every parser here takes any bytes: a malformed
//! message is an [`io::Error`] of kind `InvalidData`, never a panic.

use std::io;
use std::task::Poll;

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, Interest};
use tokio::net::TcpStream;

/// Protocol 3.0's startup code.
pub const PROTOCOL_3: i32 = 196_608;
/// `SSLRequest`'s code.
pub const SSL_REQUEST: i32 = 80_877_103;
/// `GSSENCRequest`'s code.
pub const GSSENC_REQUEST: i32 = 80_877_104;
/// `CancelRequest`'s code.
pub const CANCEL_REQUEST: i32 = 80_877_102;
/// The longest startup packet accepted (PostgreSQL's own limit).
pub const MAX_STARTUP: usize = 10_000;

/// A malformed message.
pub fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// What a client sends before it is a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Startup {
    /// `SSLRequest` or `GSSENCRequest`: answered `N`, then the client goes on.
    Encryption,
    /// `CancelRequest` with the key the pooler handed the client.
    Cancel {
        /// BackendKeyData's process id.
        pid: i32,
        /// BackendKeyData's secret.
        secret: i32,
    },
    /// A protocol 3.0 startup message's parameters, in order.
    Params(Vec<(String, String)>),
}

/// Read one startup-phase packet (length, code, body).
pub async fn read_startup<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Startup> {
    let len = r.read_i32().await?;
    if !(8..=MAX_STARTUP as i32).contains(&len) {
        return Err(invalid(format!("startup packet of {len} bytes")));
    }
    let mut body = vec![0u8; len as usize - 4];
    r.read_exact(&mut body).await?;
    parse_startup(&body)
}

/// Parse a startup packet's body (the code and what follows).
pub fn parse_startup(body: &[u8]) -> io::Result<Startup> {
    let mut b = body;
    if b.len() < 4 {
        return Err(invalid("startup packet without a code"));
    }
    let code = b.get_i32();
    match code {
        SSL_REQUEST | GSSENC_REQUEST if b.is_empty() => Ok(Startup::Encryption),
        CANCEL_REQUEST if b.len() == 8 => Ok(Startup::Cancel {
            pid: b.get_i32(),
            secret: b.get_i32(),
        }),
        PROTOCOL_3 => {
            let mut params = Vec::new();
            loop {
                let key = cstr(&mut b)?;
                if key.is_empty() {
                    break;
                }
                let value = cstr(&mut b)?;
                params.push((key, value));
            }
            if !b.is_empty() {
                return Err(invalid("bytes after the startup parameters"));
            }
            Ok(Startup::Params(params))
        }
        c if c >> 16 == 3 || c >> 16 == 2 => Err(invalid(format!(
            "unsupported frontend protocol {}.{}: the pooler speaks 3.0",
            c >> 16,
            c & 0xffff
        ))),
        c => Err(invalid(format!("unknown startup code {c}"))),
    }
}

/// Take a NUL-terminated UTF-8 string off the front of `b`.
pub fn cstr(b: &mut &[u8]) -> io::Result<String> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| invalid("string without its NUL"))?;
    let s = std::str::from_utf8(&b[..end])
        .map_err(|_| invalid("string is not UTF-8"))?
        .to_string();
    *b = &b[end + 1..];
    Ok(s)
}

/// Buffered reading of typed messages (tag, length, body) off one stream. A whole message
/// is handed out as the bytes it came in, tag and length included: owned
/// ([`Frames::try_next`], [`Frames::next`]), or read where it lies in the buffer
/// ([`Frames::len_at`] and [`Frames::bytes`], then [`Frames::consume`]), which is what the
/// relay does on every transaction.
#[derive(Debug)]
pub struct Frames {
    buf: BytesMut,
    max: usize,
}

impl Frames {
    /// Messages longer than `max` bytes are refused.
    pub fn new(max: usize) -> Self {
        Frames {
            buf: BytesMut::with_capacity(8192),
            max,
        }
    }

    /// The length of the complete message `off` bytes into the buffer (tag and length
    /// included), if it is all there; an error if its length is out of bounds.
    #[inline]
    pub fn len_at(&mut self, off: usize) -> io::Result<Option<usize>> {
        let Some(head) = self.buf.get(off..off + 5) else {
            return Ok(None);
        };
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if len < 4 || len as usize > self.max {
            return Err(invalid(format!(
                "message {:?} of {len} bytes (at most {} allowed)",
                head[0] as char, self.max
            )));
        }
        let total = len as usize + 1;
        let have = self.buf.len() - off;
        if have < total {
            self.buf.reserve(total - have);
            return Ok(None);
        }
        Ok(Some(total))
    }

    /// The buffered bytes: complete messages first (see [`Frames::len_at`]).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Drop the first `n` buffered bytes (messages read in place).
    pub fn consume(&mut self, n: usize) {
        if n >= self.buf.len() {
            self.buf.clear();
        } else {
            self.buf.advance(n);
        }
    }

    /// A complete message already buffered, if any.
    pub fn try_next(&mut self) -> io::Result<Option<BytesMut>> {
        Ok(self.len_at(0)?.map(|n| self.buf.split_to(n)))
    }

    /// Whether bytes of an unfinished message are buffered.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Make room for a read of at least 4 KiB; the room.
    fn room(&mut self) -> usize {
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(8192);
        }
        self.buf.capacity() - self.buf.len()
    }

    /// Read more bytes (cancel-safe: nothing read is lost if the future is dropped).
    /// `Ok(false)` at the end of the stream.
    pub async fn fill<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<bool> {
        self.room();
        Ok(r.read_buf(&mut self.buf).await? > 0)
    }

    /// Read what `socket` has now, without waiting: `Some(n)` bytes read (`Some(0)` at the
    /// end of the stream), `None` if nothing is there. One `recvfrom` when the runtime has
    /// seen the socket readable, none when it has not. A read that does not fill the
    /// buffer emptied the socket, so its readiness is cleared then (as tokio's own reads
    /// do), and the next call costs no system call.
    pub fn try_fill(&mut self, socket: &TcpStream) -> io::Result<Option<usize>> {
        let room = self.room();
        let mut got = None;
        let r = socket.try_io(Interest::READABLE, || {
            let n = socket.try_read_buf(&mut self.buf)?;
            got = Some(n);
            if n > 0 && n < room {
                // Drained: clear the readiness this read was made under.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(())
        });
        match r {
            // A read (`got`) failed only with the WouldBlock that clears the readiness.
            Ok(()) => Ok(got),
            Err(_) if got.is_some() => Ok(got),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(got),
            Err(e) => Err(e),
        }
    }

    /// Wait for the next message off `socket`, and leave it in the buffer: its tag and
    /// length (it is `bytes()[..length]`). A buffered one at once, else
    /// [`Frames::try_fill`] once the runtime has seen the socket readable. `Ok(None)` at a
    /// clean end of the stream.
    pub async fn peek_from(&mut self, socket: &TcpStream) -> io::Result<Option<(u8, usize)>> {
        loop {
            if let Some(n) = self.len_at(0)? {
                return Ok(Some((self.buf[0], n)));
            }
            readable(socket).await?;
            match self.try_fill(socket)? {
                Some(0) if self.buf.is_empty() => return Ok(None),
                Some(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                _ => {}
            }
        }
    }

    /// The next message; `Ok(None)` at a clean end of the stream.
    pub async fn next<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<Option<BytesMut>> {
        loop {
            if let Some(m) = self.try_next()? {
                return Ok(Some(m));
            }
            if !self.fill(r).await? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }
}

/// Wait until the runtime has seen `socket` readable (or closed, or in error): at once if
/// it has, else until the task is woken, which is taken for it without asking the runtime
/// again (the read that follows, [`Frames::try_fill`], asks, without a system call when the
/// socket is not readable; the caller then waits again).
pub async fn readable(socket: &TcpStream) -> io::Result<()> {
    let mut registered = false;
    std::future::poll_fn(|cx| {
        if registered {
            return Poll::Ready(Ok(()));
        }
        registered = true;
        socket.poll_read_ready(cx)
    })
    .await
}

/// Write all of `bytes` to `socket`: straight away while it takes them, awaiting
/// writability only when its send buffer is full.
pub async fn send(socket: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    let mut at = send_now(socket, bytes)?;
    while at < bytes.len() {
        std::future::poll_fn(|cx| socket.poll_write_ready(cx)).await?;
        at += send_now(socket, &bytes[at..])?;
    }
    Ok(())
}

/// Write what `socket` takes of `bytes` now, without waiting: how many bytes it took (all
/// of them unless its send buffer filled; then [`send`] the rest).
pub fn send_now(socket: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < bytes.len() {
        match socket.try_write(&bytes[at..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// A message's body (after tag and length).
pub fn body(m: &[u8]) -> &[u8] {
    m.get(5..).unwrap_or(&[])
}

/// Start a typed message; [`finish`] writes its length.
fn begin(out: &mut BytesMut, tag: u8) -> usize {
    out.put_u8(tag);
    let at = out.len();
    out.put_i32(0);
    at
}

fn finish(out: &mut BytesMut, at: usize) {
    let len = (out.len() - at) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

fn put_cstr(out: &mut BytesMut, s: &str) {
    out.put_slice(s.replace('\0', "").as_bytes());
    out.put_u8(0);
}

/// Severity of an [`error`] message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The statement failed; the session goes on.
    Error,
    /// The session ends.
    Fatal,
}

/// ErrorResponse with a SQLSTATE and message.
pub fn error(out: &mut BytesMut, severity: Severity, code: &str, message: &str) {
    let at = begin(out, b'E');
    let s = match severity {
        Severity::Error => "ERROR",
        Severity::Fatal => "FATAL",
    };
    for (field, value) in [(b'S', s), (b'V', s), (b'C', code), (b'M', message)] {
        out.put_u8(field);
        put_cstr(out, value);
    }
    out.put_u8(0);
    finish(out, at);
}

/// An Authentication request: `kind` 0 (ok), 5 (md5, with a salt), 10 (SASL, with the
/// mechanisms), 11 (SASL continue), 12 (SASL final).
pub fn auth(out: &mut BytesMut, kind: i32, data: &[u8]) {
    let at = begin(out, b'R');
    out.put_i32(kind);
    out.put_slice(data);
    finish(out, at);
}

/// ParameterStatus.
pub fn parameter_status(out: &mut BytesMut, name: &str, value: &str) {
    let at = begin(out, b'S');
    put_cstr(out, name);
    put_cstr(out, value);
    finish(out, at);
}

/// BackendKeyData.
pub fn backend_key(out: &mut BytesMut, pid: i32, secret: i32) {
    let at = begin(out, b'K');
    out.put_i32(pid);
    out.put_i32(secret);
    finish(out, at);
}

/// ReadyForQuery with a transaction status (`I`, `T`, `E`).
pub fn ready(out: &mut BytesMut, status: u8) {
    let at = begin(out, b'Z');
    out.put_u8(status);
    finish(out, at);
}

/// A message with an empty body (ParseComplete `1`, CloseComplete `3`, …).
pub fn empty(out: &mut BytesMut, tag: u8) {
    let at = begin(out, tag);
    finish(out, at);
}

/// Parse (`P`): statement name, query, parameter type oids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parse {
    /// Statement name (`""`: the unnamed statement).
    pub name: String,
    /// The query text.
    pub query: String,
    /// Parameter type oids.
    pub types: Vec<u32>,
}

impl Parse {
    /// Read a Parse message.
    pub fn read(m: &[u8]) -> io::Result<Parse> {
        let mut b = body(m);
        let name = cstr(&mut b)?;
        let query = cstr(&mut b)?;
        if b.len() < 2 {
            return Err(invalid("Parse without its parameter count"));
        }
        let n = b.get_i16();
        if n < 0 || b.len() != n as usize * 4 {
            return Err(invalid("Parse with a bad parameter list"));
        }
        let types = (0..n).map(|_| b.get_u32()).collect();
        Ok(Parse { name, query, types })
    }

    /// Write it under another statement name.
    pub fn write_as(&self, name: &str, out: &mut BytesMut) {
        let at = begin(out, b'P');
        put_cstr(out, name);
        put_cstr(out, &self.query);
        out.put_i16(self.types.len() as i16);
        for t in &self.types {
            out.put_u32(*t);
        }
        finish(out, at);
    }
}

/// The statement a Bind (`B`) names: (portal, statement, the rest of the body).
pub fn bind_statement(m: &[u8]) -> io::Result<(String, String, &[u8])> {
    let mut b = body(m);
    let portal = cstr(&mut b)?;
    let statement = cstr(&mut b)?;
    Ok((portal, statement, b))
}

/// Write a Bind of `statement` with the given portal and the rest of a client's body.
pub fn write_bind(out: &mut BytesMut, portal: &str, statement: &str, rest: &[u8]) {
    let at = begin(out, b'B');
    put_cstr(out, portal);
    put_cstr(out, statement);
    out.put_slice(rest);
    finish(out, at);
}

/// The target of a Describe (`D`) or Close (`C`): `S` (statement) or `P` (portal), name.
pub fn target(m: &[u8]) -> io::Result<(u8, String)> {
    let mut b = body(m);
    if b.is_empty() {
        return Err(invalid("Describe/Close without a target"));
    }
    let kind = b.get_u8();
    if kind != b'S' && kind != b'P' {
        return Err(invalid(format!(
            "Describe/Close of kind {:?}",
            kind as char
        )));
    }
    let name = cstr(&mut b)?;
    if !b.is_empty() {
        return Err(invalid("bytes after a Describe/Close"));
    }
    Ok((kind, name))
}

/// Write a Describe or Close (`tag`) of a target.
pub fn write_target(out: &mut BytesMut, tag: u8, kind: u8, name: &str) {
    let at = begin(out, tag);
    out.put_u8(kind);
    put_cstr(out, name);
    finish(out, at);
}

/// A password / SASL response message's body (`p`).
pub fn password_body(m: &[u8]) -> io::Result<&[u8]> {
    if m.first() != Some(&b'p') {
        return Err(invalid(format!(
            "expected a password message, got {:?}",
            m.first().map(|&c| c as char)
        )));
    }
    Ok(body(m))
}

/// SASLInitialResponse: mechanism and its data.
pub fn sasl_initial(m: &[u8]) -> io::Result<(String, Vec<u8>)> {
    let mut b = password_body(m)?;
    let mech = cstr(&mut b)?;
    if b.len() < 4 {
        return Err(invalid("SASLInitialResponse without its length"));
    }
    let n = b.get_i32();
    let data = if n < 0 {
        Vec::new()
    } else if b.len() == n as usize {
        b.to_vec()
    } else {
        return Err(invalid("SASLInitialResponse of the wrong length"));
    };
    Ok((mech, data))
}

/// The SQLSTATE and message of an ErrorResponse / NoticeResponse.
pub fn error_fields(m: &[u8]) -> (String, String) {
    let mut b = body(m);
    let (mut code, mut msg) = (String::new(), String::new());
    while let Some((&field, rest)) = b.split_first() {
        if field == 0 {
            break;
        }
        b = rest;
        let Ok(v) = cstr(&mut b) else { break };
        match field {
            b'C' => code = v,
            b'M' => msg = v,
            _ => {}
        }
    }
    (code, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_round_trip() {
        let mut buf = BytesMut::new();
        postgres_protocol::message::frontend::startup_message(
            [("user", "alice"), ("database", "db")],
            &mut buf,
        )
        .unwrap();
        let s = parse_startup(&buf[4..]).unwrap();
        assert_eq!(
            s,
            Startup::Params(vec![
                ("user".into(), "alice".into()),
                ("database".into(), "db".into())
            ])
        );
        let mut buf = BytesMut::new();
        postgres_protocol::message::frontend::cancel_request(7, 9, &mut buf);
        assert_eq!(
            parse_startup(&buf[4..]).unwrap(),
            Startup::Cancel { pid: 7, secret: 9 }
        );
    }

    #[test]
    fn parse_rewrite_keeps_the_statement() {
        let mut buf = BytesMut::new();
        postgres_protocol::message::frontend::parse("s1", "select $1", [23u32], &mut buf).unwrap();
        let p = Parse::read(&buf).unwrap();
        assert_eq!((p.name.as_str(), p.query.as_str()), ("s1", "select $1"));
        let mut out = BytesMut::new();
        p.write_as("fl_x", &mut out);
        let q = Parse::read(&out).unwrap();
        assert_eq!(
            (q.name.as_str(), q.types.as_slice()),
            ("fl_x", &[23u32][..])
        );
    }

    #[test]
    fn frames_refuse_oversized_and_short_lengths() {
        let mut f = Frames::new(1024);
        f.buf.extend_from_slice(&[b'Q', 0, 0, 0x10, 0]);
        assert!(f.try_next().is_err());
        let mut f = Frames::new(1024);
        f.buf.extend_from_slice(&[b'Q', 0, 0, 0, 3]);
        assert!(f.try_next().is_err());
    }
}
