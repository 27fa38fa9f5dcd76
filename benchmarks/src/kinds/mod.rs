//! The benchmark kinds: the trait each implements ([`kind`]), the fields they all share
//! ([`common`]), the registry that lists them ([`registry`]), and one module per kind
//! with its spec, status and result types, its plan and its parser. Adding a kind means
//! adding a module here and one line in [`registry::kinds`].

pub mod common;
pub mod fio;
pub mod hpcc;
pub mod iperf;
pub mod kind;
pub mod llm;
pub mod mpi;
pub mod mpi_pingpong;
pub mod openfoam;
pub mod pytorch;
pub mod rdma;
pub mod registry;
