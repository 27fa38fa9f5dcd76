//! LLMInference: latency and throughput of an OpenAI-compatible inference endpoint.
//! The spec follows OME's BenchmarkJob.

pub mod chart;
pub mod plan;
pub mod sessions;
pub mod tls;

// The result document, its doubts, histograms, the merge of workers' results and the
// traffic scenarios are shared with the load generator, so they live in perfsweep-llm's
// pure part (built here without its engine); these paths stay the kind's.
pub use perfsweep_llm::report::{distribute, doubt, histogram, result};
pub use perfsweep_llm::scenario;
pub use perfsweep_llm::{MAX_CONCURRENCY_PER_LOADGEN, MAX_REQUEST_RATE_PER_LOADGEN};

pub use result::LLMInferenceResult;

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::status::BenchmarkStatus;
use crate::api::validation::FieldError;
use crate::kinds::common::CommonSpec;
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
    /// Defaults to the benchmark's namespace. Set it for KServe's Serverless mode,
    /// whose cluster-local gateway routes by the full host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Whose InferenceService: `serving.kserve.io` (KServe, the default), reached at
    /// its predictor Service `<name>-predictor`, or `ome.io` (OME), reached at its
    /// Service `<name>`.
    #[serde(default)]
    pub api_group: InferenceServiceGroup,
    /// Port of the Service; defaults to 80 for KServe and 8080 for OME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
}

/// The API group of an InferenceService, which decides the Service that serves it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InferenceServiceGroup {
    /// KServe: the predictor's Service `<name>-predictor` (port 80), which both the
    /// Standard (RawDeployment) and the Serverless mode create.
    #[default]
    #[serde(rename = "serving.kserve.io")]
    Kserve,
    /// OME: the InferenceService's own Service `<name>` (port 8080).
    #[serde(rename = "ome.io")]
    Ome,
}

/// A simulated endpoint (`perfsweep sim`) run as a second role of the benchmark: no GPU,
/// no model server. For trying perfsweep out, CI, and measuring the load generator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimulatorSpec {
    /// Mean time to first token, milliseconds.
    #[serde(default = "default_sim_ttft")]
    #[schemars(range(min = 0.0, max = 600000.0))]
    pub ttft_millis: f64,
    /// Mean inter-token latency, milliseconds.
    #[serde(default = "default_sim_itl")]
    #[schemars(range(min = 0.0, max = 60000.0))]
    pub itl_millis: f64,
    /// Standard deviation of the time to first token (normal, clipped at 0), milliseconds.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 600000.0))]
    pub ttft_jitter_millis: f64,
    /// Standard deviation of inter-token latencies (normal, clipped at 0), milliseconds.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 60000.0))]
    pub itl_jitter_millis: f64,
    /// Requests served at full speed; beyond, latencies grow by (active - capacity) /
    /// capacity like a saturated batching server. Unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub capacity: Option<u32>,
    /// Seed of the simulator's random draws.
    #[serde(default)]
    pub seed: u64,
    /// Port the simulator listens on.
    #[serde(default = "default_sim_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// Extra time to first token per prompt token not in the prefix cache (prefill),
    /// milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0.0, max = 1000.0))]
    pub prefill_millis_per_token: f64,
    /// A prefix cache (as vLLM's automatic prefix caching): prompt blocks seen before
    /// cost no prefill, and usage reports them as `cached_tokens`. Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<SimPrefixCacheSpec>,
    /// Serve the model as a reasoning model: each chat stream sends this many of its
    /// output tokens first as `delta.reasoning_content`, then the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub reasoning_tokens: Option<u32>,
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// One model of a `modelMix`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightedModel {
    /// The model name sent in requests.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Its share of the requests, relative to the others' weights.
    // The bounds are written so that every YAML reader takes them for numbers: Helm
    // re-emits 0.000001 as `1e-06`, which YAML 1.1 readers take for a string.
    #[schemars(range(min = 0.001, max = 1000000.0))]
    pub weight: f64,
}

/// The simulator's prefix cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimPrefixCacheSpec {
    /// Blocks it holds, least recently used out.
    #[serde(default = "default_prefix_cache_blocks")]
    #[schemars(range(min = 1, max = 100000000))]
    pub blocks: u32,
    /// Prompt tokens per block; a block is cached only with everything before it.
    #[serde(default = "default_prefix_block_tokens")]
    #[schemars(range(min = 1, max = 65536))]
    pub block_tokens: u32,
}

fn default_prefix_cache_blocks() -> u32 {
    65536
}

fn default_prefix_block_tokens() -> u32 {
    16
}

/// Shared-prefix prompts for prefix-cache tests (genai-bench's and aiperf's
/// shared-prefix synthetic workloads): `groups` system prompts, each request one of
/// them followed by a question of its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedPrefixSpec {
    /// Distinct system prompts.
    #[schemars(range(min = 1, max = 100000))]
    pub groups: u32,
    /// Tokens of each system prompt.
    #[schemars(range(min = 0, max = 1000000))]
    pub system_prompt_tokens: u32,
    /// Tokens of each request's question.
    #[schemars(range(min = 1, max = 1000000))]
    pub question_tokens: u32,
    /// Tokens each request generates.
    #[schemars(range(min = 1, max = 1000000))]
    pub output_tokens: u32,
}

