//! The LLM engine: load generator against the simulator (streaming variants, errors,
//! time budgets, offered load, doubt, prefix caches, reasoning, model mixes, workloads),
//! tokenizers, `perfsweep loadgen`'s exit code and more streams than the open-file limit.
//!
//! One test binary per area (each links the whole operator once, not once per file);
//! every file below is one module, as it was one binary before.

#[path = "../local_support/mod.rs"]
mod local_support;

mod llm_doubt;
mod llm_model_mix;
mod llm_offered_load;
mod llm_past_open_file_limit;
mod llm_prefix_cache;
mod llm_reasoning;
mod llm_sim_loadgen;
mod llm_tokenizer;
mod llm_workload;
mod loadgen_exit_code;
