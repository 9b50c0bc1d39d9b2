//! HTTP/1.1 message framing, the proxy's own (issue 19): request and response heads parsed
//! with `httparse` straight out of a connection's read buffer, the body length decided by
//! RFC 9112 §6.3, and a validating chunked decoder. Nothing here allocates per message.
//! Public so that the `raw_forward` example frames with it too.
//!
//! Framing is strict, so that the proxy and the upstream can never disagree on where a
//! request ends (request smuggling): a request with both `Content-Length` and
//! `Transfer-Encoding`, a `Transfer-Encoding` other than a lone `chunked`, differing or
//! malformed `Content-Length`s, or a bad chunk size is refused with 400, and the request
//! body always goes upstream with a `Content-Length` of its own, never the client's framing.

use std::fmt;
use std::mem::MaybeUninit;

use crate::ascii::eq_lower;

/// How many header lines a head may have (more: 431, as hyper's default of 100).
pub const MAX_HEADERS: usize = 100;

/// Why a message could not be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not HTTP/1.x syntax (the `&str` says what).
    Malformed(&'static str),
    /// The head is longer than the limit, or has more than [`MAX_HEADERS`] lines.
    HeadTooLarge,
    /// The body framing is ambiguous or invalid (the `&str` says what).
    BadFraming(&'static str),
    /// A chunked body is larger than the limit.
    BodyTooLarge,
}

impl FrameError {
    /// The status a client gets for it.
    pub fn status(self) -> u16 {
        match self {
            FrameError::Malformed(_) | FrameError::BadFraming(_) => 400,
            FrameError::HeadTooLarge => 431,
            FrameError::BodyTooLarge => 413,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Malformed(w) => write!(f, "malformed HTTP/1 message: {w}"),
            FrameError::HeadTooLarge => write!(f, "message head too large"),
            FrameError::BadFraming(w) => write!(f, "invalid message framing: {w}"),
            FrameError::BodyTooLarge => write!(f, "body too large"),
        }
    }
}

impl std::error::Error for FrameError {}

/// How long a message body is (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLen {
    /// Exactly this many bytes (0: no body).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (responses only).
    ToEof,
}

/// What a request head says, apart from its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
    /// Its body length (never [`BodyLen::ToEof`]).
    pub body: BodyLen,
    /// Whether the connection may carry another request after this one.
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// `HEAD`: the response has no body whatever its headers say.
    pub head_method: bool,
    /// It has an `Upgrade` header (it may ask to switch protocols).
    pub upgrade: bool,
    /// It is an HTTP/1.0 request.
    pub http10: bool,
}

/// What a response head says, apart from its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseInfo {
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
    /// Status code.
    pub status: u16,
    /// Its body length.
    pub body: BodyLen,
    /// Whether the upstream connection may carry another request.
    pub keep_alive: bool,
}

fn eq(a: &[u8], b: &str) -> bool {
    eq_lower(a, b.as_bytes())
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
fn lists(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| eq(t.trim_ascii(), token))
}

/// The framing headers of a message: its body length, and what `Connection` says; and, of
/// a request, whether it asks `Expect: 100-continue` and has an `Upgrade` header.
struct Framing {
    body: Option<BodyLen>,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    upgrade: bool,
}