fn default_sim_ttft() -> f64 {
    50.0
}

fn default_sim_itl() -> f64 {
    10.0
}

fn default_sim_port() -> u16 {
    18000
}

/// OME's direct-URL endpoint, as a BenchmarkJob writes it:
/// `endpoint: {endpoint: {url, apiFormat, modelName}}`. The URL may be the full request
/// URL (`.../v1/completions` or `.../v1/chat/completions`, which picks the API) or the
/// server's base URL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectEndpoint {
    /// e.g. `http://my-model-service:8080/v1/completions`.
    #[schemars(regex(pattern = r"^https?://[^\s]+$"))]
    pub url: String,
    /// The API the endpoint speaks.
    #[serde(default)]
    pub api_format: ApiFormat,
    /// The model name sent in requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub model_name: Option<String>,
}

/// The request paths a direct URL may end in, and the API each picks.
const DIRECT_PATHS: &[(&str, Option<Api>)] = &[
    ("/v1/chat/completions", Some(Api::Chat)),
    ("/v1/completions", Some(Api::Completions)),
    ("/v1/embeddings", None),
];

impl DirectEndpoint {
    /// The server's base URL (the request path taken off) and the API the URL picks.
    pub fn split(&self) -> (String, Option<Api>) {
        let url = self.url.trim_end_matches('/');
        for (path, api) in DIRECT_PATHS {
            if let Some(base) = url.strip_suffix(path) {
                return (base.to_owned(), *api);
            }
        }
        (url.to_owned(), None)
    }
}

/// Where the model is served: exactly one of url, endpoint (OME's direct URL), service,
/// inferenceService and simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.url), has(self.endpoint), has(self.service), has(self.inferenceService), has(self.simulator)].filter(x, x).size() == 1").message("set exactly one of url, endpoint, service, inferenceService and simulator"))]
#[x_kube(validation = Rule::new("!has(self.url) || has(self.modelName)").message("modelName is required with url").field_path(".modelName"))]
#[x_kube(validation = Rule::new("!has(self.endpoint) || has(self.endpoint.modelName) || has(self.modelName)").message("modelName is required with a direct endpoint").field_path(".endpoint.modelName"))]
#[x_kube(validation = Rule::new("!has(self.endpoint) || !has(self.modelName) || !has(self.endpoint.modelName) || self.modelName == self.endpoint.modelName").message("name the model once: endpoint.modelName or modelName").field_path(".modelName"))]
#[x_kube(validation = Rule::new("!has(self.tls) || !has(self.url) || self.url.startsWith('https://')").message("tls needs an https:// url").field_path(".tls"))]
#[x_kube(validation = Rule::new("!has(self.tls) || !has(self.endpoint) || self.endpoint.url.startsWith('https://')").message("tls needs an https:// url").field_path(".tls"))]
#[x_kube(validation = Rule::new("!has(self.tls) || !(has(self.inferenceService) || has(self.simulator))").message("tls applies to url and service endpoints").field_path(".tls"))]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Base URL of the server, e.g. `http://vllm.models:8000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^\s]+$"))]
    pub url: Option<String>,
    /// OME's direct-URL form: `{url, apiFormat, modelName}`; a url ending in
    /// `/v1/completions` or `/v1/chat/completions` picks the API (over `spec.api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<DirectEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_service: Option<InferenceServiceReference>,
    /// Run `perfsweep sim` as the endpoint (model name defaults to `perfsweep-sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<SimulatorSpec>,
    /// The API the endpoint speaks.
    #[serde(default)]
    pub api_format: ApiFormat,
    /// The model name sent in requests; checked against `/v1/models` before the run.
    /// Defaults to the InferenceService's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub model_name: Option<String>,
    /// A key of a Secret in the benchmark's namespace holding the API key, sent as
    /// `Authorization: Bearer <key>`. It reaches the load generator as an environment
    /// variable (never in arguments, logs or status); `perfsweep run --local` reads it
    /// from the environment variable `PERFSWEEP_SECRET_<NAME>_<KEY>` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<KeyRef>,
    /// How the load generator verifies the endpoint's certificate. A `service` is
    /// reached over `https://` when it is set; an `https://` url without it is verified
    /// against the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<tls::EndpointTls>,
}

/// One key of a ConfigMap or Secret in the benchmark's namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// Name of the ConfigMap or Secret.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,
    /// The key.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
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

/// Which OpenAI API the requests use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `/v1/chat/completions`.
    #[default]
    Chat,
    /// `/v1/completions`.
    Completions,
}

/// Service level objectives: goodput counts the requests meeting all that are set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SloSpec {
    /// Largest acceptable time to first token, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub ttft_millis: Option<f64>,
    /// Largest acceptable time per output token, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub tpot_millis: Option<f64>,
    /// Percentage of requests that must meet the objectives for an iteration to count
    /// as meeting them (and qualify for the headline).
    #[serde(default = "default_attainment")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub attainment_percent: f64,
}

/// How open-loop requests arrive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exactly 1 / rate apart.
    Constant,
    /// A Poisson process: exponential intervals with mean 1 / rate.
    #[default]
    Poisson,
    /// Gamma intervals with shape `burstiness` and mean 1 / rate (vLLM's
    /// `--burstiness`): 1 is Poisson, below 1 burstier, above 1 more regular.
    Gamma,
}

