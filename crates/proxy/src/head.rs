//! The one head type of the request path: a request or response head kept as header lines in
//! one byte buffer, with the spans of its lines taken once. Every client adapter produces a
//! [`RequestHead`] (the own HTTP/1.1 path straight from the bytes it read; hyper's server
//! from its `http` parts) and every upstream wire a [`ResponseHead`]; identification,
//! classification, the header rewriting (`rewrite`) and the writers on both sides read only
//! these. No `http::HeaderMap` is built on the own path (issue 19: an allocation per header
//! value and a hashed map per request, both ways).

use std::ops::Range;

use http::{HeaderName, HeaderValue, Method, StatusCode};

use crate::h1::{self, FrameError, RequestInfo};

/// Header lines a head usually fits in. Heads are parsed into an array of this many first:
/// clearing an array of [`h1::MAX_HEADERS`] costs 3 KiB of stores a parse (issue 19's
/// profile). A larger one only when needed.
pub(crate) const FEW_HEADERS: usize = 24;

/// Header lines most heads have at most: [`Lines::with`] hands out an array of this many
/// when they fit.
const TYPICAL_HEADERS: usize = 8;

/// The longest target `http::Uri` accepts; longer ones are refused (400), as hyper does.
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// Where a head's header lines lie: each line's name in `names` (every header name of the
/// head, one after another) and its value in the head's bytes. The names are copied once,
/// from text already checked (httparse's tokens, `http::HeaderName`s, the proxy's own
/// `&str`s), so reading them needs no UTF-8 check per call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lines {
    names: String,
    spans: Vec<[u32; 4]>,
}

impl Lines {
    /// The spans of `headers`, parsed out of `base` (a head of at most 4 GiB).
    pub fn of(base: &[u8], headers: &[httparse::Header<'_>]) -> Lines {
        let mut lines = Lines {
            names: String::with_capacity(headers.iter().map(|h| h.name.len()).sum()),
            spans: Vec::with_capacity(headers.len()),
        };
        for h in headers {
            let v = (h.value.as_ptr() as usize - base.as_ptr() as usize) as u32;
            lines.push(h.name, v, h.value.len());
        }
        lines
    }

    /// Add a line named `name` whose value is `len` bytes at `value` in the head's bytes.
    fn push(&mut self, name: &str, value: u32, len: usize) {
        let n = self.names.len() as u32;
        self.names.push_str(name);
        self.spans
            .push([n, n + name.len() as u32, value, value + len as u32]);
    }

    /// `f` of the header lines of `head` (the bytes these spans were taken from), in an
    /// array no larger than needed: clearing one is most of this function's cost.
    pub fn with<R>(&self, head: &[u8], f: impl FnOnce(&[httparse::Header<'_>]) -> R) -> R {
        let n = self.spans.len();
        if n <= TYPICAL_HEADERS {
            let mut a = [httparse::EMPTY_HEADER; TYPICAL_HEADERS];
            f(self.fill(head, &mut a[..n]))
        } else if n <= FEW_HEADERS {
            let mut a = [httparse::EMPTY_HEADER; FEW_HEADERS];
            f(self.fill(head, &mut a[..n]))
        } else {
            f(self.fill(head, &mut vec![httparse::EMPTY_HEADER; n]))
        }
    }

    /// `headers` (one per span) filled with the lines of `head`.
    fn fill<'a, 'h>(
        &'a self,
        head: &'a [u8],
        headers: &'h mut [httparse::Header<'a>],
    ) -> &'h [httparse::Header<'a>] {
        for (h, s) in headers.iter_mut().zip(&self.spans) {
            let [n0, n1, v0, v1] = s.map(|i| i as usize);
            // Each span is one whole pushed name: always on character boundaries.
            h.name = self.names.get(n0..n1).unwrap_or("");
            h.value = &head[v0..v1];
        }
        headers
    }

    /// The value of the first line of `head` named `name` (ASCII case-insensitive).
    fn find<'a>(&self, head: &'a [u8], name: &str) -> Option<&'a [u8]> {
        let names = self.names.as_bytes();
        self.spans.iter().find_map(|s| {
            let [n0, n1, v0, v1] = s.map(|i| i as usize);
            names[n0..n1]
                .eq_ignore_ascii_case(name.as_bytes())
                .then(|| &head[v0..v1])
        })
    }
}

/// Add `name: value` to a head's bytes and its line to `lines`.
fn push_line(bytes: &mut Vec<u8>, lines: &mut Lines, name: &str, value: &[u8]) {
    bytes.extend_from_slice(name.as_bytes());
    bytes.extend_from_slice(b": ");
    let v = bytes.len() as u32;
    bytes.extend_from_slice(value);
    bytes.extend_from_slice(b"\r\n");
    lines.push(name, v, value.len());
}

/// Header lines built from name/value pairs (a head that did not come as HTTP/1 bytes).
struct Built {
    bytes: Vec<u8>,
    lines: Lines,
}

