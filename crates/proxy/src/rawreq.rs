//! A client's request head on the own HTTP/1.1 path kept as the bytes it came in (issue 19):
//! identified, checked and written upstream straight from `httparse`'s slices, without the
//! `http::Request` / `HeaderMap` that hyper's path builds (an allocation per header value
//! and a hashed map per request, both ways). Heads the `http` types would read differently
//! (an absolute-form or unusual target, a header value `http` refuses) do not take this
//! form: they go the generic way, with the same answers as on hyper's path.

use std::ops::Range;

use http::{HeaderName, HeaderValue, Method};

use crate::h1;
use crate::rawpool::valid_value;

/// The longest target `http::Uri` accepts; longer ones take the generic path (which
/// answers 400, as hyper's).
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// Header lines a head usually fits in. Heads are parsed into an array of this many first:
/// clearing an array of [`h1::MAX_HEADERS`] costs 3 KiB of stores a parse, and a head is
/// parsed several times on its way (issue 19's profile). A larger one only when needed.
pub(crate) const FEW_HEADERS: usize = 24;

/// Where a head's header lines lie in its bytes, taken from the one parse it gets: a head
/// is read several times on its way (identity, length, the forwarded copy), and parsing it
/// again each time cost more than keeping these spans (issue 19's profile).
pub(crate) struct Lines(Vec<[u32; 4]>);

impl Lines {
    /// The spans of `headers`, parsed out of `base` (a head of at most 4 GiB).
    pub fn of(base: &[u8], headers: &[httparse::Header<'_>]) -> Lines {
        let at = |s: &[u8]| (s.as_ptr() as usize - base.as_ptr() as usize) as u32;
        Lines(
            headers
                .iter()
                .map(|h| {
                    let (n, v) = (at(h.name.as_bytes()), at(h.value));
                    [n, n + h.name.len() as u32, v, v + h.value.len() as u32]
                })
                .collect(),
        )
    }

    /// `f` of the header lines of `head` (the bytes these spans were taken from).
    pub fn with<R>(&self, head: &[u8], f: impl FnOnce(&[httparse::Header<'_>]) -> R) -> R {
        let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
        let mut many;
        let headers: &mut [httparse::Header<'_>] = if self.0.len() <= FEW_HEADERS {
            &mut few[..self.0.len()]
        } else {
            many = vec![httparse::EMPTY_HEADER; self.0.len()];
            &mut many
        };
        for (h, s) in headers.iter_mut().zip(&self.0) {
            let [n0, n1, v0, v1] = s.map(|i| i as usize);
            // Names were checked tokens (ASCII) by the parse.
            h.name = std::str::from_utf8(&head[n0..n1]).unwrap_or("");
            h.value = &head[v0..v1];
        }
        f(headers)
    }
}

/// A request head as the client sent it.
pub(crate) struct RawRequest {
    /// The request line and header lines, with the blank line.
    head: Vec<u8>,
    /// Its header lines.
    lines: Lines,
    method: Method,
    /// The origin-form target (path and query) within `head`.
    target: Range<usize>,
}

/// Whether the byte may appear in an origin-form target that `http::uri::PathAndQuery`
/// keeps exactly as sent (path and query alike; no fragment).
fn plain_target_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x5F | 0x61..=0x7A | 0x7C | 0x7E)
}

impl RawRequest {
    /// The head at the start of `buf` (`head_len` bytes, parsed into `req`), if it can be
    /// served in this form; `None`: take the generic path.
    pub fn of(buf: &[u8], head_len: usize, req: &httparse::Request<'_, '_>) -> Option<Self> {
        let method = Method::from_bytes(req.method?.as_bytes()).ok()?;
        let path = req.path?;
        if !path.starts_with('/')
            || path.len() > MAX_TARGET
            || !path.bytes().all(plain_target_byte)
            || !req
                .headers
                .iter()
                .all(|h| h.name.len() < 1 << 16 && valid_value(h.value))
        {
            return None;
        }
        // `path` is a slice of `buf`: its place there.
        let start = path.as_ptr() as usize - buf.as_ptr() as usize;
        Some(RawRequest {
            head: buf[..head_len].to_vec(),
            lines: Lines::of(buf, req.headers),
            method,
            target: start..start + path.len(),
        })
    }

    /// Its method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// Its target (path and query).
    pub fn target(&self) -> &str {
        // Checked ASCII in `of`.
        std::str::from_utf8(&self.head[self.target.clone()]).unwrap_or("/")
    }

    /// Its path (the target before any `?`).
    pub fn path(&self) -> &str {
        let t = self.target();
        t.split_once('?').map_or(t, |(p, _)| p)
    }

