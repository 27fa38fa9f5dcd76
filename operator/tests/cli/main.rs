//! The CLI on its own: validate, render and parse, `perfsweep results` over real and
//! untrusted record directories, the HTML report in a real browser, OME BenchmarkJobs, and
//! the chart's CRDs, and the agent process stopped by SIGTERM.
//!
//! One test binary per area (each links the whole operator once, not once per file);
//! every file below is one module, as it was one binary before.

#[path = "../local_support/mod.rs"]
mod local_support;
#[path = "../prometheus/mod.rs"]
mod prometheus;

mod agent_build;
mod agent_signal;
mod chart_crds;
mod cli;
mod ome_benchmarkjob;
mod report_browser;
mod results_cli;
mod results_untrusted;
// The agent build (`--no-default-features`) has no warehouse.
#[cfg(feature = "warehouse")]
mod warehouse_cli;
