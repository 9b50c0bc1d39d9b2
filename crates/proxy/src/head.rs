//! The one head type of the request path: a request or response head kept as header lines in
//! one byte buffer (on the own HTTP/1.1 path the very buffer it was read into), with the
//! places of its lines taken once. Every client adapter produces a [`RequestHead`] (the own
//! HTTP/1.1 path straight from the bytes it read; hyper's server from its `http` parts) and every upstream wire a [`ResponseHead`]; identification,
//! classification, the header rewriting (`rewrite`) and the writers on both sides read only
//! these. No `http::HeaderMap` is built on the own path (issue 19: an allocation per header
//! value and a hashed map per request, both ways).

use std::ops::Range;

use http::{HeaderName, HeaderValue, Method, StatusCode};

use crate::h1::{self, FrameError, RequestInfo};

/// The longest target `http::Uri` accepts; longer ones are refused (400), as hyper does.
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// One header line of a head: its name as sent (a token: checked when the head was read or
/// built) and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field<'a> {
    /// The name, in the case it was sent in.
    pub name: &'a [u8],
    /// The value, without the whitespace around it.
    pub value: &'a [u8],
}

/// Where one header line lies in its head's bytes.
#[derive(Clone, Copy, Debug)]
struct Span {
    /// Its name's first byte; the name is `name_len` bytes.
    name: u32,
    /// Its value, `value..end`.
    value: u32,
    end: u32,
    name_len: u16,
    /// The line is exactly `name: value\r\n` in the bytes: it can be copied whole.
    whole: bool,
}

impl Span {
    /// The line's place in `head`, whose `base` is where `head` starts (a head of at most
    /// 4 GiB, names shorter than 64 KiB: checked by the parsers).
    fn of(base: &[u8], h: &httparse::Header<'_>) -> Span {
        let at = |p: *const u8| (p as usize).wrapping_sub(base.as_ptr() as usize);
        let (name, value) = (at(h.name.as_ptr()), at(h.value.as_ptr()));
        let end = value + h.value.len();
        let whole = value == name + h.name.len() + 2
            && base.get(value - 1) == Some(&b' ')
            && base.get(end..end + 2) == Some(b"\r\n");
        Span {
            name: name as u32,
            value: value as u32,
            end: end as u32,
            name_len: h.name.len() as u16,
            whole,
        }
    }

    fn name<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        let n = self.name as usize;
        head.get(n..n + self.name_len as usize).unwrap_or_default()
    }

    fn field<'a>(&self, head: &'a [u8]) -> Field<'a> {
        Field {
            name: self.name(head),
            value: head
                .get(self.value as usize..self.end as usize)
                .unwrap_or_default(),
        }
    }

    /// The whole line with its line end (when [`whole`](Self::whole)).
    fn line(&self) -> Range<usize> {
        self.name as usize..self.end as usize + 2
    }
}

/// A head's header lines: the bytes they are in (an HTTP/1 head as it was read, with its
/// start line) and where each lies. A head read off a connection keeps the read buffer's
/// own bytes when it can (see [`take_head`]): a head costs one allocation, its lines'
/// places.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

impl Fields {
    /// The places of the lines httparse found in `base` (the head's first byte on), in
    /// `room` (a consumed head's, or empty).
    fn spans(base: &[u8], headers: &[httparse::Header<'_>], room: LineRoom) -> Vec<Span> {
        let mut spans = room.0;
        spans.clear();
        spans.reserve(headers.len());
        spans.extend(headers.iter().map(|h| Span::of(base, h)));
        spans
    }

    /// Header lines built from name/value pairs (a head that did not come as HTTP/1 bytes).
    fn with_capacity(bytes: usize) -> Fields {
        Fields {
            bytes: Vec::with_capacity(bytes),
            spans: Vec::new(),
        }
    }

    fn of_map(map: &http::HeaderMap) -> Fields {
        let mut f = Fields::with_capacity(map.len() * 32);
        for (name, value) in map {
            f.push(name.as_str(), value.as_bytes());
        }
        f
    }

    /// Add `name: value` (a valid name and value) after the other lines.
    fn push(&mut self, name: &str, value: &[u8]) {
        let b = &mut self.bytes;
        let n = b.len();
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(b": ");
        let v = b.len();
        b.extend_from_slice(value);
        b.extend_from_slice(b"\r\n");
        self.spans.push(Span {
            name: n as u32,
            value: v as u32,
            end: (v + value.len()) as u32,
            name_len: name.len() as u16,
            whole: true,
        });
    }

    /// Its header lines, in order.
    pub fn iter(&self) -> impl Iterator<Item = Field<'_>> + Clone + '_ {
        self.spans.iter().map(|s| s.field(&self.bytes))
    }

    /// The value of the first line named `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let b = &self.bytes;
        let s = self
            .spans
            .iter()
            .find(|s| s.name(b).eq_ignore_ascii_case(name.as_bytes()))?;
        Some(s.field(b).value)
    }