/// One pass over the lines: a name is compared only with the framing names of its length.
fn framing(headers: &[httparse::Header<'_>]) -> Result<Framing, FrameError> {
    let mut length: Option<u64> = None;
    let mut te: Option<&[u8]> = None;
    let mut f = Framing {
        body: None,
        close: false,
        keep_alive: false,
        expect_continue: false,
        upgrade: false,
    };
    for h in headers {
        let name = h.name.as_bytes();
        match name.len() {
            14 if eq_lower(name, b"content-length") => content_length(h.value, &mut length)?,
            17 if eq_lower(name, b"transfer-encoding") => {
                if te.is_some() {
                    return Err(FrameError::BadFraming("more than one Transfer-Encoding"));
                }
                te = Some(h.value);
            }
            10 if eq_lower(name, b"connection") => {
                f.close |= lists(h.value, "close");
                f.keep_alive |= lists(h.value, "keep-alive");
            }
            6 if eq_lower(name, b"expect") => {
                f.expect_continue |= eq(h.value.trim_ascii(), "100-continue");
            }
            7 if eq_lower(name, b"upgrade") => f.upgrade = true,
            _ => {}
        }
    }
    f.body = match (te, length) {
        (Some(_), Some(_)) => {
            return Err(FrameError::BadFraming(
                "both Content-Length and Transfer-Encoding",
            ))
        }
        (Some(te), None) if eq(te.trim_ascii(), "chunked") => Some(BodyLen::Chunked),
        (Some(_), None) => {
            return Err(FrameError::BadFraming(
                "Transfer-Encoding other than chunked",
            ))
        }
        (None, Some(n)) => Some(BodyLen::Length(n)),
        (None, None) => None,
    };
    Ok(f)
}

/// A `Content-Length` value, into `length` (the value of the lines before it, if any).
/// RFC 9110 §8.6: a list of identical values may be taken as one; anything else is refused.
fn content_length(value: &[u8], length: &mut Option<u64>) -> Result<(), FrameError> {
    for v in value.split(|&b| b == b',') {
        let v = v.trim_ascii();
        if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
            return Err(FrameError::BadFraming("invalid Content-Length"));
        }
        // At most 19 digits: within a u64.
        let n = v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        if length.is_some_and(|l| l != n) {
            return Err(FrameError::BadFraming("differing Content-Lengths"));
        }
        *length = Some(n);
    }
    Ok(())
}

fn head_error(e: httparse::Error) -> FrameError {
    match e {
        httparse::Error::TooManyHeaders => FrameError::HeadTooLarge,
        httparse::Error::Version => FrameError::Malformed("not HTTP/1.x"),
        _ => FrameError::Malformed("invalid request or status line, or header"),
    }
}

/// Room for `N` header lines, for [`parse_request`] and [`parse_response`]: left
/// uninitialized (clearing it would cost a store per byte on every parse).
pub fn headers<'b, const N: usize>() -> [MaybeUninit<httparse::Header<'b>>; N] {
    [const { MaybeUninit::uninit() }; N]
}

/// Parse the request head at the start of `buf`, its lines into `headers` (see
/// [`headers`]). `Ok(None)`: incomplete (read more, unless `buf` already holds `max_head`
/// bytes: then it is too large).
pub fn parse_request<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [MaybeUninit<httparse::Header<'b>>],
    max_head: usize,
) -> Result<Option<(httparse::Request<'h, 'b>, RequestInfo)>, FrameError> {
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, headers);
    let head_len = match parsed.map_err(head_error)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial if buf.len() >= max_head => return Err(FrameError::HeadTooLarge),
        httparse::Status::Partial => return Ok(None),
    };
    if head_len > max_head {
        return Err(FrameError::HeadTooLarge);
    }
    let f = framing(req.headers)?;
    let minor = req.version.unwrap_or(1);
    let info = RequestInfo {
        head_len,
        body: f.body.unwrap_or(BodyLen::Length(0)),
        keep_alive: if minor == 0 {
            f.keep_alive && !f.close
        } else {
            !f.close
        },
        expect_continue: f.expect_continue,
        head_method: req.method == Some("HEAD"),
        upgrade: f.upgrade,
        http10: minor == 0,
    };
    Ok(Some((req, info)))
}

/// Parse the response head at the start of `buf` to a request that was (`head_method`) or
/// was not a `HEAD`, its lines into `headers`. `Ok(None)`: incomplete (read more, unless `buf` already holds
/// `max_head` bytes).
pub fn parse_response<'b, 'h>(
    buf: &'b [u8],
    headers: &'h mut [MaybeUninit<httparse::Header<'b>>],
    max_head: usize,
    head_method: bool,
) -> Result<Option<(httparse::Response<'h, 'b>, ResponseInfo)>, FrameError> {
    let mut resp = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let parsed = config.parse_response_with_uninit_headers(&mut resp, buf, headers);
    let head_len = match parsed.map_err(head_error)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial if buf.len() >= max_head => return Err(FrameError::HeadTooLarge),
        httparse::Status::Partial => return Ok(None),
    };
    let status = resp.code.unwrap_or(0);
    let f = framing(resp.headers)?;
    let minor = resp.version.unwrap_or(1);
    // RFC 9112 §6.3: no body after HEAD, 1xx, 204 and 304, whatever the headers say.
    let body = if head_method || (100..200).contains(&status) || status == 204 || status == 304 {
        BodyLen::Length(0)
    } else {
        f.body.unwrap_or(BodyLen::ToEof)
    };
    let keep_alive = body != BodyLen::ToEof
        && if minor == 0 {
            f.keep_alive && !f.close
        } else {
            !f.close
        };
    Ok(Some((
        resp,
        ResponseInfo {
            head_len,
            status,
            body,
            keep_alive,
        },
    )))
}

