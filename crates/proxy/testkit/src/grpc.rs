//! A gRPC unary server over h2c (HTTP/2 cleartext, prior knowledge) for the proxy's
//! benchmarks: every call is answered with the request's message echoed back (one
//! length-prefixed message) and `grpc-status: 0` in the trailers, whatever its method. No
//! protobuf: the message bytes are passed through, as a unary call's reply.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::combinators::WithTrailers;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// A unary reply's body: its message, then its trailers.
pub type Unary = WithTrailers<Full<Bytes>, Ready<Option<Result<HeaderMap, Infallible>>>>;

/// Serve gRPC unary echo calls on `addr` until the task is dropped; returns the address
/// it listens on and the task.
pub async fn start(addr: SocketAddr) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service_fn(echo))
                    .await;
            });
        }
    });
    Ok((addr, task))
}

async fn echo(req: Request<Incoming>) -> Result<Response<Unary>, Infallible> {
    // The request's message as it came (its 5-byte prefix included): the reply's.
    let message = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let mut r = Response::new(Full::new(message).with_trailers(ready(Some(Ok(trailers)))));
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    Ok(r)
}