    /// `f` of the first value of header `name`, if any.
    pub fn header<R>(&self, name: &str, f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        f(self.get(name))
    }

    /// Append the lines `keep` keeps (given each line's index and field) as
    /// `name: value\r\n`: runs of lines that are already so in the head are copied at once.
    pub fn write_kept(&self, out: &mut Vec<u8>, mut keep: impl FnMut(usize, Field<'_>) -> bool) {
        let mut run = 0..0;
        for (i, s) in self.spans.iter().enumerate() {
            let f = s.field(&self.bytes);
            if !keep(i, f) {
                continue;
            }
            if s.whole && run.end == s.name as usize && !run.is_empty() {
                run.end = s.line().end;
                continue;
            }
            out.extend_from_slice(self.bytes.get(run).unwrap_or_default());
            run = 0..0;
            if s.whole {
                run = s.line();
            } else {
                write_line(out, f.name, f.value);
            }
        }
        out.extend_from_slice(self.bytes.get(run).unwrap_or_default());
    }
}

/// The room a consumed head's line places took, for the places of the next head read on the
/// same request's path (the upstream's response head is parsed into the request head's):
/// no allocation for them when it has no more lines.
#[derive(Debug, Default)]
pub(crate) struct LineRoom(Vec<Span>);

/// Append the header line `name: value`.
pub(crate) fn write_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The first `len` bytes of `buf` (a head just parsed), taken out of it, leaving what
/// follows them: the buffer itself when what follows is no longer than the head (that is
/// copied out instead: nothing when the head came alone), else a copy of the head.
fn take_head(buf: &mut Vec<u8>, len: usize) -> Vec<u8> {
    let rest = buf.len().saturating_sub(len);
    if rest == 0 {
        std::mem::take(buf)
    } else if rest <= len {
        let after = buf[len..].to_vec();
        let mut head = std::mem::replace(buf, after);
        head.truncate(len);
        head
    } else {
        let head = buf[..len].to_vec();
        buf.drain(..len);
        head
    }
}

/// Whether a header value is one `http::HeaderValue` accepts (no control characters but
/// tab). httparse accepts exactly these values (a test checks every byte), so the parsers
/// need not check again: the own path refuses what hyper's would.
#[cfg(test)]
fn valid_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Whether the byte may appear in an origin-form target that `http::uri::PathAndQuery`
/// keeps exactly as sent (path and query alike; no fragment).
fn plain_target_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x5F | 0x61..=0x7A | 0x7C | 0x7E)
}

/// A request's target in origin form.
#[derive(Debug)]
enum Target {
    /// Within the head's bytes, as sent.
    InHead(Range<usize>),
    /// Read through `http::Uri` (absolute form, unusual bytes, an HTTP/2 request).
    Owned(Box<str>),
    /// Not a path (an authority or absolute form without one): answered 400.
    NotAPath,
}

/// A request head, however it was read.
#[derive(Debug)]
pub(crate) struct RequestHead {
    /// Header lines (`name: value\r\n`), as sent over HTTP/1 or built from `http` parts.
    fields: Fields,
    method: Method,
    target: Target,
}

