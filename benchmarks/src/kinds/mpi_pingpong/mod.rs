//! MPIPingPong: point-to-point latency and bandwidth between two nodes, with Intel MPI
//! Benchmarks' `IMB-MPI1 PingPong` or NetPIPE's `NPopenmpi` (Debian's
//! `netpipe-openmpi`), whichever the spec names or, by default, the image has.

pub mod imb;
pub mod netpipe;
pub mod parse;
pub mod rank;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::api::status::BenchmarkStatus;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;
use crate::kinds::mpi::Transport;

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
    doc = "MPI ping-pong latency and bandwidth between two nodes (IMB-MPI1 PingPong or NetPIPE).",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Transport","type":"string","jsonPath":".spec.transport"}"#,
    printcolumn = r#"{"name":"Tool","type":"string","jsonPath":".status.result.tool"}"#,
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

    /// The tool that measures: `IMB` (Intel MPI Benchmarks' `IMB-MPI1 PingPong`),
    /// `NetPIPE` (`NPopenmpi`), or `Auto` (the default): IMB when the image has it, else
    /// NetPIPE. The result names the tool that measured.
    #[serde(default)]
    pub tool: ToolChoice,

    /// Largest message is 2^maxlog bytes; sizes are 0, 1, 2, 4, ..., 2^maxlog (NetPIPE:
    /// from 1 byte, with a size between each power of two and the next).
    #[serde(default = "default_maxlog")]
    #[schemars(range(min = 1, max = 30))]
    pub maxlog: u32,

    /// Port of the workers' SSH daemons in kube-perftest. Accepted for compatibility and
    /// ignored: perfsweep launches ranks through its agent, without SSH.
    #[serde(default = "crate::kinds::mpi::default_ssh_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub ssh_port: u16,
}

fn default_maxlog() -> u32 {
    22
}

/// Which ping-pong tool an MPIPingPong runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ToolChoice {
    /// IMB-MPI1 when the workers have it, else NPopenmpi.
    #[default]
    Auto,
    /// Intel MPI Benchmarks' `IMB-MPI1 PingPong`.
    #[serde(rename = "IMB")]
    Imb,
    /// NetPIPE's `NPopenmpi`.
    #[serde(rename = "NetPIPE")]
    NetPipe,
}

impl ToolChoice {
    /// The name the rank wrapper takes it by (`--tool`).
    pub fn as_arg(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Imb => "IMB",
            Self::NetPipe => "NetPIPE",
        }
    }

    /// The tools it may run, in order of preference.
    pub fn candidates(self) -> &'static [parse::Tool] {
        match self {
            Self::Auto => &[parse::Tool::Imb, parse::Tool::NetPipe],
            Self::Imb => &[parse::Tool::Imb],
            Self::NetPipe => &[parse::Tool::NetPipe],
        }
    }
}

/// The name `perfsweep parse` and the rank wrapper (`perfsweep mpi-tool`) know the
/// kind by.
pub const PARSE_NAME: &str = "mpi-pingpong";

/// Status of an MPIPingPong benchmark.
pub type MPIPingPongStatus = BenchmarkStatus<parse::MPIPingPongResult>;

impl crate::kinds::kind::BenchmarkKind for MPIPingPong {
    type Spec = MPIPingPongSpec;
    type Output = parse::MPIPingPongResult;
    const PARSE_NAME: &'static str = PARSE_NAME;
    const IMAGE: &'static str = "mpi-benchmarks";

    fn plan(
        spec: &MPIPingPongSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(plan(spec))
    }

    fn parse(
        raw: &str,
    ) -> Result<parse::MPIPingPongResult, crate::execution::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::MPIPingPongResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::MPIPingPongResult) -> Vec<Metric> {
        vec![
            METRICS[0].of(output.min_latency_micros),
            METRICS[1].of(output.peak_bandwidth_megabytes_per_second),
        ]
    }
    const ROLES: &'static [&'static str] = &["launcher", "worker"];
    // The ranks run on the workers; the launcher only starts them.
    const PAIR_ROLES: &'static [&'static str] = &["worker", "worker"];

    fn common(spec: &MPIPingPongSpec) -> &CommonSpec {
        &spec.common
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::lower(
        "min_latency_microseconds",
        "µs",
        "smallest one-way latency over all message sizes",
    )
    .up_to(1e9),
    MetricDef::higher(
        "peak_bandwidth_megabytes_per_second",
        "MB/s",
        "largest bandwidth over all message sizes (IMB megabytes, 10^6 bytes)",
    )
    .up_to(1e7),
];

