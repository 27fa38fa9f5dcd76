//! perfsweep's domain logic, free of I/O: every benchmark kind's spec, status and result
//! types; BenchmarkSet expansion and validation; and the CRDs derived from those types.

pub mod api;
pub mod crds;
pub mod execution;
pub mod formats;
pub mod input;
pub mod judging;
pub mod kinds;
pub mod outcome;
pub mod render;
pub mod results;
pub mod set;

/// The API group of every perfsweep resource.
pub const GROUP: &str = "perfsweep.io";
/// The served and stored API version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every perfsweep resource.
pub const API_VERSION: &str = "perfsweep.io/v1alpha1";