impl RequestHead {
    /// Parse an HTTP/1 request head at the start of `buf`, and its framing. The head's bytes
    /// are taken out of `buf` (what followed them stays).
    /// `Ok(None)`: incomplete. A head whose target or header values the `http` types would
    /// refuse is refused here too (400).
    pub fn parse_h1(
        buf: &mut Vec<u8>,
        max_head: usize,
    ) -> Result<Option<(RequestHead, RequestInfo)>, FrameError> {
        let parsed = Self::parse_h1_in(buf, max_head, &mut h1::headers::<{ h1::MAX_HEADERS }>());
        let Some((method, target, spans, info)) = parsed? else {
            return Ok(None);
        };
        let fields = Fields {
            bytes: take_head(buf, info.head_len),
            spans,
        };
        let head = RequestHead {
            fields,
            method,
            target,
        };
        Ok(Some((head, info)))
    }

    #[allow(clippy::type_complexity)] // the parts `parse_h1` puts together
    fn parse_h1_in<'b>(
        buf: &'b [u8],
        max_head: usize,
        headers: &mut [std::mem::MaybeUninit<httparse::Header<'b>>],
    ) -> Result<Option<(Method, Target, Vec<Span>, RequestInfo)>, FrameError> {
        let Some((req, info)) = h1::parse_request(buf, headers, max_head)? else {
            return Ok(None);
        };
        let bad = FrameError::Malformed("invalid request line or header");
        let method = Method::from_bytes(req.method.unwrap_or("").as_bytes()).map_err(|_| bad)?;
        if !req.headers.iter().all(|h| h.name.len() < 1 << 16) {
            return Err(bad);
        }
        let path = req.path.unwrap_or("");
        let target = if path.starts_with('/')
            && path.len() <= MAX_TARGET
            && path.bytes().all(plain_target_byte)
        {
            // `path` is a slice of `buf`: its place there.
            let start = path.as_ptr() as usize - buf.as_ptr() as usize;
            Target::InHead(start..start + path.len())
        } else {
            let uri: http::Uri = path.parse().map_err(|_| bad)?;
            target_of(&uri)
        };
        let spans = Fields::spans(buf, req.headers, LineRoom::default());
        Ok(Some((method, target, spans, info)))
    }

    /// The head of a request hyper's server read (HTTP/1.1 or HTTP/2). An HTTP/2
    /// request's `:authority` becomes its `Host`, as an HTTP/1.1 client would have sent it.
    pub fn from_parts(parts: &http::request::Parts) -> RequestHead {
        let mut fields = Fields::of_map(&parts.headers);
        if let Some(a) = parts.uri.authority() {
            if !parts.headers.contains_key(http::header::HOST) {
                fields.push("host", a.as_str().as_bytes());
            }
        }
        RequestHead {
            fields,
            method: parts.method.clone(),
            target: target_of(&parts.uri),
        }
    }

    /// Give back the spare room of the read buffer the head was read into (it holds only its
    /// own bytes then): for a request about to wait in the queue.
    pub fn shrink(&mut self) {
        self.fields.bytes.shrink_to_fit();
    }

    /// The buffer its bytes are in, emptied, for another use (the client's read buffer, when
    /// the head kept it), and the room of its line places: taken out of it, which leaves it
    /// a head with no lines and an empty target (once it has been written upstream).
    pub fn take_buffer(&mut self) -> (Vec<u8>, LineRoom) {
        let mut b = std::mem::take(&mut self.fields.bytes);
        b.clear();
        if let Target::InHead(_) = self.target {
            self.target = Target::InHead(0..0);
        }
        (b, LineRoom(std::mem::take(&mut self.fields.spans)))
    }

    /// Its method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// Whether it has a path ([`target`](Self::target) is `Some`), without reading it.
    pub fn has_path(&self) -> bool {
        !matches!(self.target, Target::NotAPath)
    }

    /// Its target in origin form (path and query); `None` if it has no path.
    pub fn target(&self) -> Option<&str> {
        match &self.target {
            // Checked ASCII when parsed.
            Target::InHead(r) => {
                Some(std::str::from_utf8(&self.fields.bytes[r.clone()]).unwrap_or("/"))
            }
            Target::Owned(s) => Some(s),
            Target::NotAPath => None,
        }
    }

    /// Its path (the target before any `?`; empty if it has none).
    pub fn path(&self) -> &str {
        let t = self.target().unwrap_or("");
        let end = t.bytes().position(|b| b == b'?').unwrap_or(t.len());
        t.get(..end).unwrap_or(t)
    }
}

