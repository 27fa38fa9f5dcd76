//! MPIPingPong: point-to-point latency and bandwidth between two nodes with Intel MPI
//! Benchmarks' `IMB-MPI1 PingPong`.

pub mod parse;

use kube::{CustomResource, KubeSchema};
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

    /// Port of the workers' SSH daemons in kube-perftest. Accepted for compatibility and
    /// ignored: perfsweep launches ranks through its agent, without SSH.
    #[serde(default = "crate::kinds::mpi::default_ssh_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub ssh_port: u16,
}

fn default_maxlog() -> u32 {
    22
}

/// Status of an MPIPingPong benchmark.
pub type MPIPingPongStatus = BenchmarkStatus<parse::MPIPingPongResult>;

impl crate::kinds::kind::BenchmarkKind for MPIPingPong {
    type Spec = MPIPingPongSpec;
    type Output = parse::MPIPingPongResult;
    const PARSE_NAME: &'static str = "mpi-pingpong";
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

/// How to get `IMB-MPI1`, which Debian does not package.
pub const IMB_INSTALL_HINT: &str = "IMB-MPI1 (Intel MPI Benchmarks) is not packaged by Debian; build it from the source release: apt-get install libopenmpi-dev g++ make curl && curl -fsSLO https://github.com/intel/mpi-benchmarks/archive/refs/tags/IMB-v2021.3.tar.gz && tar -xzf IMB-v2021.3.tar.gz && make -C mpi-benchmarks-IMB-v2021.3 CC=mpicc CXX=mpicxx IMB-MPI1 && install -m 0755 mpi-benchmarks-IMB-v2021.3/IMB-MPI1 /usr/local/bin/ (the perfsweep mpi-benchmarks image builds it when IMB's source can be downloaded while the image is built; images/build says when it could not, and such an image lacks IMB-MPI1)";

/// Two workers with one rank each, on different nodes (the workers' anti-affinity), and
/// a launcher that takes no part in the traffic: `IMB-MPI1 PingPong -msglog 0:<maxlog>`
/// measures message sizes 0 and 2^0 … 2^maxlog bytes (IMB's `-msglog [minlog:]maxlog`;
/// the zero-byte size is always included).
pub fn plan(spec: &MPIPingPongSpec) -> crate::execution::plan::Plan {
    let mut rank_command: Vec<String> = ["IMB-MPI1", "PingPong", "-msglog"]
        .map(str::to_owned)
        .to_vec();
    rank_command.push(format!("0:{}", spec.maxlog));
    // IMB allocates -mem GiB per rank (1 by default) for its buffers: a send and a
    // receive buffer of the largest message must fit.
    if spec.maxlog >= 29 {
        let gib = (1u64 << (spec.maxlog + 1)) as f64 / f64::from(1u32 << 30) + 0.5;
        rank_command.extend(["-mem".to_owned(), format!("{gib}")]);
    }
    crate::kinds::mpi::MpiJob {
        kind: "MPIPingPong",
        transport: spec.transport,
        workers: 2,
        slots: 1,
        rank_command,
        rank_install_hint: IMB_INSTALL_HINT.into(),
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
            argv[argv.len() - 4..],
            ["IMB-MPI1", "PingPong", "-msglog", "0:20"]
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
    fn the_largest_messages_get_enough_memory() {
        let spec: MPIPingPongSpec =
            serde_json::from_value(serde_json::json!({"maxlog": 30})).expect("valid");
        let plan = plan(&spec);
        let args = &plan.role("launcher").expect("launcher").command.args;
        assert!(
            args.contains(&crate::execution::plan::Arg::lit("-mem")),
            "{args:?}"
        );
        assert!(
            args.contains(&crate::execution::plan::Arg::lit("2.5")),
            "{args:?}"
        );
    }
}
