//! The perfsweep operator, CLI and in-pod agent. Domain logic lives in
//! `perfsweep-benchmarks`; this crate adds the parts that touch the cluster, files and
//! processes.

pub mod agent;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod export;
pub mod health;
pub mod llm;
pub mod local;
pub mod metrics;
#[cfg(test)]
mod outcome_parity;
pub mod output_dir;
pub mod records;
pub mod telemetry;
pub mod verdict;
