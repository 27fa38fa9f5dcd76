//! A minimal HTTP endpoint for the kubelet's probes: `/healthz` (the process serves) and
//! `/readyz` (the controllers have started).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Readiness shared between the controllers and the probe endpoint.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Binds `addr` and returns the bound address and a future serving probes until
/// `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    readiness: Readiness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()> + Send)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let server = async move {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let readiness = readiness.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| respond(request, readiness.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    Ok((bound, server))
}

async fn respond(
    request: Request<Incoming>,
    readiness: Readiness,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = match request.uri().path() {
        "/healthz" | "/livez" => (StatusCode::OK, "ok"),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, "ready"),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, "starting"),
        _ => (StatusCode::NOT_FOUND, "not found"),
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    Ok(response)
}
