//! `perfsweep sim`: an OpenAI-compatible inference server simulator.
//!
//! It serves `/v1/models`, `/v1/completions` and `/v1/chat/completions`, streaming (SSE)
//! and not, `/v1/embeddings`, with configurable time to first token and inter-token latency, a capacity
//! model (latency grows when more requests are in flight than the simulated batch
//! capacity), fault injection, and a record of what it actually did (`GET /sim/stats`,
//! `POST /sim/reset`, or JSON lines with `--record`) so that a load generator's
//! measurements can be checked against the truth.
//!
//! Token accounting: one prompt word is one input token; every streamed chunk carries
//! one output token (a word with a leading space).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::fd_tables;
use super::loadgen::http::{SharedArrival, Socket};
use super::rng::Rng;
use prefix_cache::PrefixCache;

pub mod prefix_cache;

/// How latencies vary around their means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// Normal with the jitter as standard deviation, clipped at zero.
    #[default]
    Normal,
    /// Uniform within ± the jitter.
    Uniform,
    /// The mean plus an exponential delay whose mean is the jitter (a long tail).
    Exponential,
}

/// Settings of the simulator.
#[derive(Clone, Debug, clap::Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Model names served (`/v1/models`); requests for other models get 404.
    #[arg(long = "model", default_value = "perfsweep-sim")]
    pub models: Vec<String>,
    /// Mean time to first token, milliseconds.
    #[arg(long, default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// Extra time to first token per prompt token (prefill), milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub prefill_ms_per_token: f64,
    /// Mean inter-token latency, milliseconds.
    #[arg(long, default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Jitter of the time to first token, milliseconds (see --jitter).
    #[arg(long, default_value_t = 0.0)]
    pub ttft_jitter_ms: f64,
    /// Jitter of inter-token latencies, milliseconds (see --jitter).
    #[arg(long, default_value_t = 0.0)]
    pub itl_jitter_ms: f64,
    /// Shape of the jitter.
    #[arg(long, value_enum, default_value_t = Jitter::Normal)]
    pub jitter: Jitter,
    /// Requests served at full speed; beyond that every latency is multiplied by
    /// 1 + (active - capacity) / capacity, like a saturated batching server. Unlimited
    /// when absent.
    #[arg(long)]
    pub capacity: Option<u32>,
    /// Seed of all random draws: the same seed and request order give the same latencies.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output tokens when a request sets no `max_tokens`.
    #[arg(long, default_value_t = 16)]
    pub default_max_tokens: u32,
    /// Put usage into the finish chunk instead of a separate chunk with empty choices.
    #[arg(long)]
    pub usage_in_finish_chunk: bool,
    /// Send an SSE comment line (`: ping`) before the first token of every stream.
    #[arg(long)]
    pub sse_comments: bool,
    /// Fraction of requests answered with HTTP 500.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Fraction of streams that send an error event and stop half-way.
    #[arg(long, default_value_t = 0.0)]
    pub midstream_error_rate: f64,
    /// Append one JSON line per finished request to this file.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Require `Authorization: Bearer <key>` on the `/v1` routes (401 otherwise), as a
    /// hosted endpoint does.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Dimensions of the vectors `/v1/embeddings` returns (each takes --ttft-ms, plus
    /// --prefill-ms-per-token per input token, scaled by the capacity model).
    #[arg(long, default_value_t = 384)]
    pub embedding_dimensions: u32,
    /// Connections to be ready for at once. Beyond what the open-file limit allows, they
    /// are spread over threads with a file table each, all listening on the one port
    /// (SO_REUSEPORT), so one simulator can serve more streams than the limit.
    #[arg(long)]
    pub max_connections: Option<u64>,
    /// Blocks the prefix cache holds (least recently used out); 0 turns it off. A
    /// request's leading prompt blocks found in it cost no prefill
    /// (--prefill-ms-per-token), and its usage reports them as
    /// `prompt_tokens_details.cached_tokens`.
    #[arg(long, default_value_t = 0)]
    pub prefix_cache_blocks: u32,
    /// Prompt tokens (words) per prefix cache block.
    #[arg(long, default_value_t = 16)]
    pub prefix_block_tokens: u32,
    /// A reasoning model served besides --model: its chat streams send their first
    /// --reasoning-tokens tokens as `delta.reasoning_content`, then the answer.
    #[arg(long)]
    pub reasoning_model: Option<String>,
    /// Reasoning tokens of each --reasoning-model stream (part of its output tokens).
    #[arg(long, default_value_t = 8)]
    pub reasoning_tokens: u32,
}

impl SimArgs {
    /// Settings with the defaults of the command line, listening on `listen`.
    pub fn with_listen(listen: SocketAddr) -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: SimArgs,
        }
        let mut args = Wrapper::parse_from(["sim"]).args;
        args.listen = listen;
        args
    }
}