/// How to get a ping-pong tool when a worker has none.
pub const NETPIPE_INSTALL_HINT: &str = "install NetPIPE's MPI module, Debian's netpipe-openmpi (apt-get install netpipe-openmpi), which perfsweep's mpi-benchmarks image has";

/// How to get `IMB-MPI1`, which Debian does not package.
pub const IMB_INSTALL_HINT: &str = "IMB-MPI1 (Intel MPI Benchmarks) is not packaged by Debian; build it from the source release: apt-get install libopenmpi-dev g++ make curl && curl -fsSLO https://github.com/intel/mpi-benchmarks/archive/refs/tags/IMB-v2021.3.tar.gz && tar -xzf IMB-v2021.3.tar.gz && make -C mpi-benchmarks-IMB-v2021.3 CC=mpicc CXX=mpicxx IMB-MPI1 && install -m 0755 mpi-benchmarks-IMB-v2021.3/IMB-MPI1 /usr/local/bin/ (the perfsweep mpi-benchmarks image builds it when IMB's source can be downloaded while the image is built; images/build says when it could not, and such an image lacks IMB-MPI1)";

/// Two workers with one rank each, on different nodes (the workers' anti-affinity), and
/// a launcher that takes no part in the traffic. Each rank runs `perfsweep mpi-tool
/// mpi-pingpong`, which picks the tool on its worker ([`rank::invocation`]): IMB as
/// `IMB-MPI1 PingPong -msglog 0:<maxlog>`, NetPIPE as `NPopenmpi -u 2^maxlog`.
pub fn plan(spec: &MPIPingPongSpec) -> crate::execution::plan::Plan {
    let rank_command = crate::kinds::mpi::tool_rank_command(
        PARSE_NAME,
        [
            "--tool".to_owned(),
            spec.tool.as_arg().to_owned(),
            "--maxlog".to_owned(),
            spec.maxlog.to_string(),
        ],
    );
    let candidates = spec.tool.candidates();
    let hint = match spec.tool {
        ToolChoice::Imb => IMB_INSTALL_HINT.to_owned(),
        ToolChoice::NetPipe => NETPIPE_INSTALL_HINT.to_owned(),
        ToolChoice::Auto => format!("{NETPIPE_INSTALL_HINT}; or {IMB_INSTALL_HINT}"),
    };
    crate::kinds::mpi::MpiJob {
        kind: "MPIPingPong",
        transport: spec.transport,
        workers: 2,
        slots: Some(1),
        rank_command,
        rank_programs: candidates.iter().map(|t| t.program().to_owned()).collect(),
        rank_install_hint: hint,
        worker_setup: Vec::new(),
        worker_files: Vec::new(),
        worker_env: BTreeMap::default(),
        time_ranks: false,
    }
    .plan()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, resolve_args};

    #[test]
    fn two_ranks_on_two_workers_and_a_launcher() {
        let spec: MPIPingPongSpec =
            serde_json::from_value(serde_json::json!({"maxlog": 20})).expect("valid");
        let plan = plan(&spec);
        assert!(plan.remote_launch());
        assert_eq!(plan.result_role, "launcher");
        assert_eq!(plan.role("worker").expect("worker").replicas, 2);
        let launcher = plan.role("launcher").expect("launcher");
        let peers = PeerAddresses::from([("worker".into(), vec!["a".into(), "b".into()])]);
        let argv = resolve_args(&launcher.command.args, &peers).expect("resolvable");
        assert_eq!(launcher.command.program, "mpirun");
        assert_eq!(
            argv[argv.len() - 7..],
            [
                "perfsweep",
                "mpi-tool",
                "mpi-pingpong",
                "--tool",
                "auto",
                "--maxlog",
                "20"
            ]
        );
        let text = argv.join(" ");
        assert!(text.contains("-np 2"), "{text}");
        assert!(text.contains("--mca pml ob1 --mca btl tcp,self"), "{text}");
        let worker = plan.role("worker").expect("worker");
        assert_eq!(
            worker
                .env
                .get("OMPI_MCA_btl_tcp_if_include")
                .map(String::as_str),
            Some("{interface}")
        );
    }

    #[test]
    fn workers_need_one_of_the_tools_the_spec_allows() {
        let required = |tool: &str| {
            let spec: MPIPingPongSpec =
                serde_json::from_value(serde_json::json!({"tool": tool})).expect("valid");
            let plan = plan(&spec);
            let check = &plan.role("worker").expect("worker").setup[0];
            resolve_args(&check.args, &PeerAddresses::new()).expect("literal")[1].clone()
        };
        assert_eq!(required("Auto"), "IMB-MPI1|NPopenmpi");
        assert_eq!(required("IMB"), "IMB-MPI1");
        assert_eq!(required("NetPIPE"), "NPopenmpi");
    }
}
