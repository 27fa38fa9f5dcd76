//! HPCC: the HPC Challenge suite (Debian's `hpcc`, on Open MPI) — HPL, the Top500
//! figure; DGEMM; STREAM; PTRANS, RandomAccess, FFT and the b_eff ping-pong and ring —
//! on one node or over several, the figures a node's or a rack's sign-off is made of.
//!
//! hpcc runs every test of the suite in one go (it has no switch to leave one out), so
//! one kind reports them all; acceptance criteria pick the figures that matter. The
//! problem is the spec's or, by default, sized from what the ranks find: N from the
//! nodes' memory, NB from HPL's tuning advice, the P×Q grid from the ranks
//! ([`rank::problem`]).

pub mod parse;
pub mod rank;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::api::status::BenchmarkStatus;
use crate::api::validation::FieldError;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;
use crate::kinds::mpi::Transport;

/// The HPC Challenge suite over MPI.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "HPCC",
    plural = "hpccs",
    shortname = "hpcc",
    category = "perfsweep",
    namespaced,
    status = "HPCCStatus",
    doc = "The HPC Challenge suite (HPL, DGEMM, STREAM, PTRANS, RandomAccess, FFT, b_eff) over MPI.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".spec.numNodes"}"#,
    printcolumn = r#"{"name":"N","type":"integer","description":"HPL problem size","jsonPath":".status.result.hpl.n"}"#,
    printcolumn = r#"{"name":"Result","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("has(self.p) == has(self.q)").message("give both p and q (the HPL process grid), or neither").field_path(".p"))]
#[x_kube(validation = Rule::new("!has(self.p) || !has(self.ranksPerNode) || self.p * self.q == self.numNodes * self.ranksPerNode").message("p × q must equal numNodes × ranksPerNode: HPL's grid has one rank per cell").field_path(".p"))]
#[x_kube(validation = Rule::new("!has(self.nb) || !has(self.n) || self.nb <= self.n").message("nb must not exceed n").field_path(".nb"))]
#[serde(rename_all = "camelCase")]
pub struct HPCCSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// Open MPI's TCP path or UCX over RDMA.
    #[serde(default)]
    pub transport: Transport,

    /// Nodes (worker pods) the ranks are spread over, evenly. 1 measures one node.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10000))]
    pub num_nodes: u32,

    /// MPI ranks on each node. Default: the whole CPUs of `resources` (limits, else
    /// requests), else one per core Open MPI finds on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub ranks_per_node: Option<u32>,

    /// HPL's problem size N (the matrix order). Default: the largest multiple of `nb`
    /// whose matrix fills `memoryFraction` of the nodes' memory (the container's memory
    /// limit, else the node's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000000))]
    pub n: Option<u64>,

    /// HPL's block size NB. Default 192 (80 for N below 4000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub nb: Option<u64>,

    /// HPL's process grid rows; with `q`. Default: the squarest grid of the ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub p: Option<u32>,

    /// HPL's process grid columns; with `p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub q: Option<u32>,

    /// The share of memory HPL's matrix takes when `n` is derived. HPL's tuning advice is
    /// about 0.8 for a Top500 run; the default 0.5 leaves room for the other tests and
    /// the operating system, and a smaller share runs faster (HPL's time grows as N³).
    #[serde(default = "default_memory_fraction")]
    #[schemars(range(min = 0.001, max = 0.9))]
    pub memory_fraction: f64,
}

fn one() -> u32 {
    1
}

fn default_memory_fraction() -> f64 {
    0.5
}

/// Status of an HPCC benchmark.
pub type HPCCStatus = BenchmarkStatus<parse::HPCCResult>;

/// The name `perfsweep parse` and the rank wrapper (`perfsweep mpi-tool`) know the kind
/// by.
pub const PARSE_NAME: &str = "hpcc";