/// Append `Content-Length: n\r\n`.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"content-length: ");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// Where a chunked decoder is within a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Size { digits: u8 },
    Ext,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    EndLf,
    Done,
}

/// Longest chunk extension or trailer section accepted (bytes).
const MAX_CHUNK_META: u64 = 4096;

/// A validating decoder of a chunked body (RFC 9112 §7.1), fed in pieces.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: Chunk,
    /// Bytes left in the current chunk (or its size so far).
    size: u64,
    /// Data bytes decoded so far.
    total: u64,
    /// Chunk-extension and trailer bytes seen (bounded).
    meta: u64,
    max: u64,
}

impl Chunked {
    /// A decoder for a body of at most `max` data bytes.
    pub fn new(max: u64) -> Self {
        Chunked {
            state: Chunk::Size { digits: 0 },
            size: 0,
            total: 0,
            meta: 0,
            max,
        }
    }

    /// The body has ended (last chunk and trailers read).
    pub fn done(&self) -> bool {
        self.state == Chunk::Done
    }

    /// Decode from `input`, appending data bytes to `out` (if given); returns how many
    /// input bytes were consumed (all of them unless the body ended within `input`).
    pub fn feed(
        &mut self,
        input: &[u8],
        mut out: Option<&mut Vec<u8>>,
    ) -> Result<usize, FrameError> {
        let mut i = 0;
        while i < input.len() && self.state != Chunk::Done {
            if self.state == Chunk::Data {
                let n = (input.len() - i).min(self.size.min(usize::MAX as u64) as usize);
                if let Some(o) = out.as_deref_mut() {
                    o.extend_from_slice(&input[i..i + n]);
                }
                i += n;
                self.size -= n as u64;
                self.total += n as u64;
                if self.size == 0 {
                    self.state = Chunk::DataCr;
                }
                continue;
            }
            self.state = match self.state {
                Chunk::Size { .. } | Chunk::Ext | Chunk::SizeLf => self.size_line(input[i])?,
                Chunk::DataCr | Chunk::DataLf => self.data_end(input[i])?,
                _ => self.trailers(input[i])?,
            };
            i += 1;
        }
        Ok(i)
    }

    /// The state after byte `b` of a chunk-size line (size, extensions, CRLF).
    #[inline]
    fn size_line(&mut self, b: u8) -> Result<Chunk, FrameError> {
        let bad = |w| Err(FrameError::BadFraming(w));
        match self.state {
            Chunk::Size { digits } => {
                if let Some(d) = (b as char).to_digit(16) {
                    if digits >= 16 {
                        return bad("chunk size too long");
                    }
                    self.size = self.size * 16 + d as u64;
                    Ok(Chunk::Size { digits: digits + 1 })
                } else if digits == 0 {
                    bad("invalid chunk size")
                } else if b == b';' || b == b' ' || b == b'\t' {
                    Ok(Chunk::Ext)
                } else if b == b'\r' {
                    Ok(Chunk::SizeLf)
                } else {
                    bad("invalid chunk size")
                }
            }
            Chunk::Ext if b == b'\r' => Ok(Chunk::SizeLf),
            Chunk::Ext if b == b'\n' || b == 0 => bad("invalid chunk extension"),
            Chunk::Ext => {
                self.meta += 1;
                if self.meta > MAX_CHUNK_META {
                    return bad("chunk extensions too long");
                }
                Ok(Chunk::Ext)
            }
            _ if b != b'\n' => bad("chunk size line not ended by CRLF"),
            _ if self.size == 0 => Ok(Chunk::TrailerStart),
            _ if self.total.saturating_add(self.size) > self.max => Err(FrameError::BodyTooLarge),
            _ => Ok(Chunk::Data),
        }
    }

    /// The state after byte `b` of the CRLF that ends a chunk's data.
    #[inline]
    fn data_end(&self, b: u8) -> Result<Chunk, FrameError> {
        match self.state {
            Chunk::DataCr if b == b'\r' => Ok(Chunk::DataLf),
            Chunk::DataLf if b == b'\n' => Ok(Chunk::Size { digits: 0 }),
            _ => Err(FrameError::BadFraming("chunk data not ended by CRLF")),
        }
    }

