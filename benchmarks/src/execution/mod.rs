//! The execution contract between the backends and the in-pod agent: the plan a kind
//! runs as, the agent's environment, where the output is exported, the progress lines
//! and end-of-role report the agent prints, the tool versions it asks for, and the
//! closed list of reasons a run fails (parse errors among them).

pub mod agent_env;
pub mod agent_report;
pub mod output;
pub mod parse_error;
pub mod plan;
// Progress lines are written by the LLM load generator too (perfsweep-llm).
pub use perfsweep_llm::progress;
pub mod reason;
pub mod tool_version;