/// What a saturation search varies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SaturationLoad {
    /// Closed-loop concurrent streams.
    #[default]
    Concurrency,
    /// Open-loop requests per second (with `arrivals` and `maxConcurrency`).
    RequestRate,
}

/// A search for the highest load that meets the SLOs: the load doubles from `start`
/// until an iteration misses them (or `max` passes), then bisects between the highest
/// passing and the lowest failing load; every probe is an ordinary iteration of the
/// result, and `result.saturation` names the winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("!has(self.start) || !has(self.max) || self.start <= self.max").message("start must be at most max").field_path(".start"))]
#[serde(rename_all = "camelCase")]
pub struct SaturationSpec {
    /// `concurrency` (default) or `requestRate`.
    #[serde(default)]
    pub load: SaturationLoad,
    /// The first load probed (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001, max = 1000000.0))]
    pub start: Option<f64>,
    /// The highest load probed (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001, max = 1000000.0))]
    pub max: Option<f64>,
    /// Iterations the search runs at most, per traffic scenario.
    #[serde(default = "default_probes")]
    #[schemars(range(min = 1, max = 64))]
    pub max_iterations: u32,
    /// A request rate search stops when the highest passing and the lowest failing
    /// rate are within this percentage of each other (concurrency: when adjacent).
    #[serde(default = "default_precision")]
    #[schemars(range(min = 0.1, max = 100.0))]
    pub precision_percent: f64,
}

fn default_probes() -> u32 {
    12
}

fn default_precision() -> f64 {
    5.0
}

fn default_attainment() -> f64 {
    90.0
}

fn default_true() -> bool {
    true
}

fn default_max_error_rate() -> f64 {
    5.0
}

/// A file on an existing PersistentVolumeClaim (mounted into the load generator's pods).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("!self.path.matches('(^|/)[.][.](/|$)')").message("path must stay inside the claim (no ..)").field_path(".path"))]
#[serde(rename_all = "camelCase")]
pub struct PvcFile {
    /// Name of the claim, in the benchmark's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,
    /// Path of the file inside the claim.
    #[schemars(length(min = 1, max = 4096))]
    pub path: String,
}

/// A tokenizer vocabulary bundled with perfsweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BuiltinTokenizer {
    /// GPT-4 / GPT-3.5 (tiktoken's cl100k_base).
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
    /// GPT-4o (tiktoken's o200k_base).
    #[serde(rename = "o200k_base")]
    O200kBase,
}

/// The tokenizer synthetic prompts are built with (prompts of exactly the scenario's
/// token count) and tokens are counted with when the server reports none or to check
/// what it reports. Exactly one source; never downloaded at run time. A `tokenizer.json`
/// must be a byte-level BPE one (GPT-2, Llama 3, Qwen, DeepSeek, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.builtin), has(self.configMap), has(self.pvc), has(self.file)].filter(x, x).size() == 1").message("set exactly one of builtin, configMap, pvc and file"))]
#[serde(rename_all = "camelCase")]
pub struct TokenizerSpec {
    /// A bundled vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinTokenizer>,
    /// A tokenizer.json in a ConfigMap (ConfigMaps hold at most 1 MiB: larger
    /// tokenizers belong on a PVC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeyRef>,
    /// A tokenizer.json on a PersistentVolumeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcFile>,
    /// A tokenizer.json path the load generator reads directly: on this machine with
    /// `run --local`, inside the image on Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub file: Option<String>,
}

/// The format of a dataset file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// ShareGPT JSON: prompt = first human turn, output length = its reply's tokens.
    Sharegpt,
    /// One prompt per line (blank lines skipped).
    Prompts,
    /// A Mooncake-style JSON Lines trace (`timestamp` ms, `input_length`,
    /// `output_length`, `hash_ids`), replayed on its own schedule: one open-loop
    /// iteration (the load levels are not used), latency from each request's scheduled
    /// time, prompts sharing their leading hash ids sharing those prefixes.
    #[serde(rename = "mooncakeTrace")]
    MooncakeTrace,
}

/// Where a dataset file comes from: exactly one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.configMap), has(self.pvc), has(self.file), has(self.url)].filter(x, x).size() == 1").message("set exactly one of configMap, pvc, file and url"))]
#[x_kube(validation = Rule::new("!has(self.secretName) || (has(self.url) && self.url.matches('^(s3|gs|az)://'))").message("secretName holds object storage credentials: it goes with an s3://, gs:// or az:// url").field_path(".secretName"))]
#[serde(rename_all = "camelCase")]
pub struct DatasetSource {
    /// A key of a ConfigMap (at most 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeyRef>,
    /// A file on a PersistentVolumeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcFile>,
    /// A path the load generator reads directly (this machine with `run --local`, the
    /// image on Kubernetes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub file: Option<String>,
    /// A URL the load generator reads once at start: `http(s)://` (a presigned
    /// object-storage URL works), or `s3://`, `gs://`, `az://bucket/key` with
    /// credentials in the load generator's environment (as `perfsweep --export` reads
    /// them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, GOOGLE_SERVICE_ACCOUNT_KEY,
    /// AZURE_STORAGE_ACCOUNT_KEY).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(https?|s3|gs|az)://[^\s]+/[^\s/]+$"))]
    pub url: Option<String>,
    /// Object storage settings of an s3://, gs:// or az:// url: `endpoint` (an
    /// S3-compatible server), `region`, `account`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// A Secret in the benchmark's namespace with the credentials of an s3://, gs:// or
    /// az:// url, under the names the clouds' tools use: AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN optional), GOOGLE_SERVICE_ACCOUNT_KEY,
    /// or AZURE_STORAGE_ACCOUNT_KEY (AZURE_STORAGE_ACCOUNT_NAME optional). They reach
    /// the load generator as `valueFrom.secretKeyRef`; the operator never reads them.
    /// Locally: `PERFSWEEP_SECRET_<NAME>_<KEY>` variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
}

