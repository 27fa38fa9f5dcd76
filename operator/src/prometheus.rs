//! A client for Prometheus' HTTP API, GET only: what `perfsweep warehouse telemetry`
//! asks. Over the hyper and rustls stack the exports already use (no second HTTP
//! client): `http://` and `https://` with the system's roots.

use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// How long one query may take, answer included: Prometheus' own default query timeout
/// is two minutes; a window of a benchmark run is far less work.
const REQUEST_TIMEOUT: Duration = Duration::from_mins(1);
/// The most of an answer read: an instant vector per node is a few kilobytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

pub struct Prometheus {
    base: String,
    client: Client<Https, Empty<Bytes>>,
}

impl Prometheus {
    /// A client of the Prometheus at `base` (`http://host:9090`, with or without a
    /// path prefix such as `/prometheus`).
    pub fn new(base: &str) -> anyhow::Result<Self> {
        let uri: http::Uri = base
            .parse()
            .with_context(|| format!("--prometheus {base}: not a URL"))?;
        anyhow::ensure!(
            matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some(),
            "--prometheus {base}: expected http://host:port or https://host:port"
        );
        let connector = crate::export::http::https_or_http(Duration::from_secs(10))?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// `GET base + path_and_query`: the status and the body. Prometheus answers its API
    /// errors (a bad query: 400, 422; a timeout: 503) with a JSON body that says why, so
    /// any status comes back with its body.
    pub async fn get(&self, path_and_query: &str) -> anyhow::Result<(http::StatusCode, Bytes)> {
        let url = format!("{}{path_and_query}", self.base);
        let request = http::Request::get(&url)
            .header("accept", "application/json")
            .body(Empty::<Bytes>::new())
            .with_context(|| format!("a request for {}", self.base))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
                .to_bytes();
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))?
            .with_context(|| format!("asking Prometheus at {}", self.base))
    }
}
