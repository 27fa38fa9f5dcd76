//! The HTTP client object_store talks through: hyper with rustls on ring, the stack
//! kube already builds. object_store's own client (reqwest) would pull in aws-lc-rs,
//! whose C build costs minutes on 2 cores; its `*-base` features take any
//! [`HttpConnector`] instead, and this is one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as HyperConnector;
use hyper_util::rt::TokioExecutor;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody,
    HttpResponse, HttpResponseBody, HttpService,
};

type Https = hyper_rustls::HttpsConnector<HyperConnector>;

/// An `http://` and `https://` connector (rustls on ring, the system's roots, HTTP/1.1)
/// that gives up connecting after `connect_timeout`: what every client of perfsweep's
/// own (GitHub releases, Prometheus) is built on.
pub fn https_or_http(connect_timeout: Duration) -> anyhow::Result<Https> {
    let mut http = HyperConnector::new();
    http.set_connect_timeout(Some(connect_timeout));
    // https_or_http needs to see the scheme, so the inner connector must not refuse it.
    http.enforce_http(false);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|error| anyhow::anyhow!("cannot load the system's TLS roots: {error}"))?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

/// How long connecting may take before the attempt counts as failed (and is retried).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, upload included; the objects are small (records and
/// tool output), so this is generous.
const REQUEST_TIMEOUT: Duration = Duration::from_mins(2);

/// Builds [`HyperService`]s for object_store's builders; every failed exchange is noted
/// in `failures`, so that retries object_store makes are visible to whoever exports.
#[derive(Debug, Clone)]
pub struct HyperConnectorFactory {
    pub failures: Arc<Failures>,
    /// Where requests may go: checked on every request's URL before it is sent.
    pub origins: super::allowed::Origins,
}

/// Failed HTTP exchanges (server errors, throttling, transport failures), as
/// `METHOD /path: what`. The query string is left out: it could carry a signature.
#[derive(Debug, Default)]
pub struct Failures(Mutex<Vec<String>>);

impl Failures {
    fn note(&self, failure: String) {
        if let Ok(mut list) = self.0.lock() {
            // Bounded: a store that fails for hours must not grow without end.
            if list.len() < 1000 {
                list.push(failure);
            }
        }
    }

    /// The failures noted since the last call.
    pub fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut list| std::mem::take(&mut *list))
            .unwrap_or_default()
    }
}

impl HttpConnector for HyperConnectorFactory {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let connector =
            https_or_http(CONNECT_TIMEOUT).map_err(|error| object_store::Error::Generic {
                store: "perfsweep-http",
                source: error.into(),
            })?;
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpClient::new(HyperService {
            client,
            failures: self.failures.clone(),
            origins: self.origins.clone(),
        }))
    }
}

/// One hyper client shared by every request of a store.
#[derive(Debug)]
struct HyperService {
    client: Client<Https, HttpRequestBody>,
    failures: Arc<Failures>,
    origins: super::allowed::Origins,
}

#[async_trait]
impl HttpService for HyperService {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let what = format!("{} {}", request.method(), request.uri().path());
        if let Err(refused) = self.origins.permit(request.uri()) {
            self.failures.note(format!("{what}: {refused}"));
            return Err(HttpError::new(HttpErrorKind::Unknown, Refused(refused)));
        }
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(request))
            .await
            .map_err(|elapsed| HttpError::new(HttpErrorKind::Timeout, elapsed))
            .and_then(|result| {
                result.map_err(|error| {
                    let kind = if error.is_connect() {
                        HttpErrorKind::Connect
                    } else {
                        HttpErrorKind::Request
                    };
                    HttpError::new(kind, Chain(error.to_string(), chain(&error)))
                })
            });
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                self.failures.note(format!("{what}: {error}"));
                return Err(error);
            }
        };
        let status = response.status();
        if status.is_server_error() || status.as_u16() == 429 {
            self.failures.note(format!("{what}: HTTP {status}"));
        }
        let (parts, body) = response.into_parts();
        let body = body.map_err(|error| HttpError::new(HttpErrorKind::Interrupted, error));
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}

/// A request to a host the export may not reach.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// hyper's own message is only "client error (Connect)": keep the causes (connection
/// refused, DNS, TLS) in the message people read.
#[derive(Debug)]
struct Chain(String, String);

impl std::fmt::Display for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.1.is_empty() {
            f.write_str(&self.0)
        } else {
            write!(f, "{}: {}", self.0, self.1)
        }
    }
}

impl std::error::Error for Chain {}

fn chain(error: &dyn std::error::Error) -> String {
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    causes.join(": ")
}
