//! The operator's controllers against the in-memory API double (perfsweep-testkit), with
//! the tests playing scheduler and kubelet (`support::kubelet`): benchmark and set
//! lifecycles of every kind, acceptance, fleet rounds, RBAC completeness, leader election,
//! `/metrics`, and `perfsweep run` against the double through a kubeconfig.
//!
//! One test binary per area (each links the whole operator once, not once per file);
//! every file below is one module, as it was one binary before.

#[path = "../prometheus/mod.rs"]
mod prometheus;
#[path = "../support/mod.rs"]
mod support;

mod acceptance;
mod benchmark_lifecycle;
mod benchmarkset_controller;
mod cluster_journey;
mod fio_pytorch_lifecycle;
mod fleet_rounds;
mod leader_election;
mod llm_distributed_lifecycle;
mod llm_progress;
mod metrics;
mod missing_crd;
mod mpi_rdma_lifecycle;
mod rbac_completeness;
mod shared_cluster;
