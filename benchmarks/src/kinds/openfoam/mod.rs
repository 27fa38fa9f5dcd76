//! OpenFOAM: the 3-D lid-driven cavity case of the OpenFOAM HPC benchmark suite.

pub mod parse;
pub mod plan;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::status::BenchmarkStatus;
use crate::api::validation::FieldError;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;
use crate::kinds::mpi::Transport;

/// Mesh size of the lid-driven cavity case (S: 1M cells, M: 8M, XL: 64M, XXL: 216M).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProblemSize {
    #[default]
    S,
    M,
    XL,
    XXL,
}

/// Linear solver configuration of the benchmark suite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum IterativeMethod {
    #[serde(rename = "fixedITER")]
    FixedIter,
    #[default]
    #[serde(rename = "fixedNORM")]
    FixedNorm,
    #[serde(rename = "FOAM-DIC-PCG.fixedNORM")]
    FoamDicPcgFixedNorm,
    #[serde(rename = "FOAM-GAMG-PCG.fixedNORM")]
    FoamGamgPcgFixedNorm,
    #[serde(rename = "PETSc-AMG-CG.fixedNORM")]
    PetscAmgCgFixedNorm,
    #[serde(rename = "PETSc-AMG-CG.fixedNORM.caching")]
    PetscAmgCgFixedNormCaching,
    #[serde(rename = "PETSc-ICC-CG.fixedNORM")]
    PetscIccCgFixedNorm,
}

/// A parallel OpenFOAM solver run over MPI.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "OpenFOAM",
    plural = "openfoams",
    shortname = "of",
    category = "perfsweep",
    namespaced,
    status = "OpenFOAMStatus",
    doc = "The OpenFOAM HPC benchmark (3-D lid-driven cavity) over MPI.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Size","type":"string","jsonPath":".spec.problemSize"}"#,
    printcolumn = r#"{"name":"Procs","type":"integer","jsonPath":".spec.numProcs"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".spec.numNodes"}"#,
    printcolumn = r#"{"name":"Transport","type":"string","jsonPath":".spec.transport"}"#,
    printcolumn = r#"{"name":"Wall time","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("self.numProcs >= self.numNodes").message("numProcs must be at least numNodes: every node runs at least one rank").field_path(".numProcs"))]
#[x_kube(validation = Rule::new("self.numProcs % self.numNodes == 0").message("numProcs must be a multiple of numNodes so that every node runs the same number of ranks").field_path(".numProcs"))]
#[serde(rename_all = "camelCase")]
pub struct OpenFOAMSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// Open MPI's TCP path or UCX over RDMA.
    #[serde(default)]
    pub transport: Transport,

    /// Mesh size: S, M, XL or XXL.
    #[serde(default)]
    pub problem_size: ProblemSize,

    /// Linear solver configuration.
    #[serde(default)]
    pub iterative_method: IterativeMethod,

    /// Total MPI ranks (the mesh is decomposed into this many parts).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100000))]
    pub num_procs: u32,

    /// Nodes (worker pods) the ranks are spread over, evenly.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10000))]
    pub num_nodes: u32,

    /// Port of the workers' SSH daemons in kube-perftest. Accepted for compatibility and
    /// ignored: perfsweep launches ranks through its agent, without SSH.
    #[serde(default = "crate::kinds::mpi::default_ssh_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub ssh_port: u16,

    /// Time steps to run, instead of the suite's for the problem size (S: 1000; M: 2000;
    /// XL, XXL: 100), on the same mesh and step length: a shorter run for screening and
    /// tests, whose mean step time stays comparable with a full run's (the result's
    /// `stepExecutionMeanSeconds`), though its totals are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub time_steps: Option<u32>,
}

fn one() -> u32 {
    1
}

/// Status of an OpenFOAM benchmark.
pub type OpenFOAMStatus = BenchmarkStatus<parse::OpenFOAMResult>;

impl crate::kinds::kind::BenchmarkKind for OpenFOAM {
    type Spec = OpenFOAMSpec;
    type Output = parse::OpenFOAMResult;
    const PARSE_NAME: &'static str = "openfoam";
    const IMAGE: &'static str = "openfoam";

    fn parse(
        raw: &str,
    ) -> Result<parse::OpenFOAMResult, crate::execution::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::OpenFOAMResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::OpenFOAMResult) -> Vec<Metric> {
        let mut metrics = vec![
            METRICS[0].of(output.execution_time_seconds),
            METRICS[1].of(output.clock_time_seconds),
        ];
        metrics.extend(METRICS[2].maybe(output.step_execution_mean_seconds));
        metrics
    }
    const ROLES: &'static [&'static str] = &["launcher", "worker"];
    // The ranks run on the workers; the launcher only starts them.
    const PAIR_ROLES: &'static [&'static str] = &["worker", "worker"];

    fn common(spec: &OpenFOAMSpec) -> &CommonSpec {
        &spec.common
    }

    fn plan(
        spec: &OpenFOAMSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(plan::plan(spec))
    }

    fn check(spec: &OpenFOAMSpec) -> Vec<FieldError> {
        // CEL cannot see the PETSc build of the image; only the default image lacks it.
        let petsc = matches!(
            spec.iterative_method,
            IterativeMethod::PetscAmgCgFixedNorm
                | IterativeMethod::PetscAmgCgFixedNormCaching
                | IterativeMethod::PetscIccCgFixedNorm
        );
        if petsc && spec.common.image.is_none() {
            return vec![FieldError::new(
                "spec.iterativeMethod",
                "PETSc methods need an image built with petsc4Foam; set spec.image",
            )];
        }
        Vec::new()
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::lower(
        "execution_time_seconds",
        "s",
        "CPU seconds the solver used (final ExecutionTime)",
    )
    .up_to(1e8),
    MetricDef::lower(
        "clock_time_seconds",
        "s",
        "wall-clock seconds of the solver (final ClockTime)",
    )
    .up_to(1e8),
    MetricDef::lower(
        "step_execution_mean_seconds",
        "s",
        "mean execution time per time step after the first",
    )
    .up_to(1e8),
];
