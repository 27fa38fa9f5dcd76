//! The perfsweep operator, CLI and in-pod agent. Domain logic lives in
//! `perfsweep-benchmarks`; this crate adds the parts that touch the cluster, files and
//! processes.
//!
//! `unsafe` is denied here but in the agent: the system calls std does not wrap
//! (interfaces' addresses, a child's CPU time, process groups and the subreaper) are
//! there, each behind a safe function. The LLM engine's (socket timestamps, file
//! tables) live in perfsweep-llm.

#![deny(unsafe_code)]

// The agent talks to the kernel where std has no wrapper (see `agent::sys`).
#[allow(unsafe_code)]
pub mod agent;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod export;
pub mod health;
pub mod local;
pub mod metrics;
pub mod output_dir;
pub mod prometheus;
pub mod records;
pub mod telemetry;
pub mod token;
pub mod verdict;
