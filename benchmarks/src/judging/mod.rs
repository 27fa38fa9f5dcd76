//! Judging results, generic over kinds: headline metrics, the acceptance gates that bound
//! them, statistics across repetitions, the fleet verdict of a node-pair sweep and the per-node verdict of an
//! each-node sweep.

pub mod acceptance;
pub mod fleet;
pub mod metrics;
pub mod nodes;
pub mod stats;