/// Prompts from a dataset instead of synthetic traffic scenarios: one iteration per
/// concurrency level, labelled `dataset`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatasetSpec {
    /// `sharegpt`, `prompts` or `mooncakeTrace`.
    pub format: DatasetFormat,
    /// Where the file is.
    pub source: DatasetSource,
    /// Entries used at most (a seeded sample of the dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000000))]
    pub max_prompts: Option<u64>,
    /// Seed of the sample and of the order entries are sent in.
    #[serde(default)]
    pub seed: u64,
    /// Tokens to generate per request of a `prompts` dataset; the server decides
    /// without. (ShareGPT entries ask for their reply's length.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub output_tokens: Option<u32>,
    /// `mooncakeTrace`: prompt tokens each hash id stands for (512 in Mooncake's
    /// traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub block_tokens: Option<u32>,
}

/// Where results are exported (OME's BenchmarkJob shape); every kind has it now, through
/// the common fields.
pub use crate::execution::output::OutputLocation;

mod headers;

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
    // The model benchmarked, resolved (the simulator's, an InferenceService's), not only
    // a modelName the spec may leave out.
    printcolumn = r#"{"name":"Model","type":"string","jsonPath":".status.result.model"}"#,
    printcolumn = r#"{"name":"Task","type":"string","jsonPath":".spec.task"}"#,
    printcolumn = r#"{"name":"Result","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Progress","type":"string","priority":1,"jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("!has(self.maxConcurrency) || (has(self.requestRates) && size(self.requestRates) > 0) || (has(self.saturation) && has(self.saturation.load) && self.saturation.load == 'requestRate')").message("maxConcurrency caps open-loop iterations: it needs requestRates or a requestRate saturation search").field_path(".maxConcurrency"))]
