//! The one place headers are rewritten on their way through the proxy: hop-by-hop headers
//! (RFC 9110 §7.6.1) and those a `Connection` header names are dropped both ways; a
//! forwarded request gets `Host` if it had none, `X-Forwarded-For` and the tenant header in
//! place of whatever the client sent, and the body's own framing, never the client's.
//! Every wire writes from these functions, whichever side read the head.

use http::HeaderValue;

use crate::ascii::eq_lower;
use crate::head::{http_header, write_line, Field, Fields, RequestHead, ResponseHead};

/// The header the upstream learns the tenant from (whatever the client sent is replaced).
pub(crate) const TENANT_HEADER: &str = "x-fairlane-tenant";

/// The response header naming a request's priority level.
pub(crate) const LEVEL_HEADER: &str = "x-fairlane-priority-level";
/// The response header naming the flow schema that classified a request.
pub(crate) const SCHEMA_HEADER: &str = "x-fairlane-flow-schema";
/// Response headers only the proxy sets: the upstream's own copies are dropped, so a client
/// can trust what they say.
const PROXY_SET: [&str; 2] = [LEVEL_HEADER, SCHEMA_HEADER];

/// Whether `name` is a hop-by-hop header: one that describes one connection, never
/// forwarded (RFC 9110 §7.6.1). Compared only with the names of its length.
pub(crate) fn hop_by_hop(name: &[u8]) -> bool {
    let names: &[&[u8]] = match name.len() {
        2 => &[b"te"],
        7 => &[b"trailer", b"upgrade"],
        10 => &[b"connection", b"keep-alive"],
        16 => &[b"proxy-connection"],
        17 => &[b"transfer-encoding"],
        19 => &[b"proxy-authorization"],
        _ => return false,
    };
    names.iter().any(|n| eq_lower(name, n))
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
pub(crate) fn lists(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The test, for each line of `fields` (given its index and field), of whether it goes on:
/// end-to-end, that is not hop-by-hop and not named by a `Connection` header, and not one
/// `skip` names.
fn end_to_end<'f>(
    fields: &'f Fields,
    mut skip: impl FnMut(usize, Field<'_>) -> bool + 'f,
) -> impl FnMut(usize, Field<'_>) -> bool + 'f {
    let connection = fields.iter().any(|f| eq_lower(f.name, b"connection"));
    move |i, f| {
        // `skip` first: it may note lines it does not drop.
        !(skip(i, f)
            || hop_by_hop(f.name)
            || connection
                && fields
                    .iter()
                    .any(|c| eq_lower(c.name, b"connection") && lists(c.value, f.name)))
    }
}

/// Whether the `i`-th line of `response` is an upstream's copy of a header only the proxy
/// sets.
fn spoofed(response: &ResponseHead, i: usize, f: Field<'_>) -> bool {
    i < response.upstream_lines() && PROXY_SET.iter().any(|p| eq_lower(f.name, p.as_bytes()))
}

/// What the proxy adds to a request it forwards.
pub(crate) struct Forwarding<'a> {
    /// The upstream's `host:port`: the `Host` of a request that had none.
    pub authority: &'a str,
    /// The client's address, for `X-Forwarded-For`.
    pub forwarded_for: &'a HeaderValue,
    /// The tenant's name as a header value (`None`: not a valid one; no header sent).
    pub tenant: Option<&'a HeaderValue>,
}

/// How a forwarded request's body goes upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// Read in full: this many bytes (a `Content-Length` is written if non-zero, or if the
    /// client sent one).
    Length(u64),
    /// Streamed as it comes: chunked.
    Chunked,
    /// None: a WebSocket upgrade, whose `Upgrade` and `Connection: upgrade` are kept (the
    /// one case where they are); after a `101` the connection is a tunnel.
    Upgrade,
}

/// Append `request` as it goes upstream over HTTP/1.1, up to its blank line: origin form,
/// the end-to-end headers but `Expect`, the client's framing and its tenant header; then
/// `Host` if it had none, `X-Forwarded-For`, the tenant header and the body's framing.
pub(crate) fn request_h1(
    out: &mut Vec<u8>,
    request: &RequestHead,
    fwd: &Forwarding<'_>,
    body: BodyFraming,
) {
    out.extend_from_slice(request.method().as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.target().unwrap_or("/").as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let (mut host, mut length) = (false, false);
    let skip = |_, f: Field<'_>| {
        let n = f.name;
        host |= eq_lower(n, b"host");
        let l = eq_lower(n, b"content-length");
        length |= l;
        l || eq_lower(n, b"expect") || eq_lower(n, TENANT_HEADER.as_bytes())
    };
    request.write_kept(out, end_to_end(request, skip));
    if !host && HeaderValue::from_str(fwd.authority).is_ok() {
        write_line(out, b"host", fwd.authority.as_bytes());
    }
    write_line(out, b"x-forwarded-for", fwd.forwarded_for.as_bytes());
    if let Some(v) = fwd.tenant {
        write_line(out, TENANT_HEADER.as_bytes(), v.as_bytes());
    }
    match body {
        BodyFraming::Length(n) if n > 0 || length => crate::h1::write_content_length(out, n),
        BodyFraming::Length(_) => {}
        BodyFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        BodyFraming::Upgrade => {
            let v = request.get("upgrade");
            write_line(out, b"upgrade", v.unwrap_or(b"websocket"));
            out.extend_from_slice(b"connection: upgrade\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Append one trailer field line of a chunked body's last chunk (hop-by-hop ones dropped).
pub(crate) fn trailer_h1(out: &mut Vec<u8>, name: &http::HeaderName, value: &HeaderValue) {
    if !hop_by_hop(name.as_str().as_bytes()) {
        write_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
}

/// `request` as it goes upstream over HTTP/2: `:scheme` the wire's (`https`: TLS), and
/// `:authority` its `Host` (an HTTP/2 client's `:authority`) or else the upstream's; the
/// end-to-end headers but `Host`, `Expect`, the client's framing and its tenant header;
/// `te: trailers` when the client asked for trailers (gRPC does), then `X-Forwarded-For` and
/// the tenant header. The body's length, when known, is set by the HTTP/2 client. `None`:
/// the target cannot be sent (not a path).
pub(crate) fn request_h2(
    request: &RequestHead,
    fwd: &Forwarding<'_>,
    https: bool,
) -> Option<http::request::Parts> {
    let mut parts = http::Request::new(()).into_parts().0;
    parts.method = request.method().clone();
    parts.version = http::Version::HTTP_2;
    let host = request.header("host", |v| {
        v.and_then(|v| http::uri::Authority::try_from(v).ok())
    });
    let authority = match host {
        Some(a) => a,
        None => http::uri::Authority::try_from(fwd.authority).ok()?,
    };
    parts.uri = http::Uri::builder()
        .scheme(if https { "https" } else { "http" })
        .authority(authority)
        .path_and_query(request.target()?)
        .build()
        .ok()?;
    parts.headers.reserve(request.iter().count() + 3);
    let trailers = request
        .iter()
        .any(|f| eq_lower(f.name, b"te") && lists(f.value, b"trailers"));
    let skip = |_, f: Field<'_>| {
        let n = f.name;
        eq_lower(n, b"host")
            || eq_lower(n, b"content-length")
            || eq_lower(n, b"expect")
            || eq_lower(n, TENANT_HEADER.as_bytes())
    };
    let mut keep = end_to_end(request, skip);
    for (i, f) in request.iter().enumerate() {
        if let Some((n, v)) = keep(i, f).then(|| http_header(f)).flatten() {
            parts.headers.append(n, v);
        }
    }
    if trailers {
        parts
            .headers
            .insert(http::header::TE, HeaderValue::from_static("trailers"));
    }
    parts
        .headers
        .insert("x-forwarded-for", fwd.forwarded_for.clone());
    if let Some(v) = fwd.tenant {
        parts.headers.insert(TENANT_HEADER, v.clone());
    }
    Some(parts)
}

/// Append a response's end-to-end header lines for an HTTP/1.1 client (its framing is the
/// proxy's). Returns whether it had a `Content-Length` and a `Date`.
pub(crate) fn response_h1(out: &mut Vec<u8>, response: &ResponseHead) -> (bool, bool) {
    let (mut length, mut date) = (false, false);
    let skip = |i, f: Field<'_>| {
        length |= eq_lower(f.name, b"content-length");
        date |= eq_lower(f.name, b"date");
        spoofed(response, i, f)
    };
    response.write_kept(out, end_to_end(response, skip));
    (length, date)
}

/// Append a `101 Switching Protocols` answer's header lines for the client of a tunnel:
/// its end-to-end headers, then its `Upgrade` and `Connection: upgrade`, kept for this case.
pub(crate) fn switching_h1(out: &mut Vec<u8>, response: &ResponseHead) {
    response_h1(out, response);
    let v = response.get("upgrade");
    write_line(out, b"upgrade", v.unwrap_or(b"websocket"));
    out.extend_from_slice(b"connection: upgrade\r\n");
}

/// A response's end-to-end headers as `http` parts (for a client on hyper's server).
pub(crate) fn response_parts(response: &ResponseHead) -> http::response::Parts {
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = response.status;
    let mut keep = end_to_end(response, |i, f| spoofed(response, i, f));
    for (i, f) in response.iter().enumerate() {
        if let Some((n, v)) = keep(i, f).then(|| http_header(f)).flatten() {
            parts.headers.append(n, v);
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_names_in_any_case_and_no_others() {
        let hop = [
            "Connection",
            "KEEP-ALIVE",
            "proxy-connection",
            "TE",
            "Trailer",
            "transfer-Encoding",
            "upgrade",
            "Proxy-Authorization",
        ];
        assert!(hop.iter().all(|n| hop_by_hop(n.as_bytes())));
        let end_to_end = [
            "host",
            "tea",
            "trailers",
            "upgrades",
            "connectioN1",
            "content-length",
            "",
        ];
        assert!(!end_to_end.iter().any(|n| hop_by_hop(n.as_bytes())));
    }

    fn head(raw: &[u8]) -> RequestHead {
        RequestHead::parse_h1(&mut raw.to_vec(), 64 * 1024)
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn forwarded_requests_are_cleaned_and_marked() {
        let r = head(
            b"POST /a/b?c=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\n\
            X-Hop: 1\r\nAuthorization: Bearer k\r\nX-Fairlane-Tenant: forged\r\n\
            Expect: 100-continue\r\nContent-Length: 3\r\nTE: trailers\r\nKeep-Alive: 5\r\n\r\nabc",
        );
        let ff = HeaderValue::from_static("10.0.0.1");
        let t = HeaderValue::from_static("alice");
        let fwd = Forwarding {
            authority: "up:1",
            forwarded_for: &ff,
            tenant: Some(&t),
        };
        let mut out = Vec::new();
        request_h1(&mut out, &r, &fwd, BodyFraming::Length(3));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "POST /a/b?c=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\n\
             x-forwarded-for: 10.0.0.1\r\nx-fairlane-tenant: alice\r\ncontent-length: 3\r\n\r\n"
        );
        // No Host: the upstream's authority; no tenant value: none sent.
        let r = head(b"GET / HTTP/1.0\r\n\r\n");
        let fwd = Forwarding {
            tenant: None,
            ..fwd
        };
        let mut out = Vec::new();
        request_h1(&mut out, &r, &fwd, BodyFraming::Length(0));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "GET / HTTP/1.1\r\nhost: up:1\r\nx-forwarded-for: 10.0.0.1\r\n\r\n"
        );
    }

    #[test]
    fn websocket_upgrades_keep_their_upgrade_headers() {
        let r = head(
            b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
            Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n",
        );
        let ff = HeaderValue::from_static("10.0.0.1");
        let fwd = Forwarding {
            authority: "up:1",
            forwarded_for: &ff,
            tenant: None,
        };
        let mut out = Vec::new();
        request_h1(&mut out, &r, &fwd, BodyFraming::Upgrade);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "GET /ws HTTP/1.1\r\nHost: h\r\nSec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\
             x-forwarded-for: 10.0.0.1\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
        );
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
            Connection: Upgrade\r\nSec-WebSocket-Accept: a\r\n\r\n";
        let (resp, _) = ResponseHead::parse_h1(&mut raw.to_vec(), 64 * 1024, false)
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        switching_h1(&mut out, &resp);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "Sec-WebSocket-Accept: a\r\nupgrade: websocket\r\nconnection: upgrade\r\n"
        );
    }

    #[test]
    fn upstream_copies_of_the_proxys_own_headers_are_dropped() {
        let raw = b"HTTP/1.1 200 OK\r\nX-Fairlane-Priority-Level: exempt\r\nX-A: 1\r\n\
            x-fairlane-flow-schema: forged\r\nX-Fairlane-Tenant: t\r\n\r\n";
        let parsed = || {
            ResponseHead::parse_h1(&mut raw.to_vec(), 64 * 1024, false)
                .unwrap()
                .unwrap()
                .0
        };
        let text = |r: &ResponseHead| {
            let mut out = Vec::new();
            response_h1(&mut out, r);
            String::from_utf8(out).unwrap()
        };
        // No levels: the proxy names none, and the upstream's are gone all the same.
        let resp = parsed();
        assert_eq!(text(&resp), "X-A: 1\r\nX-Fairlane-Tenant: t\r\n");
        let parts = response_parts(&resp);
        assert!(parts.headers.get(LEVEL_HEADER).is_none());
        assert!(parts.headers.get(SCHEMA_HEADER).is_none());
        // With levels: only the proxy's own lines, whatever the upstream sent.
        let mut resp = parsed();
        resp.append(LEVEL_HEADER, b"workload-low");
        resp.append(SCHEMA_HEADER, b"catch-all");
        assert_eq!(
            text(&resp),
            "X-A: 1\r\nX-Fairlane-Tenant: t\r\nx-fairlane-priority-level: workload-low\r\n\
             x-fairlane-flow-schema: catch-all\r\n"
        );
        let parts = response_parts(&resp);
        let all = |n| parts.headers.get_all(n).iter().collect::<Vec<_>>();
        assert_eq!(all(LEVEL_HEADER), ["workload-low"]);
        assert_eq!(all(SCHEMA_HEADER), ["catch-all"]);
        // An HTTP/2 upstream's head alike; the proxy's own answers keep theirs.
        let mut map = http::HeaderMap::new();
        map.insert(LEVEL_HEADER, HeaderValue::from_static("exempt"));
        let h2 = ResponseHead::from_parts(http::StatusCode::OK, &map);
        assert_eq!(text(&h2), "");
        let own = ResponseHead::own(http::StatusCode::TOO_MANY_REQUESTS, &[(LEVEL_HEADER, b"l")]);
        assert_eq!(text(&own), "x-fairlane-priority-level: l\r\n");
    }

    #[test]
    fn responses_lose_hop_by_hop_headers_both_ways() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, X-Hop\r\n\
            X-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Cost-Ms: 3\r\nTE: trailers\r\n\
            Set-Cookie: a\r\nSet-Cookie: b\r\n\r\n";
        let (resp, _) = ResponseHead::parse_h1(&mut raw.to_vec(), 64 * 1024, true)
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        assert_eq!(response_h1(&mut out, &resp), (true, false));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "Content-Length: 2\r\nX-Cost-Ms: 3\r\nSet-Cookie: a\r\nSet-Cookie: b\r\n"
        );
        let parts = response_parts(&resp);
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers.len(), 4);
        assert!(parts.headers.get("x-hop").is_none() && parts.headers.get("keep-alive").is_none());
        assert_eq!(parts.headers.get_all("set-cookie").iter().count(), 2);
    }
}
