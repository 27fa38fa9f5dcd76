//! IPerf: TCP or UDP throughput between two pods with iperf3.

pub mod parse;
pub mod plan;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::api::status::BenchmarkStatus;
use crate::execution::parse_error::ParseError;
use crate::execution::plan::{Plan, PlanError};
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

/// Transport protocol for iperf3.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Protocol {
    #[default]
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
}

/// Network throughput between a server pod and a client pod, measured with iperf3.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "IPerf",
    plural = "iperfs",
    shortname = "ipf",
    category = "perfsweep",
    namespaced,
    status = "IPerfStatus",
    doc = "Network throughput between two pods with iperf3.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Streams","type":"integer","jsonPath":".spec.streams"}"#,
    printcolumn = r#"{"name":"Protocol","type":"string","jsonPath":".spec.protocol"}"#,
    printcolumn = r#"{"name":"Duration","type":"integer","jsonPath":".spec.duration"}"#,
    printcolumn = r#"{"name":"Received","type":"string","description":"Received bandwidth","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("!(self.reverse && self.bidirectional)").message("reverse and bidirectional are mutually exclusive").field_path(".bidirectional"))]
#[x_kube(validation = Rule::new("self.protocol != 'UDP' || has(self.bitrate)").message("UDP needs a target bitrate (iperf3's default of 1 Mbit/s measures the default, not the network)").field_path(".bitrate"))]
#[serde(rename_all = "camelCase")]
pub struct IPerfSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// Seconds the client sends for.
    #[serde(default = "default_duration")]
    #[schemars(range(min = 1, max = 86400))]
    pub duration: u32,

    /// Parallel client streams (iperf3 -P).
    #[serde(default = "default_streams")]
    #[schemars(range(min = 1, max = 128))]
    pub streams: u32,

    /// TCP or UDP.
    #[serde(default)]
    pub protocol: Protocol,

    /// Target bitrate in bits/s with an optional K, M, G or T suffix (iperf3 -b), e.g. `10G`.
    /// Required for UDP; caps TCP when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?[KMGT]?$"))]
    pub bitrate: Option<String>,

    /// The server sends and the client receives (iperf3 -R).
    #[serde(default)]
    pub reverse: bool,

    /// Both directions at once (iperf3 --bidir).
    #[serde(default)]
    pub bidirectional: bool,

    /// Socket buffer size (iperf3 -w), e.g. `4M`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+[KMG]?$"))]
    pub window: Option<String>,

    /// TCP maximum segment size in bytes (iperf3 -M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 88, max = 65535))]
    pub mss: Option<u32>,

    /// Seconds at the start left out of the result while TCP ramps up (iperf3 -O).
    #[serde(default)]
    #[schemars(range(max = 3600))]
    pub omit: u32,

    /// TCP port the iperf3 server listens on.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: u16,
}

fn default_duration() -> u32 {
    10
}
fn default_streams() -> u32 {
    1
}
fn default_port() -> u16 {
    5201
}

/// Status of an IPerf benchmark.
pub type IPerfStatus = BenchmarkStatus<parse::IPerfResult>;

impl crate::kinds::kind::BenchmarkKind for IPerf {
    type Spec = IPerfSpec;
    type Output = parse::IPerfResult;
    const ROLES: &'static [&'static str] = &["server", "client"];
    const PARSE_NAME: &'static str = "iperf";
    const IMAGE: &'static str = "iperf";

    fn plan(spec: &IPerfSpec) -> Result<Plan, PlanError> {
        Ok(plan::plan(spec))
    }

    fn parse(raw: &str) -> Result<parse::IPerfResult, ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::IPerfResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::IPerfResult) -> Vec<Metric> {
        metrics(output)
    }

    fn common(spec: &IPerfSpec) -> &CommonSpec {
        &spec.common
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::higher(
        "received_bits_per_second",
        "bit/s",
        "throughput of the main direction measured by the receiver",
    )
    .up_to(1e13),
    MetricDef::higher(
        "sent_bits_per_second",
        "bit/s",
        "throughput of the main direction measured by the sender",
    )
    .up_to(1e13),
    MetricDef::lower("retransmits", "count", "TCP retransmissions (TCP only)").up_to(1e12),
    MetricDef::lower("jitter_milliseconds", "ms", "UDP jitter (UDP only)").up_to(3.6e6),
    MetricDef::lower("lost_percent", "%", "UDP datagrams lost (UDP only)").within(0.0, 100.0),
    MetricDef::higher(
        "reverse_received_bits_per_second",
        "bit/s",
        "server-to-client throughput of a bidirectional test",
    )
    .up_to(1e13),
];

/// IPerf's headline metrics: receiver-side throughput first.
fn metrics(output: &parse::IPerfResult) -> Vec<Metric> {
    let t = &output.totals;
    let mut metrics = vec![
        METRICS[0].of(t.received_bits_per_second),
        METRICS[1].of(t.sent_bits_per_second),
    ];
    metrics.extend(METRICS[2].maybe(t.retransmits.map(|r| r as f64)));
    metrics.extend(METRICS[3].maybe(t.jitter_millis));
    metrics.extend(METRICS[4].maybe(t.lost_percent));
    metrics.extend(
        METRICS[5].maybe(
            output
                .bidir_reverse
                .as_ref()
                .map(|r| r.received_bits_per_second),
        ),
    );
    metrics
}
