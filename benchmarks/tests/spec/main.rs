//! Specs, sets and what ships with them: BenchmarkSet expansion, node pairs and each node, the
//! kube-perftest migration promise, the checked-in CRDs, every example, and the images
//! the kinds run.
//!
//! One test binary per area; every file below is one module, as it was one binary before.

mod compat;
mod crds;
mod each_node;
mod examples;
mod expand;
mod images;
mod node_pairs;
