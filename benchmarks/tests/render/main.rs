//! Rendering: every kind's plan rendered into pods, Services, PodGroups and volumes, and
//! checked against Volcano's and Multus's real CRDs and the Kubernetes schemas.
//!
//! One test binary per area; every file below is one module, as it was one binary before.

#[path = "../support/mod.rs"]
mod support;

mod render;
mod render_llm;
mod render_mpi_rdma;
mod render_volumes;
