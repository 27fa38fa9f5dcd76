//! LLM inference benchmarking: the OpenAI-compatible simulator (`perfsweep sim`) and the
//! load generator (`perfsweep loadgen`) the LLMInference kind runs, and the report and
//! workload types they share with the rest of perfsweep.
//!
//! Two parts, so that the pure domain crate (`perfsweep-benchmarks`) can use the report
//! types without building an HTTP stack:
//! - always: [`report`] (the result document, its doubts, histograms and the merge of
//!   workers' results), [`scenario`] (traffic scenarios), [`progress`] (progress lines)
//!   and the per-process load limits below. Pure: serde, hdrhistogram, schemars.
//! - with the `engine` feature (default): the load generator, the simulator, tokenizers
//!   and datasets (tokio, hyper, rustls, tiktoken, libc). What they need from the host
//!   program (the agent's barrier, object storage) comes in through
//!   [`loadgen::Hooks`].

pub mod progress;
pub mod report;
pub mod scenario;

#[cfg(feature = "engine")]
pub mod dataset;
#[cfg(feature = "engine")]
pub mod fd_tables;
#[cfg(feature = "engine")]
pub mod loadgen;
#[cfg(feature = "engine")]
pub mod rng;
#[cfg(feature = "engine")]
pub mod sim;
#[cfg(feature = "engine")]
pub mod tokenizer;

/// Requests per second one load generator process offers at most. It spends about
/// 0.7 ms of CPU per streamed request (docs/measurements/llm-bench-2026-11-22.txt: 5,400
/// req/s on 2 cores), so 20,000 is a machine with many cores at full tilt; beyond it the
/// arrival schedule runs ahead of what the process can send, and the backlog grows
/// without end (1e6 req/s reached 2.1 GB and never finished).
pub const MAX_REQUEST_RATE_PER_LOADGEN: f64 = 20_000.0;

/// Streams (connections in flight) one load generator process holds at most: 50,000
/// were measured on one process (the same measurements); each costs a socket and buffers.
pub const MAX_CONCURRENCY_PER_LOADGEN: u32 = 50_000;