/// What the simulator did for one request.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    pub id: u64,
    pub model: String,
    pub stream: bool,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Time to first token the model drew (before the capacity model), ms.
    pub drawn_ttft_ms: f64,
    /// From the request's arrival (headers and body read) to the first token written
    /// to the connection, ms: what the simulator actually did, which is later than
    /// drawn when the machine is busy.
    pub ttft_ms: f64,
    /// Mean gap between tokens written to the connection, ms.
    pub mean_itl_ms: f64,
    /// From arrival to the last byte written to the connection, ms.
    pub e2e_ms: f64,
    /// Requests in flight when this one arrived (itself included).
    pub active_at_arrival: u64,
    /// `ok`, `http_500` or `midstream_error`.
    pub outcome: String,
    /// Prompt tokens found in the prefix cache (no prefill cost).
    #[serde(default)]
    pub cached_tokens: u32,
}

/// Aggregate of what the simulator did, from `GET /sim/stats`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimStats {
    pub requests: u64,
    pub ttft_mean_ms: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_mean_ms: f64,
    pub max_active: u64,
    /// Prompt tokens of the successful requests, and how many of them the prefix
    /// cache held.
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub prefix_cache_hit_tokens: u64,
    pub records: Vec<RequestRecord>,
}

impl SimStats {
    fn of(records: &[RequestRecord], max_active: u64) -> Self {
        let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.outcome == "ok").collect();
        let mut ttfts: Vec<f64> = ok.iter().map(|r| r.ttft_ms).collect();
        ttfts.sort_by(f64::total_cmp);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let quantile = |q: f64| {
            if ttfts.is_empty() {
                0.0
            } else {
                let rank = ((q * ttfts.len() as f64).ceil() as usize).clamp(1, ttfts.len());
                ttfts[rank - 1]
            }
        };
        let itls: Vec<f64> = ok
            .iter()
            .filter(|r| r.output_tokens > 1)
            .map(|r| r.mean_itl_ms)
            .collect();
        Self {
            requests: records.len() as u64,
            ttft_mean_ms: mean(&ttfts),
            ttft_p50_ms: quantile(0.5),
            ttft_p99_ms: quantile(0.99),
            itl_mean_ms: mean(&itls),
            max_active,
            prompt_tokens: ok.iter().map(|r| u64::from(r.input_tokens)).sum(),
            prefix_cache_hit_tokens: ok.iter().map(|r| u64::from(r.cached_tokens)).sum(),
            records: records.to_vec(),
        }
    }
}

struct State {
    args: SimArgs,
    next_id: AtomicU64,
    /// Requests accepted so far, for [`Simulator::arrivals`].
    arrived: tokio::sync::watch::Sender<u64>,
    active: AtomicU64,
    max_active: AtomicU64,
    records: Mutex<Vec<RequestRecord>>,
    record_file: Option<Mutex<std::fs::File>>,
    prefix_cache: Option<Mutex<PrefixCache>>,
}

/// A running simulator.
pub struct Simulator {
    pub address: SocketAddr,
    state: Arc<State>,
    serving: Serving,
}

/// Where connections are accepted and served.
enum Serving {
    /// On the caller's runtime.
    OneLoop {
        accept: tokio::task::JoinHandle<()>,
        ticker: tokio::task::JoinHandle<()>,
        emitter: Arc<Emitter>,
    },
    /// On threads with a file table each; they stop when this is set.
    Threads(tokio::sync::watch::Sender<bool>),
}

/// `tables` threads with a file table and a listener each, on the same port; the
/// address they listen on.
async fn serve_on_threads(
    tables: usize,
    mut address: SocketAddr,
    state: &Arc<State>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> anyhow::Result<(SocketAddr, Serving)> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    for index in 0..tables {
        let (bound, listening) = tokio::sync::oneshot::channel();
        let (state, tls, mut stopped) = (state.clone(), tls.clone(), stopped.clone());
        // The thread's result is of no interest: it serves until stopped.
        drop(fd_tables::spawn(
            format!("sim-{index}"),
            Duration::ZERO,
            move || async move {
                let listener = match listen(address, true) {
                    Ok(listener) => listener,
                    Err(error) => {
                        let _ = bound.send(Err(error));
                        return Ok(());
                    }
                };
                let _ = bound.send(listener.local_addr());
                // A waker of this thread's runtime is a descriptor of this thread's
                // table: nothing on another thread may wake its tasks, so the streams
                // served here are emitted here too.
                let emitter = Arc::new(Emitter::default());
                tokio::spawn(tick(state.clone(), emitter.clone()));
                tokio::select! {
                    () = accept_loop(listener, state, emitter, tls) => {}
                    _ = stopped.wait_for(|stop| *stop) => {}
                }
                Ok(())
            },
        )?);
        // The first listener fixes the port (when asked for any); the rest share it.
        address = listening
            .await
            .context("a simulator thread ended before it listened")?
            .with_context(|| format!("cannot listen on {address}"))?;
    }
    Ok((address, Serving::Threads(stop)))
}