/// The origin-form target of `uri` (`*` for an asterisk-form `OPTIONS`).
fn target_of(uri: &http::Uri) -> Target {
    match uri.path_and_query() {
        Some(pq) if pq.path().starts_with('/') || pq.path() == "*" => {
            Target::Owned(pq.as_str().into())
        }
        _ => Target::NotAPath,
    }
}

/// A response head: the upstream's, or one of the proxy's own answers.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    /// Its status.
    pub status: StatusCode,
    /// Header lines (an HTTP/1 upstream's head as it came, with its status line).
    fields: Fields,
    /// How many of the first lines came from the upstream (the rest are the proxy's).
    upstream: usize,
}

impl ResponseHead {
    /// Parse an HTTP/1 response head at the start of `buf`, to a request that was or was not
    /// a `HEAD`; its bytes are taken out of `buf` (what followed them stays). `Ok(None)`:
    /// incomplete.
    #[cfg(test)]
    pub fn parse_h1(
        buf: &mut Vec<u8>,
        max_head: usize,
        head_method: bool,
    ) -> Result<Option<(ResponseHead, h1::ResponseInfo)>, FrameError> {
        Self::parse_h1_into(buf, &mut LineRoom::default(), max_head, head_method)
    }

    /// [`parse_h1`](Self::parse_h1) with its line places in `room` (taken when a head is
    /// parsed).
    pub fn parse_h1_into(
        buf: &mut Vec<u8>,
        room: &mut LineRoom,
        max_head: usize,
        head_method: bool,
    ) -> Result<Option<(ResponseHead, h1::ResponseInfo)>, FrameError> {
        let mut headers = h1::headers::<{ h1::MAX_HEADERS }>();
        let parsed = Self::parse_h1_in(buf, room, max_head, head_method, &mut headers);
        let Some((status, spans, info)) = parsed? else {
            return Ok(None);
        };
        let head = ResponseHead {
            status,
            upstream: spans.len(),
            fields: Fields {
                bytes: take_head(buf, info.head_len),
                spans,
            },
        };
        Ok(Some((head, info)))
    }

    #[allow(clippy::type_complexity)] // the parts `parse_h1` puts together
    fn parse_h1_in<'b>(
        buf: &'b [u8],
        room: &mut LineRoom,
        max_head: usize,
        head_method: bool,
        headers: &mut [std::mem::MaybeUninit<httparse::Header<'b>>],
    ) -> Result<Option<(StatusCode, Vec<Span>, h1::ResponseInfo)>, FrameError> {
        let Some((resp, info)) = h1::parse_response(buf, headers, max_head, head_method)? else {
            return Ok(None);
        };
        let bad = FrameError::Malformed("invalid response header");
        let status = StatusCode::from_u16(info.status).map_err(|_| bad)?;
        if !resp.headers.iter().all(|h| h.name.len() < 1 << 16) {
            return Err(bad);
        }
        let spans = Fields::spans(buf, resp.headers, std::mem::take(room));
        Ok(Some((status, spans, info)))
    }

    /// The head of a response an HTTP/2 upstream sent.
    pub fn from_parts(status: StatusCode, headers: &http::HeaderMap) -> ResponseHead {
        ResponseHead {
            status,
            fields: Fields::of_map(headers),
            upstream: headers.len(),
        }
    }

    /// Add a header line (a valid name and value) after the others.
    pub fn append(&mut self, name: &str, value: &[u8]) {
        self.fields.push(name, value);
    }

    /// A head of the proxy's own with these header lines.
    pub fn own(status: StatusCode, headers: &[(&str, &[u8])]) -> ResponseHead {
        let mut fields = Fields::with_capacity(headers.len() * 40);
        for (n, v) in headers {
            fields.push(n, v);
        }
        ResponseHead {
            status,
            fields,
            upstream: 0,
        }
    }

    /// How many of its first header lines came from the upstream: all of a forwarded
    /// response's but those the proxy [`append`](Self::append)ed; none of the proxy's own.
    pub fn upstream_lines(&self) -> usize {
        self.upstream
    }
}

impl std::ops::Deref for RequestHead {
    type Target = Fields;
    fn deref(&self) -> &Fields {
        &self.fields
    }
}

