//! LLMInference: latency and throughput of an OpenAI-compatible inference endpoint.
//! The spec follows OME's BenchmarkJob.

pub mod scenario;

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::CommonSpec;
use crate::status::BenchmarkStatus;
use crate::validation::FieldError;
use scenario::TrafficScenario;

/// The API the endpoint speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApiFormat {
    /// OpenAI-compatible `/v1/completions` and `/v1/chat/completions`.
    #[default]
    Openai,
}

/// A Kubernetes Service serving the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Name of the Service.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Defaults to the benchmark's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Port of the Service that serves the OpenAI-compatible API.
    #[serde(default = "default_service_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// URL path prefix before `/v1`, if the server is mounted below the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

fn default_service_port() -> u16 {
    80
}

/// A KServe InferenceService (or OME InferenceService) serving the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InferenceServiceReference {
    /// Name of the InferenceService.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the benchmark's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Where the model is served: exactly one of url, service and inferenceService.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.url), has(self.service), has(self.inferenceService)].filter(x, x).size() == 1").message("set exactly one of url, service and inferenceService"))]
#[x_kube(validation = Rule::new("!has(self.url) || has(self.modelName)").message("modelName is required with url").field_path(".modelName"))]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Base URL of the server, e.g. `http://vllm.models:8000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^\s]+$"))]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_service: Option<InferenceServiceReference>,
    /// The API the endpoint speaks.
    #[serde(default)]
    pub api_format: ApiFormat,
    /// The model name sent in requests; checked against `/v1/models` before the run.
    /// Defaults to the InferenceService's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub model_name: Option<String>,
}

/// What the requests ask the model to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Task {
    #[default]
    #[serde(rename = "text-to-text")]
    TextToText,
    #[serde(rename = "text-to-embeddings")]
    TextToEmbeddings,
}

/// Where results are written (as OME's BenchmarkJob).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputLocation {
    /// `s3://bucket/prefix`, `gs://...`, `az://...`, `file:///path` or `pvc://claim/path`.
    #[schemars(regex(pattern = r"^(s3|gs|az|file|pvc)://.+$"))]
    pub storage_uri: String,
    /// Sink settings such as `endpoint`, `region` or `secretName`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// Latency and throughput of an LLM inference endpoint under load.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "LLMInference",
    plural = "llminferences",
    shortname = "llm",
    category = "perfsweep",
    namespaced,
    status = "LLMInferenceStatus",
    doc = "Latency and throughput of an OpenAI-compatible LLM inference endpoint under load.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Model","type":"string","jsonPath":".spec.endpoint.modelName"}"#,
    printcolumn = r#"{"name":"Task","type":"string","jsonPath":".spec.task"}"#,
    printcolumn = r#"{"name":"Result","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LLMInferenceSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// The server under test.
    pub endpoint: Endpoint,

    /// text-to-text or text-to-embeddings.
    #[serde(default)]
    pub task: Task,

    /// Request shapes in genai-bench syntax: `D(100,100)`, `N(480,240)/(300,150)`,
    /// `U(50,100)/(200,300)`, `U(512,128)`, `E(64)`. Each is one iteration group.
    #[serde(default = "default_scenarios")]
    #[schemars(length(min = 1, max = 64))]
    pub traffic_scenarios: Vec<Scenario>,

    /// Concurrent streams per iteration (closed loop), one iteration per value.
    #[serde(default = "default_concurrency")]
    #[schemars(length(min = 1, max = 64))]
    pub num_concurrency: Vec<Concurrency>,

    /// Minutes each iteration may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1440))]
    pub max_time_per_iteration: Option<u32>,

    /// Requests each iteration sends at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000000))]
    pub max_requests_per_iteration: Option<u64>,

    /// Extra request body fields passed through as given (e.g. `temperature: "0.0"`).
    /// Values are JSON-decoded when they parse as JSON, and sent as strings otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub additional_request_params: BTreeMap<String, String>,

    /// Where result records are exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_location: Option<OutputLocation>,
}

/// One genai-bench traffic scenario string.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Scenario(
    #[schemars(regex(
        pattern = r"^(D\([0-9]+,[0-9]+\)|N\([0-9]+,[0-9]+\)/\([0-9]+,[0-9]+\)|U\([0-9]+,[0-9]+\)(/\([0-9]+,[0-9]+\))?|E\([0-9]+\))$"
    ))]
    pub String,
);

/// One concurrency level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Concurrency(#[schemars(range(min = 1, max = 1000000))] pub u32);

fn default_scenarios() -> Vec<Scenario> {
    vec![Scenario("D(100,100)".into())]
}

fn default_concurrency() -> Vec<Concurrency> {
    vec![Concurrency(1)]
}

/// Placeholder for LLMInference results until the load generator lands: the headline
/// figures of the best iteration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LLMInferenceResult {
    /// Output tokens per second across all streams, best iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_second: Option<f64>,
    /// Mean time to first token in milliseconds, best iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_mean_millis: Option<f64>,
}

impl LLMInferenceResult {
    /// The headline figures in a few words.
    pub fn summary(&self) -> String {
        match (self.output_tokens_per_second, self.ttft_mean_millis) {
            (Some(tps), Some(ttft)) => format!("{tps:.0} tok/s, TTFT {ttft:.1} ms"),
            (Some(tps), None) => format!("{tps:.0} tok/s"),
            (None, Some(ttft)) => format!("TTFT {ttft:.1} ms"),
            (None, None) => String::new(),
        }
    }
}

/// LLMInference results come from perfsweep's own load generator, which reports them
/// structured; there is no third-party output to parse yet.
fn parse_unavailable(_raw: &str) -> Result<LLMInferenceResult, crate::parse_error::ParseError> {
    Err(crate::parse_error::ParseError::NotFound {
        what: "LLMInference result (the load generator is not part of this version)".into(),
    })
}

/// Status of an LLMInference benchmark.
pub type LLMInferenceStatus = BenchmarkStatus<LLMInferenceResult>;

impl crate::registry::BenchmarkKind for LLMInference {
    type Spec = LLMInferenceSpec;
    type Output = LLMInferenceResult;
    const PARSE_NAME: &'static str = "llm-inference";
    const IMAGE: &'static str = "perfsweep";

    fn parse(raw: &str) -> Result<LLMInferenceResult, crate::parse_error::ParseError> {
        parse_unavailable(raw)
    }

    fn headline(output: &LLMInferenceResult) -> String {
        output.summary()
    }
    const ROLES: &'static [&'static str] = &["loadgen"];

    fn common(spec: &LLMInferenceSpec) -> &CommonSpec {
        &spec.common
    }

    fn check(spec: &LLMInferenceSpec) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (index, Scenario(text)) in spec.traffic_scenarios.iter().enumerate() {
            let path = format!("spec.trafficScenarios[{index}]");
            match TrafficScenario::parse(text) {
                Err(error) => errors.push(FieldError::new(path, error.to_string())),
                Ok(scenario) => {
                    let embeddings = spec.task == Task::TextToEmbeddings;
                    if scenario.is_embedding() != embeddings {
                        errors.push(FieldError::new(
                            path,
                            if embeddings {
                                "task text-to-embeddings takes E(n) scenarios"
                            } else {
                                "E(n) scenarios need task text-to-embeddings"
                            },
                        ));
                    }
                }
            }
        }
        errors
    }
}