    /// The state after byte `b` of the trailer section (its field lines are dropped) and
    /// the final CRLF.
    fn trailers(&mut self, b: u8) -> Result<Chunk, FrameError> {
        let bad = |w| Err(FrameError::BadFraming(w));
        match self.state {
            // Either the final CRLF, or a trailer field line.
            Chunk::TrailerStart if b == b'\n' || b == 0 => bad("invalid trailer"),
            Chunk::TrailerStart if b == b'\r' => Ok(Chunk::EndLf),
            Chunk::TrailerStart => {
                self.meta += 1;
                Ok(Chunk::Trailer)
            }
            Chunk::Trailer if b == b'\n' || b == 0 => bad("invalid trailer"),
            Chunk::Trailer => {
                self.meta += 1;
                if self.meta > MAX_CHUNK_META {
                    return bad("trailers too long");
                }
                Ok(if b == b'\r' {
                    Chunk::TrailerLf
                } else {
                    Chunk::Trailer
                })
            }
            Chunk::TrailerLf if b == b'\n' => Ok(Chunk::TrailerStart),
            Chunk::TrailerLf => bad("trailer line not ended by CRLF"),
            _ if b == b'\n' => Ok(Chunk::Done),
            _ => bad("chunked body not ended by CRLF"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(raw: &[u8]) -> Result<Option<RequestInfo>, FrameError> {
        let mut h = headers::<MAX_HEADERS>();
        parse_request(raw, &mut h, 16 * 1024).map(|o| o.map(|(_, i)| i))
    }

    #[test]
    fn request_framing_follows_rfc_9112() {
        let i = req(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!(i.body, BodyLen::Length(0));
        assert!(i.keep_alive);
        assert_eq!(i.head_len, 27);
        let i = req(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(i.body, BodyLen::Length(5));
        let i = req(b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(i.body, BodyLen::Chunked);
        let i = req(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!i.keep_alive, "HTTP/1.0 closes unless asked");
        let i = req(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(i.keep_alive);
        let i = req(b"GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!i.keep_alive);
        let i = req(b"PUT / HTTP/1.1\r\nContent-Length: 3, 3\r\nExpect: 100-continue\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(i.body, BodyLen::Length(3));
        assert!(i.expect_continue);
        assert_eq!(
            req(b"GET / HTTP/1.1\r\nHost: a\r\n").unwrap(),
            None,
            "partial"
        );
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        for raw in [
            &b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
        ] {
            let e = req(raw).unwrap_err();
            assert_eq!(e.status(), 400, "{:?}: {e}", String::from_utf8_lossy(raw));
        }
        assert_eq!(req(b"GET / HTTP/2.0\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(req(b"GET\x01/ HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
    }

    #[test]
    fn head_limits_answer_431() {
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(req(&many).unwrap_err(), FrameError::HeadTooLarge);
        let mut h = headers::<MAX_HEADERS>();
        let long = b"GET / HTTP/1.1\r\nx: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert_eq!(
            parse_request(long, &mut h, 32).map(|o| o.is_some()),
            Err(FrameError::HeadTooLarge),
            "an incomplete head at the limit"
        );
        let mut h = headers::<MAX_HEADERS>();
        assert_eq!(
            parse_request(b"GET / HTTP/1.1\r\nx: aaaaaaaaaaaaaaaa\r\n\r\n", &mut h, 32)
                .map(|o| o.is_some()),
            Err(FrameError::HeadTooLarge),
            "a complete head over the limit"
        );
    }

    fn resp(raw: &[u8], head: bool) -> ResponseInfo {
        let mut h = headers::<MAX_HEADERS>();
        parse_response(raw, &mut h, 16 * 1024, head)
            .unwrap()
            .unwrap()
            .1
    }

    #[test]
    fn response_framing_follows_rfc_9112() {
        let r = resp(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false);
        assert_eq!(
            (r.status, r.body, r.keep_alive),
            (200, BodyLen::Length(2), true)
        );
        let r = resp(b"HTTP/1.1 200 OK\r\n\r\n", false);
        assert_eq!((r.body, r.keep_alive), (BodyLen::ToEof, false));
        let r = resp(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true);
        assert_eq!(r.body, BodyLen::Length(0), "HEAD");
        let r = resp(
            b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        );
        assert_eq!(r.body, BodyLen::Length(0));
        let r = resp(b"HTTP/1.1 100 Continue\r\n\r\n", false);
        assert_eq!((r.status, r.body), (100, BodyLen::Length(0)));
        let r = resp(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nConnection: close\r\n\r\n",
            false,
        );
        assert_eq!((r.body, r.keep_alive), (BodyLen::Chunked, false));
        let r = resp(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!r.keep_alive);
    }

    fn dechunk(raw: &[u8], max: u64, step: usize) -> Result<(Vec<u8>, usize, bool), FrameError> {
        let mut d = Chunked::new(max);
        let mut out = Vec::new();
        let mut used = 0;
        for piece in raw.chunks(step) {
            let n = d.feed(piece, Some(&mut out))?;
            used += n;
            if d.done() {
                break;
            }
        }
        Ok((out, used, d.done()))
    }

    #[test]
    fn chunked_bodies_decode_in_any_pieces() {
        let raw = b"5;name=v\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in [1, 2, 3, 7, raw.len()] {
            let (out, used, done) = dechunk(raw, 100, step).unwrap();
            assert_eq!(out, b"hello0123456789");
            assert!(done);
            assert_eq!(used, raw.len() - 4, "stops before the next message");
        }
        let (_, _, done) = dechunk(b"5\r\nhel", 100, 3).unwrap();
        assert!(!done);
    }

    #[test]
    fn bad_chunks_are_refused() {
        for raw in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\nhello\r\n",
            b"5\r\nhelloXX",
            b"11111111111111111\r\n",
            b"-1\r\n",
            b"0\r\n\n",
        ] {
            assert!(
                matches!(dechunk(raw, 100, 1), Err(FrameError::BadFraming(_))),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        assert_eq!(
            dechunk(b"65\r\n", 100, 1).unwrap_err(),
            FrameError::BodyTooLarge,
            "0x65 = 101 > 100"
        );
        let ext = [b"1;".to_vec(), vec![b'a'; 5000]].concat();
        assert!(dechunk(&ext, 100, 64).is_err(), "unbounded extension");
    }

    /// `body` chunked into pieces of the given sizes (cycled), with extensions and a trailer.
    fn encode(body: &[u8], sizes: &[usize], ext: bool, trailer: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].clamp(1, rest.len());
            i += 1;
            out.extend_from_slice(format!("{n:x}").as_bytes());
            if ext {
                out.extend_from_slice(b";a=b");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        out.extend_from_slice(b"0\r\n");
        if trailer {
            out.extend_from_slice(b"x-t: 1\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    proptest::proptest! {
        /// Any body, chunked any way and fed in any pieces, decodes to itself, and the
        /// decoder stops exactly at the end of the message.
        #[test]
        fn chunked_round_trip(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
            sizes in proptest::collection::vec(1usize..300, 1..6),
            step in 1usize..64,
            ext in proptest::bool::ANY,
            trailer in proptest::bool::ANY,
        ) {
            let mut raw = encode(&body, &sizes, ext, trailer);
            let end = raw.len();
            raw.extend_from_slice(b"GET / HTTP/1.1\r\n");
            let (out, used, done) = dechunk(&raw, 600, step).unwrap();
            proptest::prop_assert!(done);
            proptest::prop_assert_eq!(used, end);
            proptest::prop_assert_eq!(out, body);
        }

        /// Arbitrary bytes never panic the decoder, never make it consume more than it was
        /// given, and never decode more than the limit.
        #[test]
        fn chunked_survives_garbage(
            raw in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            step in 1usize..32,
        ) {
            let mut d = Chunked::new(50);
            let mut out = Vec::new();
            for piece in raw.chunks(step) {
                match d.feed(piece, Some(&mut out)) {
                    Ok(n) => proptest::prop_assert!(n <= piece.len()),
                    Err(_) => break,
                }
                if d.done() {
                    break;
                }
            }
            proptest::prop_assert!(out.len() <= 50);
        }

        /// Arbitrary bytes never panic the head parsers.
        #[test]
        fn heads_survive_garbage(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let mut h = headers::<MAX_HEADERS>();
            let _ = parse_request(&raw, &mut h, 256);
            let mut h = headers::<MAX_HEADERS>();
            let _ = parse_response(&raw, &mut h, 256, false);
        }
    }
}
