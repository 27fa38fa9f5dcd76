//! RDMABandwidth: perftest `ib_{read,write,send}_bw`.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::PerftestOptions;
use super::parse::RDMABandwidthResult;
use crate::common::CommonSpec;
use crate::status::BenchmarkStatus;
use crate::validation::FieldError;

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

impl crate::registry::BenchmarkKind for RDMABandwidth {
    type Spec = RDMABandwidthSpec;
    type Output = RDMABandwidthResult;
    const PARSE_NAME: &'static str = "rdma-bandwidth";
    const IMAGE: &'static str = "perftest";

    fn parse(raw: &str) -> Result<RDMABandwidthResult, crate::parse_error::ParseError> {
        super::parse::parse_bandwidth(raw)
    }

    fn headline(output: &RDMABandwidthResult) -> String {
        output.headline()
    }
    const ROLES: &'static [&'static str] = &["server", "client"];

    fn common(spec: &RDMABandwidthSpec) -> &CommonSpec {
        &spec.common
    }

    fn check(spec: &RDMABandwidthSpec) -> Vec<FieldError> {
        super::check(&spec.perftest)
    }
}
