//! Text formats perfsweep reads and writes, free of any perfsweep type: YAML, Go-style
//! durations, SI-scaled numbers, Kubernetes resource quantities, and canonical JSON with
//! its SHA-256 digest.

pub mod digest;
pub mod duration;
pub mod number;
pub mod quantity;
pub mod yaml;