    /// `f` of its header lines.
    pub fn with_headers<R>(&self, f: impl FnOnce(&[httparse::Header<'_>]) -> R) -> R {
        self.lines.with(&self.head, f)
    }

    /// The first value of header `name`, if any.
    pub fn header<R>(&self, name: &str, f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        self.with_headers(|hs| {
            f(hs.iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value))
        })
    }

    /// Append the request as it goes upstream, up to its blank line: origin form, HTTP/1.1,
    /// without hop-by-hop headers (and those `Connection` names), `Expect`, the client's
    /// framing and any `X-Fairlane-Tenant` it sent; `Host` added if missing, then
    /// `X-Forwarded-For` and the tenant header; `Content-Length` of the body read.
    pub fn write_upstream(
        &self,
        out: &mut Vec<u8>,
        authority: &str,
        forwarded_for: &HeaderValue,
        tenant: Option<&HeaderValue>,
        body_len: usize,
    ) {
        out.extend_from_slice(self.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(&self.head[self.target.clone()]);
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let mut host = false;
        let mut length = false;
        self.with_headers(|hs| {
            for h in hs {
                host |= h.name.eq_ignore_ascii_case("host");
                length |= h.name.eq_ignore_ascii_case("content-length");
            }
            h1::write_headers(out, hs, |n| n.eq_ignore_ascii_case("x-fairlane-tenant"));
        });
        if !host && HeaderValue::from_str(authority).is_ok() {
            out.extend_from_slice(b"host: ");
            out.extend_from_slice(authority.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"x-forwarded-for: ");
        out.extend_from_slice(forwarded_for.as_bytes());
        out.extend_from_slice(b"\r\n");
        if let Some(v) = tenant {
            out.extend_from_slice(b"x-fairlane-tenant: ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        // The body's own length, never the client's framing.
        if body_len > 0 || length {
            h1::write_content_length(out, body_len as u64);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// As owned `http` parts (for a reload that left no raw upstream pool).
    pub fn to_parts(&self) -> http::request::Parts {
        let mut parts = http::Request::new(()).into_parts().0;
        parts.method = self.method.clone();
        parts.uri = self.target().parse().unwrap_or_default();
        self.with_headers(|hs| {
            parts.headers.reserve(hs.len());
            for h in hs {
                if h.name.eq_ignore_ascii_case("expect") {
                    continue;
                }
                // Checked valid in `of`.
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(h.name.as_bytes()),
                    HeaderValue::from_bytes(h.value),
                ) {
                    parts.headers.append(n, v);
                }
            }
        });
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(head: &[u8]) -> Option<RawRequest> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(head).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        RawRequest::of(head, n, &req)
    }

    #[test]
    fn plain_heads_are_kept_raw_and_written_upstream_cleaned() {
        let r = raw(
            b"POST /a/b?c=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\n\
            X-Hop: 1\r\nAuthorization: Bearer k\r\nX-Fairlane-Tenant: forged\r\n\
            Expect: 100-continue\r\nContent-Length: 3\r\nTE: trailers\r\n\r\nabc",
        )
        .expect("plain head");
        assert_eq!(r.method(), Method::POST);
        assert_eq!(r.target(), "/a/b?c=1");
        assert_eq!(r.path(), "/a/b");
        assert_eq!(
            r.header("authorization", |v| v.map(<[u8]>::to_vec)),
            Some(b"Bearer k".to_vec())
        );
        let mut out = Vec::new();
        let ff = HeaderValue::from_static("10.0.0.1");
        let t = HeaderValue::from_static("alice");
        r.write_upstream(&mut out, "up:1", &ff, Some(&t), 3);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "POST /a/b?c=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\n\
             x-forwarded-for: 10.0.0.1\r\nx-fairlane-tenant: alice\r\ncontent-length: 3\r\n\r\n"
        );
        // No Host: the upstream's authority; no tenant value: none sent.
        let r = raw(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut out = Vec::new();
        r.write_upstream(&mut out, "up:1", &ff, None, 0);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "GET / HTTP/1.1\r\nhost: up:1\r\nx-forwarded-for: 10.0.0.1\r\n\r\n"
        );
        let p = raw(b"GET /x?y HTTP/1.1\r\nExpect: 100-continue\r\nA: b\r\n\r\n")
            .unwrap()
            .to_parts();
        assert_eq!(p.uri.path_and_query().unwrap().as_str(), "/x?y");
        assert!(p.headers.get("expect").is_none());
        assert_eq!(p.headers["a"], "b");
    }

    #[test]
    fn unusual_heads_take_the_generic_path() {
        for head in [
            &b"GET http://h/a HTTP/1.1\r\n\r\n"[..],
            b"OPTIONS * HTTP/1.1\r\n\r\n",
            b"GET /a#f HTTP/1.1\r\n\r\n",
            b"GET /a<b> HTTP/1.1\r\n\r\n",
            b"GET /{x} HTTP/1.1\r\n\r\n",
        ] {
            assert!(raw(head).is_none(), "{}", String::from_utf8_lossy(head));
        }
    }
}
