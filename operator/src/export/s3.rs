//! PUT objects to S3 or an S3-compatible server (MinIO, Ceph RGW, GCS's XML API with
//! HMAC keys, moto), signed with SigV4, over the hyper client kube already builds
//! (rustls with the system's roots for https, plain http for a local test server).

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::{Credentials, ObjectSink, PutError, S3Location, sigv4};

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

pub struct S3Sink {
    location: S3Location,
    credentials: Credentials,
    client: Client<Https, Full<Bytes>>,
}

// Hand-written so the credentials can never reach a log through `{:?}`.
impl std::fmt::Debug for S3Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Sink")
            .field("location", &self.location)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl S3Sink {
    pub fn new(location: S3Location, credentials: Credentials) -> anyhow::Result<Self> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|error| anyhow::anyhow!("cannot load the system's TLS roots: {error}"))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            location,
            credentials,
            client,
        })
    }

    /// The URL path (encoded) and `Host` of an object.
    fn address(&self, key: &str) -> (String, String) {
        let key = self.location.key(key);
        let path = if self.location.virtual_host {
            format!("/{key}")
        } else {
            format!("/{}/{key}", self.location.bucket)
        };
        (sigv4::encode_path(&path), self.location.host())
    }

    async fn put_once(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), PutError> {
        let (path, host) = self.address(key);
        let payload_sha256 = sigv4::sha256_hex(&body);
        let amz_date = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string();
        let mut headers = vec![
            ("host", host.as_str()),
            ("x-amz-content-sha256", payload_sha256.as_str()),
            ("x-amz-date", amz_date.as_str()),
        ];
        if let Some(token) = &self.credentials.session_token {
            headers.push(("x-amz-security-token", token.as_str()));
        }
        let authorization = sigv4::authorization(
            &self.credentials,
            &sigv4::Request {
                method: "PUT",
                path: &path,
                query: "",
                headers: &headers,
                payload_sha256: &payload_sha256,
                region: &self.location.region,
                amz_date: &amz_date,
            },
        );
        let url = format!("{}://{host}{path}", self.location.scheme);
        let mut request = http::Request::put(&url).header("content-type", content_type);
        for (name, value) in &headers {
            request = request.header(*name, *value);
        }
        let request = request
            .header("authorization", authorization)
            .body(Full::new(body))
            .map_err(|error| PutError::permanent(format!("invalid request to {url}: {error}")))?;
        let response = self
            .client
            .request(request)
            .await
            // Connection refused, DNS, TLS, reset: the server may come back.
            .map_err(|error| PutError::retryable(format!("PUT {url}: {}", chain(&error))))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        // The server's error document names the problem (NoSuchBucket,
        // SignatureDoesNotMatch, ...); it never echoes the secret key.
        let detail = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
        let message = format!("PUT {url}: HTTP {status}: {}", detail.trim());
        // Throttling and server errors are worth another try; other 4xx (wrong
        // credentials, missing bucket) will not get better by themselves.
        if status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408 {
            Err(PutError::retryable(message))
        } else {
            Err(PutError::permanent(message))
        }
    }
}

/// An error with its sources, on one line (hyper's own message is only "client error").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl ObjectSink for S3Sink {
    fn put<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
        content_type: &'static str,
    ) -> BoxFuture<'a, Result<(), PutError>> {
        Box::pin(self.put_once(key, body, content_type))
    }

    fn location(&self) -> String {
        self.location.to_string()
    }
}
