//! Benchmark kinds. Each kind's `parse` module turns the raw output of its
//! tool into a structured result (pure functions, no I/O).

pub mod fio;
pub mod iperf;
pub mod mpi_pingpong;
pub mod openfoam;
pub mod pytorch;
pub mod rdma;
