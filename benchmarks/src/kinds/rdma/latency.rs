//! RDMALatency: perftest `ib_{read,write,send}_lat`.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::PerftestOptions;
use super::parse::RDMALatencyResult;
use crate::api::status::BenchmarkStatus;
use crate::api::validation::FieldError;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

/// RDMA latency between two pods with perftest.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "RDMALatency",
    plural = "rdmalatencies",
    shortname = "rdmalat",
    category = "perfsweep",
    namespaced,
    status = "RDMALatencyStatus",
    doc = "RDMA latency between two pods (perftest ib_*_lat).",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"Iterations","type":"integer","jsonPath":".spec.iterations"}"#,
    printcolumn = r#"{"name":"Latency","type":"string","description":"Typical latency","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RDMALatencySpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    #[serde(flatten)]
    pub perftest: PerftestOptions,
}

/// Status of an RDMALatency benchmark.
pub type RDMALatencyStatus = BenchmarkStatus<RDMALatencyResult>;

impl crate::kinds::kind::BenchmarkKind for RDMALatency {
    type Spec = RDMALatencySpec;
    type Output = RDMALatencyResult;
    const PARSE_NAME: &'static str = "rdma-latency";
    const IMAGE: &'static str = "perftest";

    fn parse(raw: &str) -> Result<RDMALatencyResult, crate::execution::parse_error::ParseError> {
        super::parse::parse_latency(raw)
    }

    fn headline(output: &RDMALatencyResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &RDMALatencyResult) -> Vec<Metric> {
        let row = output
            .rows
            .iter()
            .find(|r| r.bytes == output.min_typical_latency_message_bytes);
        let mut metrics = vec![METRICS[0].of(output.min_typical_latency_micros)];
        metrics.extend(METRICS[1].maybe(row.and_then(|r| r.p99_micros)));
        metrics
    }
    const ROLES: &'static [&'static str] = &["server", "client"];

    fn common(spec: &RDMALatencySpec) -> &CommonSpec {
        &spec.common
    }

    fn plan(
        spec: &RDMALatencySpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(super::plan::plan(
            "RDMALatency",
            &spec.perftest,
            super::plan::Measure::Latency,
        ))
    }

    fn check(spec: &RDMALatencySpec) -> Vec<FieldError> {
        super::check(&spec.perftest)
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::lower(
        "typical_latency_microseconds",
        "µs",
        "smallest typical (median) latency over all message sizes",
    )
    .up_to(1e7),
    MetricDef::lower(
        "p99_latency_microseconds",
        "µs",
        "99th percentile latency at the message size of the typical latency",
    )
    .up_to(1e7),
];
