//! MPIPingPong: point-to-point latency and bandwidth between two nodes with Intel MPI
//! Benchmarks' `IMB-MPI1 PingPong`.

pub mod parse;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::CommonSpec;
use crate::kinds::mpi::Transport;
use crate::status::BenchmarkStatus;

/// MPI ping-pong latency and bandwidth between two ranks on different nodes.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "MPIPingPong",
    plural = "mpipingpongs",
    shortname = "pingpong",
    category = "perfsweep",
    namespaced,
    status = "MPIPingPongStatus",
    doc = "MPI ping-pong latency and bandwidth between two nodes (IMB-MPI1 PingPong).",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Transport","type":"string","jsonPath":".spec.transport"}"#,
    printcolumn = r#"{"name":"Maxlog","type":"integer","jsonPath":".spec.maxlog"}"#,
    printcolumn = r#"{"name":"Result","type":"string","description":"Minimum latency / peak bandwidth","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MPIPingPongSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// Open MPI's TCP path or UCX over RDMA.
    #[serde(default)]
    pub transport: Transport,

    /// Largest message is 2^maxlog bytes; sizes are 0, 1, 2, 4, ..., 2^maxlog.
    #[serde(default = "default_maxlog")]
    #[schemars(range(min = 1, max = 30))]
    pub maxlog: u32,

    /// Port of the workers' SSH daemons (kube-perftest's launch mechanism; kept for
    /// compatibility).
    #[serde(default = "crate::kinds::mpi::default_ssh_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub ssh_port: u16,
}

fn default_maxlog() -> u32 {
    22
}

/// Status of an MPIPingPong benchmark.
pub type MPIPingPongStatus = BenchmarkStatus<parse::MPIPingPongResult>;

impl crate::registry::BenchmarkKind for MPIPingPong {
    type Spec = MPIPingPongSpec;
    type Output = parse::MPIPingPongResult;
    const PARSE_NAME: &'static str = "mpi-pingpong";
    const IMAGE: &'static str = "mpi-benchmarks";

    fn parse(raw: &str) -> Result<parse::MPIPingPongResult, crate::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::MPIPingPongResult) -> String {
        output.headline()
    }
    const ROLES: &'static [&'static str] = &["launcher", "worker"];

    fn common(spec: &MPIPingPongSpec) -> &CommonSpec {
        &spec.common
    }
}