impl crate::kinds::kind::BenchmarkKind for HPCC {
    type Spec = HPCCSpec;
    type Output = parse::HPCCResult;
    const PARSE_NAME: &'static str = PARSE_NAME;
    const IMAGE: &'static str = "mpi-benchmarks";
    const ROLES: &'static [&'static str] = &["launcher", "worker"];
    // The ranks run on the workers; the launcher only starts them.
    const PAIR_ROLES: &'static [&'static str] = &["worker", "worker"];

    fn common(spec: &HPCCSpec) -> &CommonSpec {
        &spec.common
    }

    fn check(spec: &HPCCSpec) -> Vec<FieldError> {
        // A grid of fixed size needs a rank count known before the run.
        if spec.p.is_some() && ranks_per_node(spec).is_none() {
            return vec![FieldError::new(
                "spec.p",
                "a process grid needs a known rank count: set ranksPerNode, or whole CPUs in resources",
            )];
        }
        if let (Some(p), Some(q), Some(ranks)) = (spec.p, spec.q, ranks_per_node(spec))
            && u64::from(p) * u64::from(q) != u64::from(spec.num_nodes) * u64::from(ranks)
        {
            return vec![FieldError::new(
                "spec.p",
                format!(
                    "p × q = {} but the run has {} ranks ({} nodes × {ranks} from resources)",
                    p * q,
                    spec.num_nodes * ranks,
                    spec.num_nodes
                ),
            )];
        }
        Vec::new()
    }

    fn plan(
        spec: &HPCCSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(plan(spec))
    }

    fn parse(raw: &str) -> Result<parse::HPCCResult, crate::execution::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::HPCCResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::HPCCResult) -> Vec<Metric> {
        let lb = &output.latency_bandwidth;
        let mut metrics = vec![
            METRICS[0].of(output.hpl.gflops),
            METRICS[1].of(output.system_stream_triad()),
            METRICS[2].of(output.system_dgemm_gflops()),
        ];
        metrics.extend(METRICS[3].maybe(output.hpl_fraction_of_dgemm()));
        metrics.push(METRICS[4].of(output.star_stream.triad));
        metrics.push(METRICS[5].of(output.single_stream.triad));
        metrics.push(METRICS[6].of(output.single_dgemm_gflops));
        metrics.extend(METRICS[7].maybe(output.ptrans_gbytes_per_second));
        metrics.extend(METRICS[8].maybe(output.mpi_random_access_gups));
        metrics.extend(METRICS[9].maybe(output.mpi_fft_gflops));
        metrics.extend(METRICS[10].maybe(lb.max_ping_pong_latency_micros));
        metrics.extend(METRICS[11].maybe(lb.min_ping_pong_bandwidth_gbytes_per_second));
        metrics
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::higher(
        "hpl_gflops",
        "GFLOP/s",
        "HPL (High-Performance Linpack): the rate of solving the dense linear system",
    )
    .up_to(1e12),
    MetricDef::higher(
        "stream_triad_gbytes_per_second",
        "GB/s",
        "STREAM Triad of every rank at once, summed (HPCC's EP-STREAM system figure): the memory bandwidth of the nodes",
    )
    .up_to(1e9),
    MetricDef::higher(
        "dgemm_gflops",
        "GFLOP/s",
        "DGEMM of every rank at once, summed (HPCC's EP-DGEMM system figure)",
    )
    .up_to(1e12),
    MetricDef::higher(
        "hpl_fraction_of_dgemm",
        "",
        "HPL as a share of the summed DGEMM rate: how much of the machine's matrix-multiply speed the solver keeps",
    )
    .up_to(10.0),
    MetricDef::higher(
        "star_stream_triad_gbytes_per_second",
        "GB/s",
        "STREAM Triad of one rank while every rank runs it",
    )
    .up_to(1e7),
    MetricDef::higher(
        "single_stream_triad_gbytes_per_second",
        "GB/s",
        "STREAM Triad of one rank alone",
    )
    .up_to(1e7),
    MetricDef::higher(
        "single_dgemm_gflops",
        "GFLOP/s",
        "DGEMM of one rank alone",
    )
    .up_to(1e9),
    MetricDef::higher(
        "ptrans_gbytes_per_second",
        "GB/s",
        "PTRANS: parallel matrix transpose",
    )
    .up_to(1e9),
    MetricDef::higher(
        "random_access_gups",
        "GUP/s",
        "MPI RandomAccess: giga-updates of random table entries per second",
    )
    .up_to(1e9),
    MetricDef::higher("fft_gflops", "GFLOP/s", "MPI FFT").up_to(1e12),
    MetricDef::lower(
        "max_ping_pong_latency_microseconds",
        "µs",
        "b_eff: the slowest rank pair's ping-pong latency",
    )
    .up_to(1e9),
    MetricDef::higher(
        "min_ping_pong_bandwidth_gbytes_per_second",
        "GB/s",
        "b_eff: the slowest rank pair's ping-pong bandwidth",
    )
    .up_to(1e7),
];