impl std::ops::Deref for ResponseHead {
    type Target = Fields;
    fn deref(&self) -> &Fields {
        &self.fields
    }
}

/// Header lines as `http` name and value (both checked when the head was read).
pub(crate) fn http_header(h: Field<'_>) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_bytes(h.name).ok()?,
        HeaderValue::from_bytes(h.value).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::BodyLen;

    fn parse(raw: &[u8]) -> Result<Option<(RequestHead, RequestInfo)>, FrameError> {
        RequestHead::parse_h1(&mut raw.to_vec(), 64 * 1024)
    }

    fn text(f: &Fields) -> Vec<String> {
        f.iter()
            .map(|x| {
                let n = String::from_utf8_lossy(x.name);
                format!("{n}={}", String::from_utf8_lossy(x.value))
            })
            .collect()
    }

    #[test]
    fn request_heads_keep_their_bytes_or_an_owned_target() {
        let (h, info) = parse(
            b"POST /a?b=1 HTTP/1.0\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
        )
        .unwrap()
        .unwrap();
        assert!(matches!(h.target, Target::InHead(_)));
        assert_eq!(h.method(), Method::POST);
        assert_eq!(h.target(), Some("/a?b=1"));
        assert_eq!(h.path(), "/a");
        assert!(info.http10);
        assert_eq!(info.body, BodyLen::Length(3));
        assert!(info.expect_continue && !info.keep_alive);
        assert_eq!(
            h.header("host", |v| v.map(<[u8]>::to_vec)),
            Some(b"x".to_vec())
        );
        // Absolute form: what `http::Uri` reads it as, as on hyper's path.
        let (h, _) = parse(b"GET http://h/a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.target(), Some("/a?b=1"));
        for odd in [
            &b"GET /{x} HTTP/1.1\r\n\r\n"[..],
            b"OPTIONS * HTTP/1.1\r\n\r\n",
        ] {
            let (h, _) = parse(odd).unwrap().unwrap();
            assert!(matches!(h.target, Target::Owned(_)), "{odd:?}");
        }
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        let Err(e) =
            parse(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        else {
            panic!("ambiguous framing is refused")
        };
        assert_eq!(e.status(), 400);
        assert_eq!(
            parse(b"GET /a<b> HTTP/1.1\r\n\r\n").unwrap_err().status(),
            400
        );
    }

    #[test]
    fn header_names_read_back_as_sent_and_bad_ones_are_refused() {
        // Many lines, and an appended one.
        let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..30 {
            raw.extend_from_slice(format!("X-H{i}: v").as_bytes());
            raw.push(0xff);
            raw.extend_from_slice(format!("{i}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        let (h, _) = parse(&raw).unwrap().unwrap();
        let names: Vec<String> = h
            .iter()
            .map(|x| String::from_utf8_lossy(x.name).into_owned())
            .collect();
        assert_eq!(names.len(), 31);
        assert_eq!(names[0], "Host");
        assert_eq!(names[30], "X-H29");
        assert!(h.header("x-h7", |v| v == Some(&b"v\xff7"[..])));
        let mut raw = b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\n".to_vec();
        let (mut resp, _) = ResponseHead::parse_h1(&mut raw, 1024, false)
            .unwrap()
            .unwrap();
        resp.append("x-b", b"2");
        assert_eq!(text(&resp), ["A=1", "x-b=2"]);
        // A name that is not a token (a space, a non-ASCII byte, a colon-less line) is a 400.
        for bad in [
            &b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nN\xc3\xa4me: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nNo-colon\r\n\r\n",
        ] {
            assert_eq!(parse(bad).unwrap_err().status(), 400, "{bad:?}");
        }
    }

    #[test]
    fn heads_from_parts_read_as_parsed_ones() {
        let req = http::Request::get("http://h:1/x/y?z")
            .header("authorization", "Bearer k")
            .header("x-a", "1")
            .header("x-a", "2")
            .body(())
            .unwrap();
        let h = RequestHead::from_parts(&req.into_parts().0);
        assert_eq!(h.target(), Some("/x/y?z"));
        assert_eq!(h.path(), "/x/y");
        let all = text(&h);
        // The authority of an absolute target (an HTTP/2 request's) becomes its Host.
        assert_eq!(
            all,
            ["authorization=Bearer k", "x-a=1", "x-a=2", "host=h:1"]
        );
        let own = ResponseHead::own(StatusCode::NOT_FOUND, &[("content-type", b"text/plain")]);
        assert!(own.header("Content-Type", |v| v == Some(&b"text/plain"[..])));
    }

    #[test]
    fn heads_take_their_bytes_out_of_the_buffer_and_leave_the_rest() {
        let head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n";
        // Alone, with a short body after it (the buffer is the head's, the body copied out),
        // with a long one (the head copied out), and incomplete (nothing taken).
        for (rest, kept_buffer) in [(&b""[..], true), (b"abc", true), (&[b'z'; 200][..], false)] {
            let mut buf = Vec::with_capacity(4096);
            buf.extend_from_slice(head);
            buf.extend_from_slice(rest);
            let at = buf.as_ptr();
            let (h, info) = RequestHead::parse_h1(&mut buf, 1024).unwrap().unwrap();
            assert_eq!(info.head_len, head.len());
            assert_eq!(buf, rest);
            assert_eq!(h.bytes, head);
            assert_eq!(h.bytes.as_ptr() == at, kept_buffer, "{}", rest.len());
            assert_eq!(text(&h), ["Host=x", "Content-Length=3"]);
        }
        let mut part = head[..20].to_vec();
        assert!(RequestHead::parse_h1(&mut part, 1024).unwrap().is_none());
        assert_eq!(part, &head[..20]);
    }

    #[test]
    fn kept_lines_are_copied_as_sent_or_rewritten_when_odd() {
        // Lines in the canonical `name: value\r\n` form are copied in runs; others (no space,
        // a tab, trailing whitespace, an empty value, a bare LF) are written canonically.
        let raw = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nDrop: x\r\nC:3\r\nD:\t4 \r\nE: 5\r\n\
            F:\r\nG: 7\nH: 8\r\n\r\n";
        let (h, _) = parse(raw).unwrap().unwrap();
        let mut out = Vec::new();
        let mut seen = Vec::new();
        h.write_kept(&mut out, |i, f| {
            seen.push(i);
            f.name != b"Drop"
        });
        assert_eq!(seen, (0..9).collect::<Vec<_>>());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: \r\nG: 7\r\nH: 8\r\n"
        );
        // Many lines, some dropped, and an appended one after them.
        let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..12 {
            raw.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        let (mut resp, _) = ResponseHead::parse_h1(&mut raw, 1024, false)
            .unwrap()
            .unwrap();
        resp.append("x-last", b"l");
        let mut out = Vec::new();
        resp.write_kept(&mut out, |i, f| i % 3 != 1 || f.name == b"x-last");
        let want: String = (0..12)
            .filter(|i| i % 3 != 1)
            .map(|i| format!("X-{i}: {i}\r\n"))
            .collect();
        assert_eq!(String::from_utf8(out).unwrap(), want + "x-last: l\r\n");
        assert_eq!(resp.upstream_lines(), 12);
    }

    #[test]
    fn httparse_accepts_exactly_the_values_http_does() {
        for b in 0..=255u8 {
            let mut raw = b"GET / HTTP/1.1\r\nX: a".to_vec();
            raw.extend_from_slice(&[b, b'z']);
            raw.extend_from_slice(b"\r\n\r\n");
            let mut resp = b"HTTP/1.1 200 OK\r\nX: a".to_vec();
            resp.extend_from_slice(&[b, b'z']);
            resp.extend_from_slice(b"\r\n\r\n");
            let ok = valid_value(&[b]);
            assert_eq!(
                ok,
                HeaderValue::from_bytes(&[b'a', b, b'z']).is_ok(),
                "{b:#x}"
            );
            match parse(&raw) {
                Ok(Some((h, _))) => assert!(ok && h.get("x") == Some(&[b'a', b, b'z'][..])),
                Err(e) => assert!(!ok && e.status() == 400, "{b:#x}"),
                Ok(None) => panic!("{b:#x}: complete head read as partial"),
            }
            let r = ResponseHead::parse_h1(&mut resp, 1024, false);
            assert_eq!(r.is_ok(), ok, "{b:#x}");
        }
    }
}
