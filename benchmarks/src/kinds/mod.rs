//! One module per benchmark kind: its spec, status and result types (and, as the
//! execution engine lands, its plan and parser). Adding a kind means adding a module here
//! and one line in [`crate::registry::kinds`].

pub mod fio;
pub mod iperf;
pub mod llm;
pub mod mpi;
pub mod mpi_pingpong;
pub mod openfoam;
pub mod pytorch;
pub mod rdma;
