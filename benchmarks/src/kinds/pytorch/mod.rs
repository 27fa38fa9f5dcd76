//! PyTorch: training or inference throughput of a reference model.

pub mod parse;
pub mod plan;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::status::BenchmarkStatus;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    #[default]
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Alexnet,
    Resnet50,
    Llama,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BenchmarkType {
    Train,
    #[default]
    Eval,
}

/// Time per batch and throughput of a PyTorch model on CPU or GPU.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "PyTorch",
    plural = "pytorches",
    shortname = "pt",
    category = "perfsweep",
    namespaced,
    status = "PyTorchStatus",
    doc = "Training or inference throughput of a PyTorch model.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Model","type":"string","jsonPath":".spec.model"}"#,
    printcolumn = r#"{"name":"Device","type":"string","jsonPath":".spec.device"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.benchmarkType"}"#,
    printcolumn = r#"{"name":"Batch","type":"integer","jsonPath":".spec.inputBatchSize"}"#,
    printcolumn = r#"{"name":"Throughput","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("self.device != 'cuda' || (has(self.resources) && has(self.resources.limits) && self.resources.limits.exists(k, k.endsWith('/gpu')))").message("device cuda needs a GPU: request one in resources.limits, e.g. nvidia.com/gpu: 1").field_path(".device"))]
#[serde(rename_all = "camelCase")]
pub struct PyTorchSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// cpu or cuda. With cuda, the GPU count comes from resources.limits.
    #[serde(default)]
    pub device: Device,

    /// alexnet, resnet50 or llama.
    pub model: Model,

    /// train or eval (inference).
    #[serde(default)]
    pub benchmark_type: BenchmarkType,

    /// Batch size of the generated input data (an even number).
    #[serde(default = "default_batch_size")]
    #[schemars(range(min = 2, max = 65536), extend("multipleOf" = 2))]
    pub input_batch_size: u32,
}

fn default_batch_size() -> u32 {
    64
}

/// Status of a PyTorch benchmark.
pub type PyTorchStatus = BenchmarkStatus<parse::PyTorchResult>;

impl crate::kinds::kind::BenchmarkKind for PyTorch {
    type Spec = PyTorchSpec;
    type Output = parse::PyTorchResult;
    const PARSE_NAME: &'static str = "pytorch";
    const IMAGE: &'static str = "pytorch";

    fn parse(raw: &str) -> Result<parse::PyTorchResult, crate::execution::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::PyTorchResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::PyTorchResult) -> Vec<Metric> {
        vec![
            METRICS[0].of(output.throughput_samples_per_second),
            METRICS[1].of(output.time_per_batch_seconds.mean),
            METRICS[2].of(output.time_per_batch_seconds.p90),
        ]
    }
    const ROLES: &'static [&'static str] = &["worker"];

    fn common(spec: &PyTorchSpec) -> &CommonSpec {
        &spec.common
    }

    fn plan(
        spec: &PyTorchSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        plan::plan(spec)
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::higher(
        "throughput_samples_per_second",
        "samples/s",
        "samples processed per second",
    )
    .up_to(1e9),
    MetricDef::lower("batch_time_mean_seconds", "s", "mean time per batch").up_to(1e6),
    MetricDef::lower(
        "batch_time_p90_seconds",
        "s",
        "90th percentile time per batch",
    )
    .up_to(1e6),
];
