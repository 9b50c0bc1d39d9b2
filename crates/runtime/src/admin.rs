//! What the admin listeners of `fairlane-proxy` and `fairlane-pg` answer with (feature
//! `admin`): one reply shape for `/metrics`, `/status`, `/dashboard` and the rest.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;

/// A whole response: `status`, `Content-Type: content_type`, `Cache-Control: no-store` (an
/// admin page is live state, never to be cached) and `body`.
///
/// ```
/// use fairlane_runtime::admin::reply;
///
/// let r = reply(http::StatusCode::OK, "text/plain", "ok\n");
/// assert_eq!(r.headers()["cache-control"], "no-store");
/// assert_eq!(r.headers()["content-type"], "text/plain");
/// ```
pub fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let headers = r.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