impl Built {
    fn new(capacity: usize) -> Built {
        Built {
            bytes: Vec::with_capacity(capacity),
            lines: Lines::default(),
        }
    }

    fn push(&mut self, name: &str, value: &[u8]) {
        push_line(&mut self.bytes, &mut self.lines, name, value);
    }

    fn of(map: &http::HeaderMap) -> Built {
        let mut b = Built::new(map.len() * 32);
        for (name, value) in map {
            b.push(name.as_str(), value.as_bytes());
        }
        b
    }
}

/// Whether a header value is one `http::HeaderValue` accepts (no control characters but
/// tab): the own path refuses what hyper's would.
pub(crate) fn valid_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Whether the byte may appear in an origin-form target that `http::uri::PathAndQuery`
/// keeps exactly as sent (path and query alike; no fragment).
fn plain_target_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x5F | 0x61..=0x7A | 0x7C | 0x7E)
}

/// A head's header lines: the bytes they are in and where each lies.
#[derive(Debug)]
pub(crate) struct Fields {
    bytes: Vec<u8>,
    lines: Lines,
}

impl Fields {
    fn parsed(buf: &[u8], head_len: usize, headers: &[httparse::Header<'_>]) -> Fields {
        Fields {
            bytes: buf[..head_len].to_vec(),
            lines: Lines::of(buf, headers),
        }
    }

    fn built(b: Built) -> Fields {
        Fields {
            bytes: b.bytes,
            lines: b.lines,
        }
    }

    /// `f` of the header lines.
    pub fn with_headers<R>(&self, f: impl FnOnce(&[httparse::Header<'_>]) -> R) -> R {
        self.lines.with(&self.bytes, f)
    }

    /// `f` of the first value of header `name`, if any.
    pub fn header<R>(&self, name: &str, f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        f(self.lines.find(&self.bytes, name))
    }
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
    /// Parse an HTTP/1 request head at the start of `buf`: its framing, and whether it is
    /// HTTP/1.0. `Ok(None)`: incomplete. A head whose target or header values the `http`
    /// types would refuse is refused here too (400).
    pub fn parse_h1(
        buf: &[u8],
        max_head: usize,
    ) -> Result<Option<(RequestHead, RequestInfo, bool)>, FrameError> {
        match Self::parse_h1_in(buf, max_head, &mut [httparse::EMPTY_HEADER; FEW_HEADERS]) {
            Err(FrameError::HeadTooLarge) => Self::parse_h1_in(
                buf,
                max_head,
                &mut [httparse::EMPTY_HEADER; h1::MAX_HEADERS],
            ),
            r => r,
        }
    }

    fn parse_h1_in<'b>(
        buf: &'b [u8],
        max_head: usize,
        headers: &mut [httparse::Header<'b>],
    ) -> Result<Option<(RequestHead, RequestInfo, bool)>, FrameError> {
        let Some((req, info)) = h1::parse_request(buf, headers, max_head)? else {
            return Ok(None);
        };
        let bad = FrameError::Malformed("invalid request line or header");
        let method = Method::from_bytes(req.method.unwrap_or("").as_bytes()).map_err(|_| bad)?;
        if !req
            .headers
            .iter()
            .all(|h| h.name.len() < 1 << 16 && valid_value(h.value))
        {
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
        let head = RequestHead {
            fields: Fields::parsed(buf, info.head_len, req.headers),
            method,
            target,
        };
        Ok(Some((head, info, req.version == Some(0))))
    }

    /// The head of a request hyper's server read (HTTP/1.1 or HTTP/2). An HTTP/2
    /// request's `:authority` becomes its `Host`, as an HTTP/1.1 client would have sent it.
    pub fn from_parts(parts: &http::request::Parts) -> RequestHead {
        let mut built = Built::of(&parts.headers);
        if let Some(a) = parts.uri.authority() {
            if !parts.headers.contains_key(http::header::HOST) {
                built.push("host", a.as_str().as_bytes());
            }
        }
        RequestHead {
            fields: Fields::built(built),
            method: parts.method.clone(),
            target: target_of(&parts.uri),
        }
    }

    /// Its method.
    pub fn method(&self) -> &Method {
        &self.method
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
        t.split_once('?').map_or(t, |(p, _)| p)
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
    /// a `HEAD`. `Ok(None)`: incomplete.
    pub fn parse_h1(
        buf: &[u8],
        max_head: usize,
        head_method: bool,
    ) -> Result<Option<(ResponseHead, h1::ResponseInfo)>, FrameError> {
        let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
        match Self::parse_h1_in(buf, max_head, head_method, &mut few) {
            Err(FrameError::HeadTooLarge) => {
                let mut many = [httparse::EMPTY_HEADER; h1::MAX_HEADERS];
                Self::parse_h1_in(buf, max_head, head_method, &mut many)
            }
            r => r,
        }
    }

    fn parse_h1_in<'b>(
        buf: &'b [u8],
        max_head: usize,
        head_method: bool,
        headers: &mut [httparse::Header<'b>],
    ) -> Result<Option<(ResponseHead, h1::ResponseInfo)>, FrameError> {
        let Some((resp, info)) = h1::parse_response(buf, headers, max_head, head_method)? else {
            return Ok(None);
        };
        let bad = FrameError::Malformed("invalid response header");
        let status = StatusCode::from_u16(info.status).map_err(|_| bad)?;
        if !resp
            .headers
            .iter()
            .all(|h| h.name.len() < 1 << 16 && valid_value(h.value))
        {
            return Err(bad);
        }
        let head = ResponseHead {
            status,
            fields: Fields::parsed(buf, info.head_len, resp.headers),
            upstream: resp.headers.len(),
        };
        Ok(Some((head, info)))
    }

    /// The head of a response an HTTP/2 upstream sent.
    pub fn from_parts(status: StatusCode, headers: &http::HeaderMap) -> ResponseHead {
        ResponseHead {
            status,
            fields: Fields::built(Built::of(headers)),
            upstream: headers.len(),
        }
    }

    /// Add a header line (a valid name and value) after the others.
    pub fn append(&mut self, name: &str, value: &[u8]) {
        let f = &mut self.fields;
        push_line(&mut f.bytes, &mut f.lines, name, value);
    }

    /// A head of the proxy's own with these header lines.
    pub fn own(status: StatusCode, headers: &[(&str, &[u8])]) -> ResponseHead {
        let mut b = Built::new(headers.len() * 40);
        for (n, v) in headers {
            b.push(n, v);
        }
        ResponseHead {
            status,
            fields: Fields::built(b),
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
pub(crate) fn http_header(h: &httparse::Header<'_>) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_bytes(h.name.as_bytes()).ok()?,
        HeaderValue::from_bytes(h.value).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::BodyLen;

    fn parse(raw: &[u8]) -> Result<Option<(RequestHead, RequestInfo, bool)>, FrameError> {
        RequestHead::parse_h1(raw, 64 * 1024)
    }

    #[test]
    fn request_heads_keep_their_bytes_or_an_owned_target() {
        let (h, info, http10) = parse(
            b"POST /a?b=1 HTTP/1.0\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
        )
        .unwrap()
        .unwrap();
        assert!(matches!(h.target, Target::InHead(_)));
        assert_eq!(h.method(), Method::POST);
        assert_eq!(h.target(), Some("/a?b=1"));
        assert_eq!(h.path(), "/a");
        assert!(http10);
        assert_eq!(info.body, BodyLen::Length(3));
        assert!(info.expect_continue && !info.keep_alive);
        assert_eq!(
            h.header("host", |v| v.map(<[u8]>::to_vec)),
            Some(b"x".to_vec())
        );
        // Absolute form: what `http::Uri` reads it as, as on hyper's path.
        let (h, _, _) = parse(b"GET http://h/a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.target(), Some("/a?b=1"));
        for odd in [
            &b"GET /{x} HTTP/1.1\r\n\r\n"[..],
            b"OPTIONS * HTTP/1.1\r\n\r\n",
        ] {
            let (h, _, _) = parse(odd).unwrap().unwrap();
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
        // More lines than the small array holds, and an appended one.
        let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..FEW_HEADERS + 3 {
            raw.extend_from_slice(format!("X-H{i}: v").as_bytes());
            raw.push(0xff);
            raw.extend_from_slice(format!("{i}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        let (h, _, _) = parse(&raw).unwrap().unwrap();
        let names = h.with_headers(|hs| hs.iter().map(|x| x.name.to_string()).collect::<Vec<_>>());
        assert_eq!(names.len(), FEW_HEADERS + 4);
        assert_eq!(names[0], "Host");
        assert_eq!(names[FEW_HEADERS + 3], format!("X-H{}", FEW_HEADERS + 2));
        assert!(h.header("x-h7", |v| v == Some(&b"v\xff7"[..])));
        let (mut resp, _) = ResponseHead::parse_h1(b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\n", 1024, false)
            .unwrap()
            .unwrap();
        resp.append("x-b", b"2");
        assert_eq!(
            resp.with_headers(|hs| hs
                .iter()
                .map(|x| format!("{}={}", x.name, String::from_utf8_lossy(x.value)))
                .collect::<Vec<_>>()),
            ["A=1", "x-b=2"]
        );
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
        let all = h.with_headers(|hs| {
            hs.iter()
                .map(|x| format!("{}={}", x.name, String::from_utf8_lossy(x.value)))
                .collect::<Vec<_>>()
        });
        // The authority of an absolute target (an HTTP/2 request's) becomes its Host.
        assert_eq!(
            all,
            ["authorization=Bearer k", "x-a=1", "x-a=2", "host=h:1"]
        );
        let own = ResponseHead::own(StatusCode::NOT_FOUND, &[("content-type", b"text/plain")]);
        assert!(own.header("Content-Type", |v| v == Some(&b"text/plain"[..])));
    }
}
