//! Reading what users write: sweep and benchmark documents as YAML files, and OME's
//! BenchmarkJob converted to an LLMInference.

pub mod document;
pub mod ome;
