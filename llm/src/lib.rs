//! LLM inference benchmarking: the OpenAI-compatible simulator (`perfsweep sim`) and the
//! load generator (`perfsweep loadgen`) the LLMInference kind runs.

pub mod dataset;
pub mod fd_tables;
pub mod loadgen;
pub mod rng;
pub mod sim;
pub mod tokenizer;
