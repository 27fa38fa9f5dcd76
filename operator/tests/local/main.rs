//! The local backend (`perfsweep run --local`) with real tools on this machine: iperf3,
//! fio, Open MPI + OpenFOAM, the LLM simulator and load generator, whole-fleet rounds,
//! acceptance reports, and runs that are signalled, repeated or pointed at bad input.
//!
//! One test binary per area (each links the whole operator once, not once per file);
//! every file below is one module, as it was one binary before.

#[path = "../local_support/mod.rs"]
mod local_support;

mod acceptance_report;
mod local_fio;
mod local_fleet;
mod local_hygiene;
mod local_iperf;
mod local_llm;
mod local_llm_distributed;
mod local_llm_tls;
mod local_llm_workloads;
mod local_mpi;
mod local_pytorch;
mod local_set_policy;
mod outcome_parity;
