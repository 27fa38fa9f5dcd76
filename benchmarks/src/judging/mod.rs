//! Judging results, generic over kinds: headline metrics, the acceptance gates that bound
//! them, statistics across repetitions, and the fleet verdict of a node-pair sweep.

pub mod acceptance;
pub mod fleet;
pub mod metrics;
pub mod stats;
