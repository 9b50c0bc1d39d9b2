//! Request bodies on their way upstream: read in full before the request queues (ordinary
//! requests: a slow client holds no slot), or streamed once the request holds its slot
//! (gRPC, and bodies without a length), each gap between two pieces bounded by
//! `limits.stream_idle_timeout_ms` and the whole by `limits.max_stream_bytes`.

use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;

/// Errors of bodies the proxy streams.
pub type BoxError = Box<dyn Error + Send + Sync>;

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
    /// Streamed as the client sends it.
    Stream(Limited<'a>),
}

/// A streamed body with its bounds: at most `max` bytes, and no gap longer than `idle`.
pub(crate) struct Limited<'a> {
    inner: Source<'a>,
    idle: Duration,
    max: u64,
    seen: u64,
}

impl<'a> Limited<'a> {
    /// Bound `inner` to `max` bytes and gaps of at most `idle`.
    pub fn new(inner: Source<'a>, idle: Duration, max: u64) -> Self {
        Limited {
            inner,
            idle,
            max,
            seen: 0,
        }
    }

    /// The next piece of data (`None` at the end), or why the body failed.
    pub async fn next(&mut self) -> Option<Result<Bytes, BodyFault>> {
        loop {
            let frame = match tokio::time::timeout(self.idle, self.inner.frame()).await {
                Err(_) => return Some(Err(BodyFault::Timeout)),
                Ok(None) => return None,
                Ok(Some(Err(e))) => return Some(Err(BodyFault::of(&e))),
                Ok(Some(Ok(f))) => f,
            };
            let Ok(d) = frame.into_data() else { continue };
            self.seen += d.len() as u64;
            if self.seen > self.max {
                return Some(Err(BodyFault::TooLarge));
            }
            return Some(Ok(d));
        }
    }
}
