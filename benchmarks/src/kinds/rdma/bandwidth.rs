//! RDMABandwidth: perftest `ib_{read,write,send}_bw`.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::PerftestOptions;
use super::parse::RDMABandwidthResult;
use crate::api::status::BenchmarkStatus;
use crate::api::validation::FieldError;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

/// RDMA bandwidth between two pods with perftest.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "RDMABandwidth",
    plural = "rdmabandwidths",
    shortname = "rdmabw",
    category = "perfsweep",
    namespaced,
    status = "RDMABandwidthStatus",
    doc = "RDMA bandwidth between two pods (perftest ib_*_bw).",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"QPs","type":"integer","jsonPath":".spec.qps"}"#,
    printcolumn = r#"{"name":"Bandwidth","type":"string","description":"Peak average bandwidth","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RDMABandwidthSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    #[serde(flatten)]
    pub perftest: PerftestOptions,

    /// Queue pairs (perftest -q).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 65536))]
    pub qps: u32,
}

fn one() -> u32 {
    1
}

/// Status of an RDMABandwidth benchmark.
pub type RDMABandwidthStatus = BenchmarkStatus<RDMABandwidthResult>;

impl crate::kinds::kind::BenchmarkKind for RDMABandwidth {
    type Spec = RDMABandwidthSpec;
    type Output = RDMABandwidthResult;
    const PARSE_NAME: &'static str = "rdma-bandwidth";
    const IMAGE: &'static str = "perftest";

    fn parse(raw: &str) -> Result<RDMABandwidthResult, crate::execution::parse_error::ParseError> {
        super::parse::parse_bandwidth(raw)
    }

    fn headline(output: &RDMABandwidthResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &RDMABandwidthResult) -> Vec<Metric> {
        let peak = output
            .rows
            .iter()
            .map(|r| r.peak_gbits_per_second)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let mut metrics = vec![METRICS[0].of(output.max_average_gbits_per_second)];
        metrics.extend(METRICS[1].maybe(peak));
        metrics
    }
    const ROLES: &'static [&'static str] = &["server", "client"];

    fn common(spec: &RDMABandwidthSpec) -> &CommonSpec {
        &spec.common
    }

    fn plan(
        spec: &RDMABandwidthSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(super::plan::plan(
            "RDMABandwidth",
            &spec.perftest,
            super::plan::Measure::Bandwidth { qps: spec.qps },
        ))
    }

    fn check(spec: &RDMABandwidthSpec) -> Vec<FieldError> {
        super::check(&spec.perftest)
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::higher(
        "average_bandwidth_gigabits_per_second",
        "Gbit/s",
        "largest average bandwidth over all message sizes",
    )
    .up_to(1e4),
    MetricDef::higher(
        "peak_bandwidth_gigabits_per_second",
        "Gbit/s",
        "largest peak bandwidth over all message sizes",
    )
    .up_to(1e4),
];