#[x_kube(validation = Rule::new("!has(self.burstiness) || (has(self.arrivals) && self.arrivals == 'gamma')").message("burstiness is the shape of gamma arrivals: set arrivals: gamma").field_path(".burstiness"))]
#[x_kube(validation = Rule::new("!has(self.saturation) || !has(self.workers) || self.workers == 1").message("a saturation search runs with one worker: each worker would steer it by its own share of the load").field_path(".workers"))]
#[x_kube(validation = Rule::new("!has(self.saturation) || (has(self.slo) && (has(self.slo.ttftMillis) || has(self.slo.tpotMillis)))").message("a saturation search needs an objective: slo.ttftMillis or slo.tpotMillis").field_path(".saturation"))]
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

    /// Concurrent streams per iteration (closed loop: each stream sends its next request
    /// when the last one finished), one iteration per value. Defaults to `[1]` when
    /// neither `requestRates` nor `saturation` is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub num_concurrency: Vec<Concurrency>,

    /// Offered loads in requests per second (open loop: requests are due on an arrival
    /// schedule whatever the server does), one iteration per value, run after the
    /// `numConcurrency` iterations. Latencies count from when a request was due, so a
    /// client that falls behind cannot hide a slow server; `scheduleLagMillis` in the
    /// result shows how late requests went out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub request_rates: Vec<RequestRate>,

    /// How open-loop requests arrive: `constant`, `poisson` (default) or `gamma`.
    #[serde(default)]
    pub arrivals: Arrivals,

    /// Shape of gamma arrivals (`arrivals: gamma`), as vLLM's `--burstiness`: 1 is
    /// Poisson, below 1 burstier, above 1 more regular; the mean rate is unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.01, max = 1000.0))]
    pub burstiness: Option<f64>,

    /// Open loop: requests in flight at most. A request due while the cap is full waits
    /// for a free slot, and its latency still counts from when it was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_concurrency: Option<u32>,

    /// Search for the highest concurrency or request rate that meets the SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<SaturationSpec>,

    /// Minutes each iteration sends measured requests. Requests still in flight when
    /// the time is up are cancelled and left out of the figures (counted as
    /// `cooldownRequests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1440))]
    pub max_time_per_iteration: Option<u32>,

    /// Measured requests each iteration sends at most (warmup not included). Without it
    /// and `maxTimePerIteration`: max(100, 4 × concurrency), or max(100, 10 seconds of
    /// arrivals) in open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000000))]
    pub max_requests_per_iteration: Option<u64>,

    /// Extra request body fields passed through as given (e.g. `temperature: "0.0"`).
    /// Values are JSON-decoded when they parse as JSON, and sent as strings otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub additional_request_params: BTreeMap<String, String>,

    /// The API requests use: `chat` (default) or `completions`.
    #[serde(default)]
    pub api: Api,

    /// Stream responses (server-sent events); needed for time to first token.
    #[serde(default = "default_true")]
    pub streaming: bool,

    /// Objectives for goodput and the headline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSpec>,

    /// The benchmark fails when more than this percentage of requests failed.
    #[serde(default = "default_max_error_rate")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_error_rate_percent: f64,

    /// Requests per iteration not measured; defaults to one per concurrent stream (one
    /// second of arrivals in open loop), or none when `warmupSeconds` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000))]
    pub warmup_requests: Option<u64>,

    /// Seconds from each iteration's start whose requests are not measured (with
    /// `warmupRequests`, both must have passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 3600.0))]
    pub warmup_seconds: Option<f64>,

    /// Extra HTTP headers sent with every request, in clear: they are part of the spec,
    /// the pod's command line and every record. Headers that carry a credential
    /// (`Authorization`, `api-key`, anything naming a token, key, secret, password or
    /// cookie) are refused here: give them with `requestHeaderSecrets`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub request_headers: BTreeMap<String, String>,

    /// Headers whose values come from Secrets (e.g. Azure OpenAI's `api-key`): header
    /// name → Secret name and key in the benchmark's namespace. The value reaches the
    /// load generator only as an environment variable from the Secret; the spec, the
    /// command line, logs, evidence and exported records carry the header's name alone.
    /// A local run reads `PERFSWEEP_SECRET_<NAME>_<KEY>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub request_header_secrets: BTreeMap<String, KeyRef>,

    /// Seed of the synthetic prompts and token counts.
    #[serde(default)]
    pub seed: u64,

    /// The tokenizer for exact-length prompts and token counts; `builtin: cl100k_base`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerSpec>,

    /// Prompts from a dataset; the traffic scenarios are then not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetSpec>,

    /// A weighted mix of model names sent in one run (a base model and its LoRA
    /// adapters): each request draws one by weight, and every iteration reports its
    /// figures per model (`perModel`). The simulator serves every name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub model_mix: Vec<WeightedModel>,

    /// Shared-prefix synthetic prompts (prefix-cache tests); the traffic scenarios are
    /// then not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<SharedPrefixSpec>,

    /// Multi-turn chat sessions: each of the `numConcurrency` streams holds one
    /// conversation at a time, every turn sending the history so far plus a new user
    /// message; figures per turn (`perTurn`). The traffic scenarios are then not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<sessions::SessionsSpec>,

    /// Load generator pods sharing the load, gang-scheduled together. Concurrency,
    /// request budgets and warmup are split among them (the remainder one each to the
    /// first workers), each draws its own prompts, all start every iteration at the
    /// same instant, and their histograms and counts are merged exactly.
    #[serde(default = "default_workers")]
    #[schemars(range(min = 1, max = 256))]
    pub workers: u32,

    /// What the endpoint runs (OME's `serviceMetadata`), recorded in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_metadata: Option<ServiceMetadataSpec>,

    /// Settings for the load generator pods only (OME's `podOverride`); the simulator
    /// role keeps the benchmark-wide settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_override: Option<crate::execution::plan::PodOverride>,
}

fn default_workers() -> u32 {
    1
}

/// What the endpoint under test runs, as OME's BenchmarkJob declares it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMetadataSpec {
    /// The serving engine, e.g. `vLLM`, `SGLang` or `TGI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub engine: Option<String>,
    /// The engine's version, e.g. `v0.4.0.post1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub version: Option<String>,
    /// The GPU model, e.g. `H100`, `A100`, `MI300` or `A10`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub gpu_type: Option<String>,
    /// GPUs serving the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100000))]
    pub gpu_count: Option<u32>,
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

/// One open-loop request rate, per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct RequestRate(#[schemars(range(min = 0.001, max = 1000000.0))] pub f64);

fn default_scenarios() -> Vec<Scenario> {
    vec![Scenario("D(100,100)".into())]
}

/// Status of an LLMInference benchmark.
pub type LLMInferenceStatus = BenchmarkStatus<LLMInferenceResult>;

impl crate::kinds::kind::BenchmarkKind for LLMInference {
    type Spec = LLMInferenceSpec;
    type Output = LLMInferenceResult;
    const PARSE_NAME: &'static str = "llm-inference";
    const IMAGE: &'static str = "perfsweep";

    fn parse(raw: &str) -> Result<LLMInferenceResult, crate::execution::parse_error::ParseError> {
        plan::parse(raw)
    }

    fn plan(
        spec: &LLMInferenceSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        plan::plan(spec)
    }

    fn merge(
        outputs: Vec<LLMInferenceResult>,
    ) -> Result<LLMInferenceResult, crate::execution::parse_error::ParseError> {
        distribute::merge(outputs).map_err(|error| match error {
            perfsweep_llm::report::MergeError::ToolReportedError(m) => {
                crate::execution::parse_error::ParseError::ToolReportedError(m)
            }
            perfsweep_llm::report::MergeError::Unmergeable(m) => {
                crate::execution::parse_error::ParseError::Unmergeable(m)
            }
        })
    }