/// Ranks per node known before the run: the spec's, else the whole CPUs of the
/// container's resources (limits, else requests).
pub fn ranks_per_node(spec: &HPCCSpec) -> Option<u32> {
    spec.ranks_per_node.or_else(|| {
        let resources = spec.common.resources.as_ref()?;
        let cpu = resources
            .limits
            .as_ref()
            .and_then(|l| l.get("cpu"))
            .or_else(|| resources.requests.as_ref().and_then(|r| r.get("cpu")))?;
        let millis = crate::formats::quantity::Milli::parse(&cpu.0).ok()?.0;
        u32::try_from(millis / 1000).ok().filter(|cpus| *cpus >= 1)
    })
}

/// The arguments of the rank wrapper (`perfsweep mpi-tool hpcc …`): the spec's problem,
/// the rest is found where the ranks run.
#[derive(Clone, Debug, PartialEq)]
pub struct RankArgs {
    pub n: Option<u64>,
    pub nb: Option<u64>,
    pub p: Option<u32>,
    pub q: Option<u32>,
    pub memory_fraction: f64,
}

impl RankArgs {
    fn of(spec: &HPCCSpec) -> Self {
        Self {
            n: spec.n,
            nb: spec.nb,
            p: spec.p,
            q: spec.q,
            memory_fraction: spec.memory_fraction,
        }
    }

    fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--memory-fraction".to_owned(),
            self.memory_fraction.to_string(),
        ];
        let numbers = [
            ("--n", self.n),
            ("--nb", self.nb),
            ("--p", self.p.map(u64::from)),
            ("--q", self.q.map(u64::from)),
        ];
        for (flag, value) in numbers {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.to_string()]);
            }
        }
        args
    }

    /// Reads [`Self::to_args`]'s output back.
    pub fn from_args(args: &[String]) -> Result<Self, String> {
        let mut parsed = Self {
            n: None,
            nb: None,
            p: None,
            q: None,
            memory_fraction: default_memory_fraction(),
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let whole = || {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|v| *v >= 1)
                    .ok_or_else(|| format!("{flag} {value:?}: a whole number of at least 1"))
            };
            match flag.as_str() {
                "--n" => parsed.n = Some(whole()?),
                "--nb" => parsed.nb = Some(whole()?),
                "--p" => parsed.p = Some(u32::try_from(whole()?).map_err(|e| e.to_string())?),
                "--q" => parsed.q = Some(u32::try_from(whole()?).map_err(|e| e.to_string())?),
                "--memory-fraction" => {
                    parsed.memory_fraction = value
                        .parse::<f64>()
                        .ok()
                        .filter(|f| *f > 0.0 && *f < 1.0)
                        .ok_or_else(|| {
                            format!("--memory-fraction {value:?}: a number between 0 and 1")
                        })?;
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(parsed)
    }
}

/// How to get hpcc when a worker lacks it.
pub const INSTALL_HINT: &str =
    "install Debian's hpcc (apt-get install hpcc), which perfsweep's mpi-benchmarks image has";

/// A launcher and `numNodes` workers, `ranksPerNode` ranks each (or one per core Open
/// MPI finds), each rank `perfsweep mpi-tool hpcc …` ([`rank::invocation`]).
pub fn plan(spec: &HPCCSpec) -> crate::execution::plan::Plan {
    let rank_command =
        crate::kinds::mpi::tool_rank_command(PARSE_NAME, RankArgs::of(spec).to_args());
    crate::kinds::mpi::MpiJob {
        kind: "HPCC",
        transport: spec.transport,
        workers: spec.num_nodes,
        slots: ranks_per_node(spec),
        rank_command,
        rank_programs: vec![rank::PROGRAM.to_owned()],
        rank_install_hint: INSTALL_HINT.into(),
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
    use crate::kinds::kind::BenchmarkKind;

    fn spec(json: serde_json::Value) -> HPCCSpec {
        serde_json::from_value(json).expect("valid")
    }

    #[test]
    fn ranks_come_from_the_spec_then_whole_cpus_then_open_mpi() {
        let fixed = plan(&spec(serde_json::json!({"numNodes": 2, "ranksPerNode": 4})));
        let launcher = fixed.role("launcher").expect("launcher");
        let peers = PeerAddresses::from([("worker".into(), vec!["a".into(), "b".into()])]);
        let argv = resolve_args(&launcher.command.args, &peers).expect("resolvable");
        assert!(argv.join(" ").contains("-np 8"), "{argv:?}");
        assert_eq!(
            launcher.files[0].contents,
            "{peer:worker:0} slots=4\n{peer:worker:1} slots=4\n"
        );
        assert_eq!(fixed.role("worker").expect("worker").replicas, 2);

        let limited = spec(serde_json::json!({"resources": {"limits": {"cpu": "2500m"}}}));
        assert_eq!(ranks_per_node(&limited), Some(2));
        let requested = spec(serde_json::json!({"resources": {"requests": {"cpu": "3"}}}));
        assert_eq!(ranks_per_node(&requested), Some(3));

        let open = plan(&spec(serde_json::json!({})));
        let launcher = open.role("launcher").expect("launcher");
        assert_eq!(launcher.files[0].contents, "{peer:worker:0}\n");
        let argv = resolve_args(&launcher.command.args, &peers).expect("resolvable");
        assert!(!argv.contains(&"-np".to_owned()), "{argv:?}");
    }

    #[test]
    fn the_ranks_run_the_wrapper_with_the_specs_problem() {
        let planned = plan(&spec(
            serde_json::json!({"n": 1000, "nb": 100, "memoryFraction": 0.25}),
        ));
        let launcher = planned.role("launcher").expect("launcher");
        let argv = resolve_args(&launcher.command.args, &PeerAddresses::new()).expect("literal");
        let at = argv.iter().position(|a| a == "mpi-tool").expect("wrapper");
        let wrapper = &argv[at + 2..];
        assert_eq!(argv[at + 1], "hpcc");
        let parsed = RankArgs::from_args(wrapper).expect("round trip");
        assert_eq!(
            parsed,
            RankArgs {
                n: Some(1000),
                nb: Some(100),
                p: None,
                q: None,
                memory_fraction: 0.25
            }
        );
    }

    #[test]
    fn a_grid_must_fit_the_ranks_known_before_the_run() {
        let bad = spec(serde_json::json!({"numNodes": 2, "ranksPerNode": 2, "p": 3, "q": 1}));
        let errors = HPCC::check(&bad);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("spec.p"), "{errors:?}");
        let unknown = spec(serde_json::json!({"p": 1, "q": 2}));
        assert!(
            HPCC::check(&unknown)[0]
                .to_string()
                .contains("ranksPerNode")
        );
        let good = spec(serde_json::json!({"numNodes": 2, "ranksPerNode": 2, "p": 2, "q": 2}));
        assert!(HPCC::check(&good).is_empty());
    }
}
