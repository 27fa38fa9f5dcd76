//! A minimal HTTP endpoint for the kubelet's probes: `/healthz` (the process serves) and
//! `/readyz` (the controllers have started), and Prometheus metrics on `/metrics`
//! ([`crate::metrics`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
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
    serve_with_metrics(addr, readiness, None, shutdown).await
}

/// How long a client may take to send its request's headers.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// [`serve`], plus `/metrics` (Prometheus text format) from `metrics`; without them
/// (a standby replica) `/metrics` says only `perfsweep_up 0`.
pub async fn serve_with_metrics(
    addr: SocketAddr,
    readiness: Readiness,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()> + Send)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let server = async move {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let readiness = readiness.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service =
                    service_fn(move |request| respond(request, readiness.clone(), metrics.clone()));
                // With a timer, so a client that never finishes its headers is cut off
                // (without one hyper ignores header_read_timeout).
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    Ok((bound, server))
}

// hyper's `service_fn` takes a function returning a future.
#[allow(clippy::unused_async)]
async fn respond(
    request: Request<Incoming>,
    readiness: Readiness,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.uri().path() == "/metrics" {
        let body = match &metrics {
            Some(metrics) => metrics.render(),
            None => "# HELP perfsweep_up 1 while this replica runs the controllers.\n\
                     # TYPE perfsweep_up gauge\nperfsweep_up 0\n# EOF\n"
                .to_owned(),
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
        );
        return Ok(response);
    }
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

#[cfg(test)]
mod slow_client_tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Issue 24: hyper had no timer, so its header timeout never applied and a client
    /// could hold a connection open forever.
    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_cut_off() {
        let (addr, server) = serve_with_metrics(
            "127.0.0.1:0".parse().expect("an address"),
            Readiness::default(),
            None,
            std::future::pending(),
        )
        .await
        .expect("serving");
        tokio::spawn(server);
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("writes");
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(
            HEADER_READ_TIMEOUT + std::time::Duration::from_secs(5),
            stream.read_to_end(&mut rest),
        )
        .await;
        assert!(closed.is_ok(), "the connection was still open");
    }
}