    fn headline(output: &LLMInferenceResult) -> String {
        output.summary()
    }

    const METRICS: &'static [crate::judging::metrics::MetricDef] = METRICS;

    fn metrics(output: &LLMInferenceResult) -> Vec<crate::judging::metrics::Metric> {
        METRICS[0]
            .maybe(output.output_tokens_per_second)
            .into_iter()
            .chain(METRICS[1].maybe(output.ttft_mean_millis))
            .collect()
    }
    const ROLES: &'static [&'static str] = &["loadgen", "simulator"];
    const REPORTS_PROGRESS: bool = true;

    fn common(spec: &LLMInferenceSpec) -> &CommonSpec {
        &spec.common
    }

    fn check(spec: &LLMInferenceSpec) -> Vec<FieldError> {
        let mut errors = headers::check(spec);
        if plan::model_name(spec).is_err() {
            errors.push(FieldError::new(
                "spec.endpoint.modelName",
                "modelName is required with url and service",
            ));
        }
        if spec.dataset.is_some()
            && spec
                .traffic_scenarios
                .iter()
                .any(|s| s.0 != default_scenarios()[0].0)
        {
            errors.push(FieldError::new(
                "spec.trafficScenarios",
                "a dataset replaces the traffic scenarios: set one or the other",
            ));
        }
        if spec.shared_prefix.is_some() {
            if spec.dataset.is_some() {
                errors.push(FieldError::new(
                    "spec.sharedPrefix",
                    "sharedPrefix and dataset both choose the prompts: set one or the other",
                ));
            }
            if spec
                .traffic_scenarios
                .iter()
                .any(|s| s.0 != default_scenarios()[0].0)
            {
                errors.push(FieldError::new(
                    "spec.trafficScenarios",
                    "sharedPrefix replaces the traffic scenarios: set one or the other",
                ));
            }
            if spec.task == Task::TextToEmbeddings {
                errors.push(FieldError::new(
                    "spec.sharedPrefix",
                    "shared-prefix prompts are for text-to-text",
                ));
            }
        }
        errors.extend(sessions::check(spec));
        if spec.sessions.is_some()
            && spec
                .traffic_scenarios
                .iter()
                .any(|s| s.0 != default_scenarios()[0].0)
        {
            errors.push(FieldError::new(
                "spec.trafficScenarios",
                "sessions replace the traffic scenarios: set one or the other",
            ));
        }
        for (path, file) in [
            (
                "spec.tokenizer.pvc.path",
                spec.tokenizer.as_ref().and_then(|t| t.pvc.as_ref()),
            ),
            (
                "spec.dataset.source.pvc.path",
                spec.dataset.as_ref().and_then(|d| d.source.pvc.as_ref()),
            ),
        ] {
            if let Some(file) = file
                && (file.path.split('/').any(|p| p == "..")
                    || file.path.trim_matches('/').is_empty())
            {
                errors.push(FieldError::new(
                    path,
                    "a file path inside the claim, without ..",
                ));
            }
        }
        let scenarios = if spec.dataset.is_some() {
            &[][..]
        } else {
            &spec.traffic_scenarios[..]
        };
        for (index, Scenario(text)) in scenarios.iter().enumerate() {
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
        errors.extend(check_offered_load(spec));
        errors
    }
}

/// The largest offered load `workers` load generators can carry, per field: each worker
/// takes an equal share, which must stay within one process's limits.
fn check_offered_load(spec: &LLMInferenceSpec) -> Vec<FieldError> {
    let workers = spec.workers.max(1);
    let max_rate = MAX_REQUEST_RATE_PER_LOADGEN * f64::from(workers);
    let max_streams = u64::from(MAX_CONCURRENCY_PER_LOADGEN) * u64::from(workers);
    let too_fast = |path: String, rate: f64| {
        FieldError::new(
            path,
            format!(
                "{rate} requests/s is more than {workers} load generator(s) can offer: at most \
                 {MAX_REQUEST_RATE_PER_LOADGEN} per worker ({max_rate} in all); lower it or \
                 raise spec.workers to {}",
                (rate / MAX_REQUEST_RATE_PER_LOADGEN).ceil()
            ),
        )
    };
    let too_many = |path: String, streams: u64| {
        FieldError::new(
            path,
            format!(
                "{streams} concurrent streams are more than {workers} load generator(s) can \
                 hold: at most {MAX_CONCURRENCY_PER_LOADGEN} per worker ({max_streams} in \
                 all); lower it or raise spec.workers to {}",
                streams.div_ceil(u64::from(MAX_CONCURRENCY_PER_LOADGEN))
            ),
        )
    };
    let mut errors = Vec::new();
    for (index, RequestRate(rate)) in spec.request_rates.iter().enumerate() {
        if *rate > max_rate {
            errors.push(too_fast(format!("spec.requestRates[{index}]"), *rate));
        }
    }
    for (index, Concurrency(streams)) in spec.num_concurrency.iter().enumerate() {
        if u64::from(*streams) > max_streams {
            errors.push(too_many(
                format!("spec.numConcurrency[{index}]"),
                u64::from(*streams),
            ));
        }
    }
    if let Some(cap) = spec.max_concurrency
        && u64::from(cap) > max_streams
    {
        errors.push(too_many("spec.maxConcurrency".into(), u64::from(cap)));
    }
    if let Some(saturation) = &spec.saturation
        && let Some(max) = saturation.max
    {
        let path = "spec.saturation.max".to_owned();
        match saturation.load {
            SaturationLoad::RequestRate if max > max_rate => errors.push(too_fast(path, max)),
            SaturationLoad::Concurrency if max > max_streams as f64 => {
                errors.push(too_many(path, max.ceil() as u64));
            }
            _ => {}
        }
    }
    errors
}