impl Simulator {
    /// Binds `args.listen` and serves in the background until dropped.
    pub async fn start(args: SimArgs) -> anyhow::Result<Self> {
        let record_file = match &args.record {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?,
            )),
            None => None,
        };
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)?),
            (None, None) => None,
            _ => anyhow::bail!("--tls-cert and --tls-key go together"),
        };
        let tables = args.max_connections.map_or(1, |connections| {
            fd_tables::tables_needed(connections, fd_tables::open_file_limit())
        });
        let listen_on = args.listen;
        let prefix_cache = (args.prefix_cache_blocks > 0).then(|| {
            Mutex::new(PrefixCache::new(
                args.prefix_cache_blocks as usize,
                args.prefix_block_tokens as usize,
            ))
        });
        let state = Arc::new(State {
            args,
            prefix_cache,
            next_id: AtomicU64::new(0),
            arrived: tokio::sync::watch::Sender::new(0),
            active: AtomicU64::new(0),
            max_active: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            record_file,
        });
        let (address, serving) = if tables == 1 {
            let listener = listen(listen_on, false)
                .with_context(|| format!("cannot listen on {listen_on}"))?;
            let address = listener.local_addr()?;
            let emitter = Arc::new(Emitter::default());
            let accept = tokio::spawn(accept_loop(listener, state.clone(), emitter.clone(), tls));
            let ticker = tokio::spawn(tick(state.clone(), emitter.clone()));
            (
                address,
                Serving::OneLoop {
                    accept,
                    ticker,
                    emitter,
                },
            )
        } else {
            serve_on_threads(tables, listen_on, &state, tls).await?
        };
        Ok(Self {
            address,
            state,
            serving,
        })
    }

    /// The number of requests accepted so far, updated as each one arrives (before its
    /// first token): whoever embeds the simulator can act at that moment, e.g. a test
    /// that stops the load generator while a request waits for its first token.
    pub fn arrivals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.state.arrived.subscribe()
    }

    /// What the simulator did so far (as `GET /sim/stats`).
    pub fn stats(&self) -> SimStats {
        let records = self
            .state
            .records
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        SimStats::of(&records, self.state.max_active.load(Ordering::Relaxed))
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        match &self.serving {
            Serving::OneLoop {
                accept,
                ticker,
                emitter,
            } => {
                accept.abort();
                ticker.abort();
                // Streams in flight hold the state; let them go.
                if let Ok(mut schedule) = emitter.schedule.lock() {
                    schedule.streams.clear();
                }
            }
            // The threads' runtimes drop their streams as they end.
            Serving::Threads(stop) => {
                let _ = stop.send(true);
            }
        }
    }
}

/// `perfsweep sim`: serves until killed.
pub async fn run(args: SimArgs) -> anyhow::Result<std::process::ExitCode> {
    // One socket per stream: allow as many as the hard limit does.
    crate::loadgen::http::raise_open_file_limit();
    let scheme = if args.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    let sim = Simulator::start(args).await?;
    eprintln!(
        "perfsweep sim: serving an OpenAI-compatible API on {scheme}://{}",
        sim.address
    );
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// A listener with a deep accept queue: thousands of streams connect at once.
/// `shared_port`: one of several listeners of this process on the same port.
fn listen(address: SocketAddr, shared_port: bool) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    if shared_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(address)?;
    socket.listen(4096)
}

fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem = std::fs::read(cert)
        .with_context(|| format!("--tls-cert {}: cannot read", cert.display()))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--tls-cert {}: malformed PEM", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("--tls-cert {}: no certificate in it", cert.display());
    }
    let pem =
        std::fs::read(key).with_context(|| format!("--tls-key {}: cannot read", key.display()))?;
    let key_der = PrivateKeyDer::from_pem_slice(&pem)
        .with_context(|| format!("--tls-key {}: no PEM private key in it", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS: no usable protocol version")?
    .with_no_client_auth()
    .with_single_cert(chain, key_der)
    .with_context(|| format!("--tls-key {}: does not fit --tls-cert", key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve<I>(io: I, state: Arc<State>, emitter: Arc<Emitter>, arrival: SharedArrival)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let state = state.clone();
        let emitter = emitter.clone();
        let arrival = arrival.clone();
        async move { Ok::<_, Infallible>(handle(state, &emitter, request, arrival).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    emitter: Arc<Emitter>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Reads carry the kernel's receive time: a request's arrival is when its last
        // byte reached the socket, however long this process took to get to it.
        let (stream, arrival) = match Socket::accepted(stream) {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cannot set up an accepted connection");
                continue;
            }
        };
        let state = state.clone();
        match &tls {
            None => {
                tokio::spawn(serve(stream, state, emitter.clone(), arrival));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let emitter = emitter.clone();
                tokio::spawn(async move {
                    match acceptor.accept(stream).await {
                        Ok(stream) => serve(stream, state, emitter, arrival).await,
                        Err(error) => tracing::debug!(%error, "TLS handshake failed"),
                    }
                });
            }
        }
    }
}

/// A response body: a whole buffer, or chunks sent as the simulated model produces them.
pub enum SimBody {
    Full(Option<Bytes>),
    Stream(Box<StreamBody>),
}

/// What the generating task hands to the connection.
enum Piece {
    /// Bytes that carry no token (role chunk, comments, finish, usage, `[DONE]`).
    Data(Bytes),
    /// A chunk carrying one output token.
    Token(Bytes),
    /// The stream is complete: the record, with the timings left for the body to fill.
    Finished(Box<RequestRecord>),
}

/// A streamed body that times tokens when the connection takes them, i.e. when they
/// are written to the socket (hyper writes what `poll_frame` yields in the same poll),
/// so the record says what the client could see, however late a busy machine was.
pub struct StreamBody {
    receiver: mpsc::Receiver<Piece>,
    state: Arc<State>,
    arrival: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    tokens: u32,
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = Infallible;

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            // A known length: Content-Length instead of chunked encoding.
            SimBody::Full(data) => {
                hyper::body::SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            SimBody::Stream(_) => hyper::body::SizeHint::default(),
        }
    }

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            SimBody::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            SimBody::Stream(body) => loop {
                match std::task::ready!(body.receiver.poll_recv(cx)) {
                    None => return Poll::Ready(None),
                    Some(Piece::Data(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                    Some(Piece::Token(bytes)) => {
                        let now = Instant::now();
                        body.first.get_or_insert(now);
                        body.last = Some(now);
                        body.tokens += 1;
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    Some(Piece::Finished(mut record)) => {
                        let arrival = body.arrival;
                        let last = body.last.unwrap_or(arrival);
                        let first = body.first.unwrap_or(last);
                        record.ttft_ms = millis(first - arrival);
                        record.mean_itl_ms = if body.tokens > 1 {
                            millis(last - first) / f64::from(body.tokens - 1)
                        } else {
                            0.0
                        };
                        record.e2e_ms = millis(arrival.elapsed());
                        body.state.finish(*record);
                    }
                }
            },
        }
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response<SimBody> {
    let mut response = Response::new(SimBody::Full(Some(Bytes::from(value.to_string()))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(status: StatusCode, message: &str) -> Response<SimBody> {
    json_response(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error", "code": status.as_u16()}}),
    )
}

async fn handle(
    state: Arc<State>,
    emitter: &Emitter,
    request: Request<Incoming>,
    arrival: SharedArrival,
) -> Response<SimBody> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if let Some(key) = &state.args.api_key
        && path.starts_with("/v1/")
    {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if presented != Some(key.as_str()) {
            return error_response(StatusCode::UNAUTHORIZED, "missing or wrong API key");
        }
    }
    match (method, path.as_str()) {
        (Method::GET, "/v1/models") => {
            let data: Vec<Value> = state
                .args
                .models
                .iter()
                .chain(&state.args.reasoning_model)
                .map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "perfsweep"}))
                .collect();
            json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
        }
        (Method::GET, "/sim/stats") => {
            let records = state.records.lock().map(|r| r.clone()).unwrap_or_default();
            let stats = SimStats::of(&records, state.max_active.load(Ordering::Relaxed));
            json_response(
                StatusCode::OK,
                &serde_json::to_value(stats).unwrap_or(Value::Null),
            )
        }
        (Method::POST, "/sim/reset") => {
            if let Ok(mut records) = state.records.lock() {
                records.clear();
            }
            state.max_active.store(0, Ordering::Relaxed);
            json_response(StatusCode::OK, &json!({"reset": true}))
        }
        (Method::POST, "/v1/completions") => {
            generate(state, emitter, request, false, arrival).await
        }
        (Method::POST, "/v1/chat/completions") => {
            generate(state, emitter, request, true, arrival).await
        }
        (Method::POST, "/v1/embeddings") => embeddings(state, request, arrival).await,
        (_, "/v1/models" | "/v1/completions" | "/v1/chat/completions" | "/v1/embeddings") => {
            error_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => error_response(StatusCode::NOT_FOUND, &format!("no route {path}")),
    }
}

/// What a generation request asks for.
struct Ask {
    /// The prompt's text (every message's), kept for the prefix cache.
    prompt: Option<String>,
    model: String,
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
    input_tokens: u32,
    output_tokens: u32,
}

fn read_ask(
    body: &[u8],
    chat: bool,
    default_max_tokens: u32,
    keep_prompt: bool,
) -> Result<Ask, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .ok_or("model is required")?
        .to_owned();
    let kept = std::cell::RefCell::new(String::new());
    let words = |text: &str| {
        if keep_prompt {
            let mut kept = kept.borrow_mut();
            kept.push_str(text);
            kept.push(' ');
        }
        text.split_whitespace().count() as u32
    };
    let input_tokens = if chat {
        let messages = value
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("messages is required")?;
        messages
            .iter()
            .map(|m| match m.get("content") {
                Some(Value::String(text)) => words(text),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .map(words)
                    .sum(),
                _ => 0,
            })
            .sum()
    } else {
        match value.get("prompt") {
            Some(Value::String(text)) => words(text),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(words).sum(),
            _ => return Err("prompt is required".into()),
        }
    };
    let max_tokens = value
        .get("max_completion_tokens")
        .or_else(|| value.get("max_tokens"))
        .and_then(Value::as_u64)
        .map_or(default_max_tokens, |n| n.min(u64::from(u32::MAX)) as u32);
    let stream = value
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let option = |name: &str| {
        value
            .get("stream_options")
            .and_then(|o| o.get(name))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    Ok(Ask {
        prompt: keep_prompt.then(|| kept.into_inner()),
        model,
        stream,
        include_usage: option("include_usage"),
        continuous_usage: option("continuous_usage_stats"),
        input_tokens: input_tokens.max(1),
        output_tokens: max_tokens.max(1),
    })
}

/// Decrements the in-flight count when the request ends, however it ends.
struct ActiveGuard(Arc<State>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl State {
    fn draw(&self, rng: &mut Rng, mean: f64, jitter: f64) -> f64 {
        if jitter <= 0.0 {
            return mean.max(0.0);
        }
        let value = match self.args.jitter {
            Jitter::Normal => mean + jitter * rng.normal(),
            Jitter::Uniform => mean + jitter * (2.0 * rng.unit() - 1.0),
            Jitter::Exponential => mean + rng.exponential(jitter),
        };
        value.max(0.0)
    }

    /// The capacity model's latency multiplier at the current load.
    fn load_factor(&self) -> f64 {
        match self.args.capacity {
            Some(capacity) if capacity > 0 => {
                let active = self.active.load(Ordering::Relaxed) as f64;
                let capacity = f64::from(capacity);
                1.0 + ((active - capacity).max(0.0) / capacity)
            }
            _ => 1.0,
        }
    }

    /// The prompt tokens of `prompt` the prefix cache holds (it holds all of them
    /// afterwards); 0 without a cache.
    fn cached_tokens(&self, prompt: Option<&str>) -> u32 {
        let (Some(cache), Some(prompt)) = (&self.prefix_cache, prompt) else {
            return 0;
        };
        match cache.lock() {
            Ok(mut cache) => {
                let blocks = cache.block_hashes(prompt.split_whitespace());
                cache.admit(&blocks)
            }
            Err(_) => 0,
        }
    }

    fn finish(&self, record: RequestRecord) {
        if let Some(file) = &self.record_file
            && let Ok(mut line) = serde_json::to_vec(&record)
            && let Ok(mut file) = file.lock()
        {
            use std::io::Write as _;
            line.push(b'\n');
            let _ = file.write_all(&line);
        }
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// A request's body, and when it arrived: the kernel's time of the read that completed
/// it (the last read of the request).
async fn read_body(
    request: Request<Incoming>,
    arrival: &SharedArrival,
) -> Result<(Bytes, Instant), Response<SimBody>> {
    let body = request
        .into_body()
        .collect()
        .await
        .map_err(|error| {
            error_response(
                StatusCode::BAD_REQUEST,
                &format!("reading the body: {error}"),
            )
        })?
        .to_bytes();
    let arrival = arrival.lock().map_or_else(|_| Instant::now(), |at| *at);
    Ok((body, arrival))
}

async fn generate(
    state: Arc<State>,
    emitter: &Emitter,
    request: Request<Incoming>,
    chat: bool,
    arrival: SharedArrival,
) -> Response<SimBody> {
    let (body, arrival) = match read_body(request, &arrival).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let ask = match read_ask(
        &body,
        chat,
        state.args.default_max_tokens,
        state.prefix_cache.is_some(),
    ) {
        Ok(ask) => ask,
        Err(message) => return error_response(StatusCode::BAD_REQUEST, &message),
    };
    if !state.args.models.contains(&ask.model)
        && state.args.reasoning_model.as_deref() != Some(ask.model.as_str())
    {
        return error_response(
            StatusCode::NOT_FOUND,
            &format!("The model `{}` does not exist.", ask.model),
        );
    }
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    state.arrived.send_modify(|arrived| *arrived += 1);
    let mut rng = Rng::derive(state.args.seed, id);
    let active = state.active.fetch_add(1, Ordering::Relaxed) + 1;
    state.max_active.fetch_max(active, Ordering::Relaxed);
    let guard = ActiveGuard(state.clone());

    let cached_tokens = state.cached_tokens(ask.prompt.as_deref());
    let drawn_ttft = state.draw(&mut rng, state.args.ttft_ms, state.args.ttft_jitter_ms)
        + state.args.prefill_ms_per_token
            * f64::from(ask.input_tokens.saturating_sub(cached_tokens));
    let fail_now = rng.unit() < state.args.error_rate;
    let fail_midstream = rng.unit() < state.args.midstream_error_rate;
    let mut record = RequestRecord {
        id,
        model: ask.model.clone(),
        stream: ask.stream,
        input_tokens: ask.input_tokens,
        output_tokens: 0,
        drawn_ttft_ms: drawn_ttft,
        ttft_ms: 0.0,
        mean_itl_ms: 0.0,
        e2e_ms: 0.0,
        active_at_arrival: active,
        outcome: "ok".into(),
        cached_tokens,
    };
    if fail_now {
        drop(guard);
        record.outcome = "http_500".into();
        state.finish(record);
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "simulated server error");
    }

    let created = 0;
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let request_id = format!("{}-{id}", if chat { "chatcmpl" } else { "cmpl" });
    let prompt_tokens = ask.input_tokens;
    let cached = state.prefix_cache.is_some().then_some(cached_tokens);
    let usage = move |completion: u32| usage_json(prompt_tokens, completion, cached);

    if !ask.stream {
        // The whole generation, then one response.
        let load = state.load_factor();
        let mut due = arrival + Duration::from_secs_f64(drawn_ttft * load / 1000.0);
        for _ in 1..ask.output_tokens {
            let itl = state.draw(&mut rng, state.args.itl_ms, state.args.itl_jitter_ms);
            due += Duration::from_secs_f64(itl * state.load_factor() / 1000.0);
        }
        tokio::time::sleep_until(due).await;
        let text = words(&mut rng, ask.output_tokens);
        let choice = if chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"})
        } else {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": "length"})
        };
        let elapsed = millis(arrival.elapsed());
        record.output_tokens = ask.output_tokens;
        record.ttft_ms = elapsed;
        record.e2e_ms = elapsed;
        drop(guard);
        state.finish(record);
        return json_response(
            StatusCode::OK,
            &json!({
                "id": request_id,
                "object": if chat { "chat.completion" } else { "text_completion" },
                "created": created,
                "model": ask.model,
                "choices": [choice],
                "usage": usage(ask.output_tokens),
            }),
        );
    }

    let (sender, receiver) = mpsc::channel::<Piece>(8);
    let body_state = state.clone();
    let mut head = String::with_capacity(160);
    head.push_str("data: {\"id\":");
    head.push_str(&Value::String(request_id).to_string());
    head.push_str(",\"object\":\"");
    head.push_str(object);
    head.push_str("\",\"created\":0,\"model\":");
    head.push_str(&Value::String(ask.model.clone()).to_string());
    head.push_str(",\"choices\":");
    let stop_after = if fail_midstream {
        (ask.output_tokens / 2).max(1)
    } else {
        ask.output_tokens
    };
    let mut generation = Generation {
        sender,
        pending: VecDeque::new(),
        head,
        chat,
        rng,
        next: 0,
        stop_after,
        output_tokens: ask.output_tokens,
        prompt_tokens,
        cached_tokens: cached,
        reasoning_tokens: if state.args.reasoning_model.as_deref() == Some(ask.model.as_str()) {
            state.args.reasoning_tokens
        } else {
            0
        },
        fail_midstream,
        include_usage: ask.include_usage,
        continuous_usage: ask.continuous_usage,
        due: arrival + Duration::from_secs_f64(drawn_ttft * state.load_factor() / 1000.0),
        record: Some(Box::new(record)),
        _guard: guard,
    };
    if state.args.sse_comments {
        generation
            .pending
            .push_back(Piece::Data(Bytes::from_static(b": ping\n\n")));
    }
    if chat {
        // Like OpenAI: a first chunk with the role and empty content (not a token).
        let role = generation.chunk(
            r#"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]"#,
            None,
        );
        generation.pending.push_back(Piece::Data(role));
    }
    emitter.add(generation);
    let mut response = Response::new(SimBody::Stream(Box::new(StreamBody {
        receiver,
        state: body_state,
        arrival,
        first: None,
        last: None,
        tokens: 0,
    })));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

fn usage_json(prompt: u32, completion: u32, cached: Option<u32>) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if let Some(cached) = cached {
        usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    usage
}

/// Streams waiting for their next token: one task emits every token that is due at
/// each tick (tokio's timers tick every millisecond), instead of one task and one timer
/// per stream; the connection tasks then write what they are handed.
#[derive(Default)]
struct Emitter {
    schedule: Mutex<Schedule>,
    added: tokio::sync::Notify,
}

#[derive(Default)]
struct Schedule {
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    streams: HashMap<u64, Generation>,
    next_key: u64,
}

impl Emitter {
    fn add(&self, generation: Generation) {
        let due = Instant::now();
        if let Ok(mut schedule) = self.schedule.lock() {
            let key = schedule.next_key;
            schedule.next_key += 1;
            // Due now: the role chunk goes out at once, the first token when drawn.
            schedule.due.push(Reverse((due, key)));
            schedule.streams.insert(key, generation);
        }
        self.added.notify_one();
    }
}

/// The emitting task: sleeps until the earliest due stream, emits everything due.
async fn tick(state: Arc<State>, emitter: Arc<Emitter>) {
    loop {
        let next = match emitter.schedule.lock() {
            Ok(mut schedule) => {
                let now = Instant::now();
                while let Some(&Reverse((due, key))) = schedule.due.peek() {
                    if due > now {
                        break;
                    }
                    schedule.due.pop();
                    if let Some(mut generation) = schedule.streams.remove(&key)
                        && let Some(due) = generation.step(&state, now)
                    {
                        schedule.due.push(Reverse((due, key)));
                        schedule.streams.insert(key, generation);
                    }
                }
                schedule.due.peek().map(|entry| entry.0.0)
            }
            Err(_) => return,
        };
        match next {
            Some(due) => {
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    () = emitter.added.notified() => {}
                }
            }
            None => emitter.added.notified().await,
        }
    }
}

/// One stream being generated.
struct Generation {
    sender: mpsc::Sender<Piece>,
    /// Pieces the connection has not taken yet (its channel was full).
    pending: VecDeque<Piece>,
    /// `data: {"id":...,"model":...,"choices":` of every chunk.
    head: String,
    chat: bool,
    rng: Rng,
    /// Index of the next token.
    next: u32,
    stop_after: u32,
    output_tokens: u32,
    prompt_tokens: u32,
    /// Prompt tokens the prefix cache held, when it is on.
    cached_tokens: Option<u32>,
    /// Leading output tokens sent as reasoning (a reasoning model's chat stream).
    reasoning_tokens: u32,
    fail_midstream: bool,
    include_usage: bool,
    continuous_usage: bool,
    /// When the next token is due.
    due: Instant,
    /// Handed to the body with the last piece, which fills in the timings.
    record: Option<Box<RequestRecord>>,
    _guard: ActiveGuard,
}

impl Generation {
    fn chunk(&self, choices: &str, usage: Option<Value>) -> Bytes {
        let mut text = String::with_capacity(self.head.len() + choices.len() + 96);
        text.push_str(&self.head);
        text.push_str(choices);
        if let Some(usage) = usage {
            text.push_str(",\"usage\":");
            text.push_str(&usage.to_string());
        }
        text.push_str("}\n\n");
        Bytes::from(text)
    }

    /// Hands over what is due at `now`; when to come back, or `None` when done.
    fn step(&mut self, state: &State, now: Instant) -> Option<Instant> {
        const RETRY: Duration = Duration::from_millis(1);
        if !self.flush()? {
            return Some(now + RETRY);
        }
        // Nothing left once the record went out with the last piece.
        self.record.as_ref()?;
        if self.due > now {
            return Some(self.due);
        }
        let word = WORDS[self.rng.below(0, WORDS.len() as u64) as usize];
        let choices = if self.chat && self.next < self.reasoning_tokens {
            format!(
                r#"[{{"index":0,"delta":{{"reasoning_content":" {word}"}},"finish_reason":null}}]"#
            )
        } else if self.chat {
            format!(r#"[{{"index":0,"delta":{{"content":" {word}"}},"finish_reason":null}}]"#)
        } else {
            format!(r#"[{{"index":0,"text":" {word}","logprobs":null,"finish_reason":null}}]"#)
        };
        self.next += 1;
        let continuous = self
            .continuous_usage
            .then(|| usage_json(self.prompt_tokens, self.next, self.cached_tokens));
        let token = self.chunk(&choices, continuous);
        self.pending.push_back(Piece::Token(token));
        if self.next < self.stop_after {
            let itl = state.draw(&mut self.rng, state.args.itl_ms, state.args.itl_jitter_ms);
            self.due += Duration::from_secs_f64(itl * state.load_factor() / 1000.0);
        } else {
            self.end(state);
        }
        if !self.flush()? {
            return Some(now + RETRY);
        }
        self.record.as_ref().map(|_| self.due)
    }

    /// The pieces after the last token: finish, usage, `[DONE]` (or an error event).
    fn end(&mut self, state: &State) {
        let Some(mut record) = self.record.take() else {
            return;
        };
        record.output_tokens = self.stop_after;
        if self.fail_midstream {
            let error = json!({"error": {"message": "simulated failure mid-stream", "type": "server_error", "code": 500}});
            self.pending
                .push_back(Piece::Data(Bytes::from(format!("data: {error}\n\n"))));
            record.outcome = "midstream_error".into();
        } else {
            let final_usage =
                usage_json(self.prompt_tokens, self.output_tokens, self.cached_tokens);
            let finish = if self.chat {
                r#"[{"index":0,"delta":{},"finish_reason":"length"}]"#
            } else {
                r#"[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]"#
            };
            let in_finish =
                (self.include_usage && state.args.usage_in_finish_chunk) || self.continuous_usage;
            let chunk = self.chunk(finish, in_finish.then(|| final_usage.clone()));
            self.pending.push_back(Piece::Data(chunk));
            if self.include_usage && !in_finish {
                let chunk = self.chunk("[]", Some(final_usage));
                self.pending.push_back(Piece::Data(chunk));
            }
            self.pending
                .push_back(Piece::Data(Bytes::from_static(b"data: [DONE]\n\n")));
        }
        self.pending.push_back(Piece::Finished(record));
    }

    /// Hands pending pieces to the connection: `Some(true)` when all went, `Some(false)`
    /// when its channel is full, `None` when the client went away.
    fn flush(&mut self) -> Option<bool> {
        while let Some(piece) = self.pending.pop_front() {
            match self.sender.try_send(piece) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(piece)) => {
                    self.pending.push_front(piece);
                    return Some(false);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return None,
            }
        }
        Some(true)
    }
}

const WORDS: &[&str] = &[
    "the", "model", "token", "and", "of", "to", "in", "is", "that", "for", "on", "with", "as",
    "it", "was", "at", "by", "an", "be", "this", "from", "or", "are", "have", "not", "but",
];

fn words(rng: &mut Rng, count: u32) -> String {
    let mut text = String::with_capacity(count as usize * 6);
    for _ in 0..count {
        text.push(' ');
        text.push_str(WORDS[rng.below(0, WORDS.len() as u64) as usize]);
    }
    text
}

/// `/v1/embeddings`: one vector per input after the simulated prefill. A vector depends
/// only on the seed and its input's text (the same input, the same vector, as a real
/// model), unit length, `encoding_format` float or base64 (little-endian f32, what the
/// OpenAI Python client asks for by default).
async fn embeddings(
    state: Arc<State>,
    request: Request<Incoming>,
    arrival: SharedArrival,
) -> Response<SimBody> {
    let (body, arrival) = match read_body(request, &arrival).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("the body is not JSON: {error}"),
            );
        }
    };
    let Some(model) = value.get("model").and_then(Value::as_str) else {
        return error_response(StatusCode::BAD_REQUEST, "model is required");
    };
    if !state.args.models.iter().any(|m| m == model) {
        return error_response(
            StatusCode::NOT_FOUND,
            &format!("The model `{model}` does not exist."),
        );
    }
    // Inputs as text (counted in words) or token ids (counted as given).
    let inputs: Vec<(String, u32)> = match value.get("input") {
        Some(Value::String(text)) => vec![(text.clone(), text.split_whitespace().count() as u32)],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|t| (t.to_owned(), t.split_whitespace().count() as u32))
            .collect(),
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => {
            vec![(Value::Array(items.clone()).to_string(), items.len() as u32)]
        }
        Some(Value::Array(items)) if items.iter().all(Value::is_array) => items
            .iter()
            .map(|i| (i.to_string(), i.as_array().map_or(0, Vec::len) as u32))
            .collect(),
        _ => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "input must be a string, a list of strings, or token ids",
            );
        }
    };
    if inputs.is_empty() {
        return error_response(StatusCode::BAD_REQUEST, "input is empty");
    }
    let base64 = match value.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("encoding_format {other:?}: float or base64"),
            );
        }
    };
    let input_tokens: u32 = inputs.iter().map(|(_, n)| n).sum();
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    state.arrived.send_modify(|arrived| *arrived += 1);
    let mut rng = Rng::derive(state.args.seed, id);
    let active = state.active.fetch_add(1, Ordering::Relaxed) + 1;
    state.max_active.fetch_max(active, Ordering::Relaxed);
    let guard = ActiveGuard(state.clone());
    let drawn = state.draw(&mut rng, state.args.ttft_ms, state.args.ttft_jitter_ms)
        + state.args.prefill_ms_per_token * f64::from(input_tokens);
    let mut record = RequestRecord {
        id,
        model: model.to_owned(),
        stream: false,
        input_tokens,
        output_tokens: 0,
        drawn_ttft_ms: drawn,
        ttft_ms: 0.0,
        mean_itl_ms: 0.0,
        e2e_ms: 0.0,
        active_at_arrival: active,
        outcome: "ok".into(),
        cached_tokens: 0,
    };
    if rng.unit() < state.args.error_rate {
        drop(guard);
        record.outcome = "http_500".into();
        state.finish(record);
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "simulated server error");
    }
    let due = arrival + Duration::from_secs_f64(drawn * state.load_factor() / 1000.0);
    tokio::time::sleep_until(due).await;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, (text, _))| {
            let vector = embedding_of(state.args.seed, text, state.args.embedding_dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64_encode(&bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let elapsed = millis(arrival.elapsed());
    record.ttft_ms = elapsed;
    record.e2e_ms = elapsed;
    drop(guard);
    state.finish(record);
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": input_tokens, "total_tokens": input_tokens},
        }),
    )
}

/// A unit vector that depends only on `seed` and `text`.
fn embedding_of(seed: u64, text: &str, dimensions: u32) -> Vec<f32> {
    // FNV-1a of the text picks the generator.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    });
    let mut rng = Rng::derive(seed, hash);
    let raw: Vec<f64> = (0..dimensions).map(|_| rng.normal()).collect();
    let norm = raw
        .iter()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// Standard base64 with padding, as OpenAI's `encoding_format: base64` returns
/// embeddings (the crate the histograms already use).
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod embedding_tests {
    use super::*;

    #[test]
    fn vectors_are_deterministic_unit_vectors() {
        let a = embedding_of(1, "hello world", 64);
        assert_eq!(a, embedding_of(1, "hello world", 64));
        assert_ne!(a, embedding_of(1, "hello there", 64));
        assert_ne!(a, embedding_of(2, "hello world", 64));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
        }
    }
}
