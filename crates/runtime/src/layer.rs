//! A `tower::Layer` that puts a [`FairGate`] in front of any `Service`: each request waits
//! fairly for a seat, by the tenant and class a user closure reads from it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fairlane_core::{ClassId, TenantId};
use tower_layer::Layer;
use tower_service::Service;

use crate::gate::{AcquireError, FairGate};

/// The tenant an HTTP request names in a header (what `http::HeaderMap::get` returns): its
/// value read as a decimal id; tenant 0 when the header is absent or not a number.
///
/// ```
/// use fairlane_core::TenantId;
/// use fairlane_runtime::header_tenant;
///
/// assert_eq!(header_tenant(Some(&"7")), TenantId(7));
/// assert_eq!(header_tenant(Some(&"seven")), TenantId(0));
/// assert_eq!(header_tenant::<&str>(None), TenantId(0));
/// ```
pub fn header_tenant<V: AsRef<[u8]>>(value: Option<&V>) -> TenantId {
    let id = value
        .and_then(|v| std::str::from_utf8(v.as_ref()).ok())
        .and_then(|v| v.parse().ok());
    TenantId(id.unwrap_or(0))
}

/// Wraps services in [`FairService`]: requests wait for a seat of `gate`, classified by
/// `classify(&request) -> (TenantId, ClassId)`.
///
/// ```
/// use fairlane_core::{ClassId, TenantId};
/// use fairlane_runtime::{FairGate, FairLayer};
///
/// let gate = FairGate::builder().seats(16).build().unwrap();
/// // Tenant from the request (here a (tenant, body) pair); one class for all.
/// let layer = FairLayer::new(gate, |req: &(u64, String)| (TenantId(req.0), ClassId(0)));
/// # let _ = layer;
/// ```
///
/// The time from grant until the inner service's response future completes is charged as the
/// request's cost (for a streaming HTTP body, until the response head is ready).
#[derive(Clone)]
pub struct FairLayer<C> {
    gate: FairGate,
    classify: C,
}

impl<C> FairLayer<C> {
    /// A layer over `gate`, classifying requests with `classify`.
    pub fn new(gate: FairGate, classify: C) -> Self {
        FairLayer { gate, classify }
    }
}

impl<C> fmt::Debug for FairLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairLayer")
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone> Layer<S> for FairLayer<C> {
    type Service = FairService<S, C>;
    fn layer(&self, inner: S) -> Self::Service {
        FairService {
            inner,
            gate: self.gate.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// The service [`FairLayer`] produces.
#[derive(Clone)]
pub struct FairService<S, C> {
    inner: S,
    gate: FairGate,
    classify: C,
}

impl<S, C> fmt::Debug for FairService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairService")
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

/// The error of a [`FairService`]: the gate refused the request, or the inner service failed.
///
/// With axum, turn it into a response with `axum::error_handling::HandleErrorLayer` (see the
/// crate README): e.g. 429 for [`FairError::Rejected`].
#[derive(Debug)]
#[non_exhaustive]
pub enum FairError<E> {
    /// The gate refused the request (queue full, gate closed, bad cost).
    Rejected(AcquireError),
    /// The inner service's error.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for FairError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FairError::Rejected(e) => write!(f, "request rejected: {e}"),
            FairError::Inner(e) => write!(f, "{e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FairError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FairError::Rejected(e) => Some(e),
            FairError::Inner(e) => Some(e),
        }
    }
}

/// The response future of a [`FairService`].
pub type FairFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, FairError<E>>> + Send>>;

impl<S, C, Req> Service<Req> for FairService<S, C>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    Req: Send + 'static,
    C: Fn(&Req) -> (TenantId, ClassId),
{
    type Response = S::Response;
    type Error = FairError<S::Error>;
    type Future = FairFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(FairError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let (tenant, class) = (self.classify)(&req);
        let acquire = self.gate.acquire(tenant, class);
        // The service that was polled ready goes with this request; a clone stays (tower's
        // guidance for services that are used after an await).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let permit = acquire.await.map_err(FairError::Rejected)?;
            let response = inner.call(req).await.map_err(FairError::Inner);
            drop(permit);
            response
        })
    }
}