const METRICS: &[crate::judging::metrics::MetricDef] = &[
    crate::judging::metrics::MetricDef::higher(
        "output_tokens_per_second",
        "tokens/s",
        "output tokens per second across all streams",
    )
    .up_to(1e9),
    crate::judging::metrics::MetricDef::lower(
        "ttft_mean_milliseconds",
        "ms",
        "mean time to first token",
    )
    .up_to(3.6e6),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::kind::BenchmarkKind;
    use serde_json::{Value, json};

    fn errors(spec: Value) -> Vec<String> {
        let info = crate::kinds::registry::lookup("LLMInference").expect("registered");
        let object = json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
            "metadata": {"name": "t", "namespace": "default"}, "spec": spec,
        });
        info.validate(&object)
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    }

    fn with(extra: Value) -> Value {
        let mut spec = json!({"endpoint": {"url": "http://vllm:8000", "modelName": "m"}});
        if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
            spec.extend(extra);
        }
        spec
    }

    #[test]
    fn open_loop_settings_validate_together() {
        assert_eq!(
            errors(with(
                json!({"requestRates": [1.5, 20], "arrivals": "gamma", "burstiness": 0.5, "maxConcurrency": 8})
            )),
            Vec::<String>::new()
        );
        let cap_alone = errors(with(json!({"numConcurrency": [4], "maxConcurrency": 8})));
        assert!(
            cap_alone
                .iter()
                .any(|e| e.contains("maxConcurrency caps open-loop")),
            "{cap_alone:?}"
        );
        let burst = errors(with(json!({"requestRates": [1], "burstiness": 0.5})));
        assert!(
            burst.iter().any(|e| e.contains("arrivals: gamma")),
            "{burst:?}"
        );
        let zero = errors(with(json!({"requestRates": [0]})));
        assert!(!zero.is_empty(), "a zero rate is refused");
    }

    #[test]
    fn dataset_credentials_go_with_object_storage_urls_only() {
        let source = |source: Value| {
            errors(with(json!({
                "dataset": {"format": "prompts", "source": source},
            })))
        };
        assert_eq!(
            source(json!({"url": "s3://datasets/prompts.txt", "secretName": "s3-creds"})),
            Vec::<String>::new()
        );
        for refused in [
            json!({"url": "https://example.com/prompts.txt", "secretName": "s3-creds"}),
            json!({"file": "/data/prompts.txt", "secretName": "s3-creds"}),
        ] {
            let found = source(refused.clone());
            assert!(
                found
                    .iter()
                    .any(|e| e.contains("secretName holds object storage credentials")),
                "{refused}: {found:?}"
            );
        }
    }

    #[test]
    fn pod_override_env_leaves_the_agents_variables_alone() {
        let env = |name: &str| {
            errors(with(json!({
                "podOverride": {"env": [{"name": name, "value": "x"}]},
            })))
        };
        assert_eq!(env("HTTPS_PROXY"), Vec::<String>::new());
        for reserved in ["PERFSWEEP_PLAN", "HOME", "TMPDIR"] {
            let found = env(reserved);
            assert!(
                found.iter().any(|e| e.contains("the agent sets them")),
                "{reserved}: {found:?}"
            );
        }
    }

    #[test]
    fn a_saturation_search_runs_with_one_worker() {
        let split = errors(with(
            json!({"saturation": {}, "slo": {"ttftMillis": 200}, "workers": 2}),
        ));
        assert!(split.iter().any(|e| e.contains("one worker")), "{split:?}");
        assert_eq!(
            errors(with(json!({"workers": 4, "numConcurrency": [8]}))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_saturation_search_needs_an_objective_and_sane_bounds() {
        let no_slo = errors(with(json!({"saturation": {}})));
        assert!(
            no_slo.iter().any(|e| e.contains("needs an objective")),
            "{no_slo:?}"
        );
        let attainment_only = errors(with(
            json!({"saturation": {}, "slo": {"attainmentPercent": 95}}),
        ));
        assert!(
            !attainment_only.is_empty(),
            "attainment alone is no objective"
        );
        assert_eq!(
            errors(with(
                json!({"saturation": {"load": "requestRate", "start": 1, "max": 64}, "maxConcurrency": 16, "slo": {"ttftMillis": 200}})
            )),
            Vec::<String>::new()
        );
        let inverted = errors(with(
            json!({"saturation": {"start": 64, "max": 8}, "slo": {"ttftMillis": 200}}),
        ));
        assert!(
            inverted
                .iter()
                .any(|e| e.contains("start must be at most max")),
            "{inverted:?}"
        );
    }

    #[test]
    fn the_api_key_reference_needs_a_secret_name_and_key() {
        let mut spec = with(json!({}));
        spec["endpoint"]["apiKeySecretRef"] = json!({"name": "llm-key"});
        assert!(!errors(spec.clone()).is_empty());
        spec["endpoint"]["apiKeySecretRef"] = json!({"name": "llm-key", "key": "token"});
        assert_eq!(errors(spec), Vec::<String>::new());
    }

    /// Issue 24, finding 7: `requestHeaders` such as Azure's `api-key` landed in clear
    /// in the command line, logs, evidence and exported records. A header that carries
    /// a credential is refused there and taken from a Secret instead.
    #[test]
    fn credential_headers_are_refused_in_clear_and_taken_from_secrets() {
        for header in [
            "Authorization",
            "api-key",
            "X-API-Key",
            "Proxy-Authorization",
            "X-Auth-Token",
            "Cookie",
            "X-Client-Secret",
        ] {
            let found = errors(with(json!({"requestHeaders": {header: "s3cret"}})));
            assert!(
                found.iter().any(|e| e.contains("requestHeaderSecrets")),
                "{header}: {found:?}"
            );
        }
        assert_eq!(
            errors(with(
                json!({"requestHeaders": {"X-Team": "perf", "X-Request-Priority": "low"}})
            )),
            Vec::<String>::new()
        );
        assert_eq!(
            errors(with(
                json!({"requestHeaderSecrets": {"api-key": {"name": "azure", "key": "key"}}})
            )),
            Vec::<String>::new()
        );
        let bad_name = errors(with(
            json!({"requestHeaderSecrets": {"api key": {"name": "azure", "key": "key"}}}),
        ));
        assert!(
            bad_name.iter().any(|e| e.contains("HTTP token")),
            "{bad_name:?}"
        );
        let twice = errors(with(json!({
            "requestHeaders": {"X-Team": "perf"},
            "requestHeaderSecrets": {"X-Team": {"name": "team", "key": "name"}},
        })));
        assert!(twice.iter().any(|e| e.contains("once")), "{twice:?}");
        let no_key = errors(with(
            json!({"requestHeaderSecrets": {"api-key": {"name": "azure"}}}),
        ));
        assert!(!no_key.is_empty());
    }

    fn spec(json: serde_json::Value) -> LLMInferenceSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    fn paths(spec: &LLMInferenceSpec) -> Vec<String> {
        LLMInference::check(spec)
            .into_iter()
            .map(|e| e.path)
            .collect()
    }

    /// Finding 7 of issue 18: `requestRates: [1000000]` passed validation, and the load
    /// generator grew to 2.1 GB trying to offer it.
    #[test]
    fn offered_load_is_bounded_by_what_the_workers_can_carry() {
        let endpoint = serde_json::json!({"url": "http://vllm:8000", "modelName": "m"});
        let too_fast = spec(serde_json::json!({
            "endpoint": endpoint, "requestRates": [10, 1000000], "maxConcurrency": 60000,
        }));
        assert_eq!(
            paths(&too_fast),
            ["spec.requestRates[1]", "spec.maxConcurrency"]
        );
        let message = LLMInference::check(&too_fast)
            .into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(message.contains("at most 20000 per worker"), "{message}");
        assert!(message.contains("raise spec.workers to 50"), "{message}");
        // Fifty workers carry it.
        let shared = spec(serde_json::json!({
            "endpoint": endpoint, "requestRates": [1000000], "workers": 50,
        }));
        assert!(
            paths(&shared).is_empty(),
            "{:?}",
            LLMInference::check(&shared)
        );
        let search = spec(serde_json::json!({
            "endpoint": endpoint, "slo": {"ttftMillis": 100.0},
            "saturation": {"load": "requestRate", "max": 100000},
        }));
        assert_eq!(paths(&search), ["spec.saturation.max"]);
    }

    #[test]
    fn check_refuses_a_dataset_with_scenarios_and_paths_leaving_the_claim() {
        let endpoint = serde_json::json!({"url": "http://vllm:8000", "modelName": "m"});
        let ok = spec(serde_json::json!({
            "endpoint": endpoint,
            "task": "text-to-embeddings",
            "dataset": {"format": "prompts", "source": {"pvc": {"claimName": "d", "path": "p.txt"}}},
        }));
        assert!(paths(&ok).is_empty(), "{:?}", LLMInference::check(&ok));
        let both = spec(serde_json::json!({
            "endpoint": endpoint,
            "trafficScenarios": ["D(10,10)"],
            "dataset": {"format": "prompts", "source": {"file": "/p.txt"}},
        }));
        assert_eq!(paths(&both), ["spec.trafficScenarios"]);
        let escaping = spec(serde_json::json!({
            "endpoint": endpoint,
            "tokenizer": {"pvc": {"claimName": "t", "path": "../etc/tokenizer.json"}},
        }));
        assert_eq!(paths(&escaping), ["spec.tokenizer.pvc.path"]);
        let embeddings = spec(serde_json::json!({
            "endpoint": endpoint,
            "task": "text-to-embeddings",
            "trafficScenarios": ["D(10,10)"],
        }));
        assert_eq!(paths(&embeddings), ["spec.trafficScenarios[0]"]);
    }
}
