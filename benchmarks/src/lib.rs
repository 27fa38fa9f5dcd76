//! perfsweep's domain logic, free of I/O: every benchmark kind's spec, status and result
//! types; BenchmarkSet expansion and validation; and the CRDs derived from those types.

pub mod acceptance;
pub mod agent_env;
pub mod common;
pub mod compat;
pub mod crd_rules;
pub mod crds;
pub mod digest;
pub mod document;
pub mod duration;
pub mod fleet;
pub mod format;
pub mod kind;
pub mod kinds;
pub mod labels;
pub mod metrics;
pub mod names;
pub mod ome;
pub mod outcome;
pub mod output;
pub mod parse_error;
pub mod plan;
// Progress lines are written by the LLM load generator too (perfsweep-llm).
pub use perfsweep_llm::progress;
pub mod reason;
pub mod record;
pub mod registry;
pub mod render;
pub mod report;
pub mod results;
pub mod schema;
pub mod set;
pub mod stats;
pub mod status;
pub mod structural;
pub mod tool_version;
pub mod validation;
pub mod volcano;
pub mod yaml;

/// The API group of every perfsweep resource.
pub const GROUP: &str = "perfsweep.io";
/// The served and stored API version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every perfsweep resource.
pub const API_VERSION: &str = "perfsweep.io/v1alpha1";
