//! The hyper client adapter: HTTP/2 clients (prior knowledge), and HTTP/1.1 clients with
//! `listen.http1 = "hyper"`. hyper's server reads the request; its head becomes a
//! [`RequestHead`], its body is read in full before the request queues, and the pipeline's
//! [`Answer`] goes back as an `http::Response`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::conn::{ActiveGuard, ConnState};
use crate::head::RequestHead;
use crate::pipeline;
use crate::respond::{Answer, ProxyBody};
use crate::state::{Inner, Peer};
use crate::stream::BoxError;
use crate::stream::{BodyFault, ReqBody};

/// The response body hyper's server writes: the answer's, holding the connection busy.
type HyperBody = UnsyncBoxBody<Bytes, BoxError>;

/// The hyper service of one client connection.
pub(crate) fn service(
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    state: Arc<ConnState>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<HyperBody>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<HyperBody>, Infallible>> + Send,
> + Send
       + 'static {
    hyper::service::service_fn(move |req| {
        let inner = inner.clone();
        let peer = peer.clone();
        // The connection is busy (not evictable, no idle timeout) from here until the
        // response body has been written or dropped.
        let guard = ActiveGuard::new(state.clone());
        // Boxed: hyper keeps a `Box<Option<this future>>` per connection for its whole life,
        // idle or not; boxed, that is a pointer, and the request's state is allocated only
        // while a request is in progress (issue 19).
        let handle = Box::pin(handle(inner, req, peer));
        async move {
            let a = handle.await;
            // The guard lives as long as the body (the closure owns it).
            Ok::<_, Infallible>(response(a).map(|body| {
                body.map_frame(move |f| {
                    let _busy = &guard;
                    f
                })
                .boxed_unsync()
            }))
        }
    })
}

/// Serve one request: [`pipeline::admit`], read the body, [`pipeline::dispatch`].
async fn handle(inner: Arc<Inner>, req: Request<Incoming>, peer: Arc<Peer>) -> Answer {
    let arrival = Instant::now();
    let settings = inner.settings();
    // Split at once, and `req` never borrowed: a borrowed local keeps its place in this
    // future across every await, and a queued request keeps this future (issue 19).
    let (parts, body) = req.into_parts();
    let head = RequestHead::from_parts(&parts);
    drop(parts);
    let admitted = match pipeline::admit(&inner, &settings, head, &peer, arrival) {
        Ok(a) => a,
        Err(a) => return a,
    };
    if !body.is_end_stream() && admitted.streams(body.size_hint().exact()) {
        let source = body.map_err(BoxError::from);
        let body = ReqBody::Owned(admitted.limited(Box::pin(source)));
        return pipeline::dispatch(&inner, admitted, body, &peer, None).await;
    }
    // Boxed, and only when there is a body: its reader would otherwise size this future.
    let read = if body.is_end_stream() {
        Ok(Bytes::new())
    } else {
        let (max, limit) = admitted.body_limits();
        Box::pin(read_body(body, max, limit)).await
    };
    match read {
        Ok(body) => pipeline::dispatch(&inner, admitted, ReqBody::Full(body), &peer, None).await,
        Err(f) => pipeline::body_fault(admitted, f),
    }
}

/// The answer as hyper's response: the end-to-end headers, and `Connection: close` when the
/// answer says so (hyper then closes an HTTP/1 connection after it).
fn response(a: Answer) -> Response<ProxyBody> {
    let mut parts = crate::rewrite::response_parts(&a.head);
    if a.close {
        parts
            .headers
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    Response::from_parts(parts, a.body)
}

/// Read a request body in full (at most `max` bytes, within `limit`) before it queues: a
/// client that trickles its body holds no upstream slot meanwhile.
async fn read_body(mut body: Incoming, max: u64, limit: Duration) -> Result<Bytes, BodyFault> {
    let read = async {
        let mut parts: Vec<Bytes> = Vec::new();
        let mut total = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyFault::Broken)?;
            if let Ok(d) = frame.into_data() {
                total += d.len() as u64;
                if total > max {
                    return Err(BodyFault::TooLarge);
                }
                parts.push(d);
            }
        }
        Ok(match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().unwrap_or_default(),
            _ => {
                let mut all = Vec::with_capacity(total as usize);
                parts.iter().for_each(|p| all.extend_from_slice(p));
                Bytes::from(all)
            }
        })
    };
    tokio::time::timeout(limit, read)
        .await
        .map_err(|_| BodyFault::Timeout)?
}
