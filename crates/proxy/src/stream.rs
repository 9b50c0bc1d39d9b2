//! Request bodies on their way upstream: read in full before the request queues (ordinary
//! requests: a slow client holds no slot), or streamed once the request holds its slot
//! (gRPC, and bodies without a length), each gap between two pieces bounded by
//! `limits.stream_idle_timeout_ms` and the whole by `limits.max_stream_bytes`.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

/// Errors of bodies the proxy streams.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// What `Body::poll_frame` returns for every body the proxy passes on.
pub type PollFrame = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// Why a request body could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyFault {
    /// Larger than `limits.max_body_bytes`, or a stream over `limits.max_stream_bytes` (413).
    TooLarge,
    /// Not received within `limits.body_timeout_ms`, or a stream idle for
    /// `limits.stream_idle_timeout_ms` (408).
    Timeout,
    /// Broken off or badly framed (400).
    Broken,
}

impl fmt::Display for BodyFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BodyFault::TooLarge => "request body too large",
            BodyFault::Timeout => "request body not received in time",
            BodyFault::Broken => "request body broken off",
        })
    }
}

impl Error for BodyFault {}

impl BodyFault {
    /// The fault behind a streamed body's error (`Broken` if it is another error).
    pub fn of(e: &BoxError) -> BodyFault {
        e.downcast_ref::<BodyFault>()
            .copied()
            .unwrap_or(BodyFault::Broken)
    }
}

/// A request body as the client adapter hands it over, streamed.
pub(crate) type Source<'a> = Pin<Box<dyn Body<Data = Bytes, Error = BoxError> + Send + 'a>>;

/// A request body going upstream.
pub(crate) enum ReqBody<'a> {
    /// Read in full before the request queued.
    Full(Bytes),
    /// Streamed as the client sends it, from a source that borrows the client's connection
    /// (the own HTTP/1.1 adapter): read on the request's own task.
    Stream(Limited<'a>),
    /// Streamed as the client sends it, from a source of its own (hyper's server): a wire
    /// may hand it to a task of its own, so that it flows while the response does.
    Owned(Limited<'static>),
    /// None: a WebSocket upgrade (`crate::tunnel`), holding its place in its tenant's
    /// tunnel budget. Only the HTTP/1.1 wire carries it.
    Upgrade(crate::tunnel::Pass),
}

/// A streamed body with its bounds: at most `max` bytes, and no gap longer than `idle`.
/// Trailers pass through.
pub(crate) struct Limited<'a> {
    inner: Source<'a>,
    idle: Duration,
    max: u64,
    seen: u64,
    /// The gap timer, armed when the source is first found with nothing ready.
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
    /// A fault already reported: the body is over.
    failed: bool,
}

impl<'a> Limited<'a> {
    /// Bound `inner` to `max` bytes and gaps of at most `idle`.
    pub fn new(inner: Source<'a>, idle: Duration, max: u64) -> Self {
        Limited {
            inner,
            idle,
            max,
            seen: 0,
            timer: None,
            armed: false,
            failed: false,
        }
    }

    /// The next frame (`None` at the end), or why the body failed.
    pub async fn next_frame(&mut self) -> Option<Result<Frame<Bytes>, BodyFault>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_frame(cx))
            .await
            .map(|r| r.map_err(|e| BodyFault::of(&e)))
    }

    fn fail(&mut self, fault: BodyFault) -> PollFrame {
        self.failed = true;
        Poll::Ready(Some(Err(fault.into())))
    }
}

impl Body for Limited<'_> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> PollFrame {
        let me = self.get_mut();
        if me.failed {
            return Poll::Ready(None);
        }
        match me.inner.as_mut().poll_frame(cx) {
            Poll::Pending => {
                if !me.armed {
                    let due = tokio::time::Instant::now() + me.idle;
                    match &mut me.timer {
                        Some(t) => t.as_mut().reset(due),
                        None => me.timer = Some(Box::pin(tokio::time::sleep_until(due))),
                    }
                    me.armed = true;
                }
                match me.timer.as_mut().map(|t| t.as_mut().poll(cx)) {
                    Some(Poll::Ready(())) => me.fail(BodyFault::Timeout),
                    _ => Poll::Pending,
                }
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => me.fail(BodyFault::of(&e)),
            Poll::Ready(Some(Ok(f))) => {
                me.armed = false;
                if let Some(d) = f.data_ref() {
                    me.seen += d.len() as u64;
                    if me.seen > me.max {
                        return me.fail(BodyFault::TooLarge);
                    }
                }
                Poll::Ready(Some(Ok(f)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
