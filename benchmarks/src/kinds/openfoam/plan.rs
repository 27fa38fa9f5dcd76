//! The OpenFOAM plan: the 3-D lid-driven cavity of the OpenFOAM HPC Technical
//! Committee's benchmark suite (`Lid_driven_cavity-3d` in
//! <https://develop.openfoam.com/committees/hpc>, also the exaFOAM microbenchmark of
//! the same name), run with `icoFoam` over MPI.
//!
//! The case is generated here as plan files, following that suite:
//! - a unit cube of `n × n × n` hexahedra (`blockMeshDict`), `n` = 100, 200, 400 and
//!   600 for the sizes S (1M cells), M (8M), XL (64M) and XXL (216M); the lid
//!   (`movingWall`, the `y = 1` face) moves at `(1 0 0)` m/s, the other five faces are
//!   no-slip walls; `nu = 0.01` m²/s;
//! - time steps as in the suite's `controlDict`s: S `deltaT 0.0005`, `endTime 0.5`; M
//!   `0.00025`/`0.5`; XL and XXL `0.0000625`/`0.00625`; no output is written during the
//!   run (`writeInterval` beyond the last step), so the solver is timed, not the disk;
//! - the pressure solver of the chosen `iterativeMethod` (`fvSolution.<method>` in the
//!   suite): fixedITER runs PCG/DIC for exactly 250 iterations (tolerance 1e-16, never
//!   reached) and the velocity PBiCGStab/DILU for 5, so every run does the same work;
//!   fixedNORM solves the pressure to an absolute residual of 1e-4 (at most 3000
//!   iterations); FOAM-GAMG-PCG uses a GAMG preconditioner, the PETSc variants go
//!   through petsc4Foam (`libpetscFoam`, an image built with it is required);
//! - `decomposeParDict` with `numberOfSubdomains` = numProcs, split hierarchically into
//!   a grid of near-cubes (the suite uses scotch; Debian's OpenFOAM loads a dummy
//!   scotch, and on a uniform cube the regular grid is the better partition anyway).
//!
//! Every worker writes the case, generates the mesh (`blockMesh`) and decomposes it
//! (`decomposePar`) itself — pods share no filesystem — before it is ready; then the
//! launcher runs `mpirun -np numProcs icoFoam -parallel` with numProcs/numNodes ranks
//! per worker. Each rank runs in its worker's working directory (`perfsweep mpi-rank`)
//! and reports its own CPU time, and `perfsweep mpi-time` around `mpirun` prints them
//! summed over all ranks in `/usr/bin/time -v` form, with mpirun's wall-clock time.

use super::{IterativeMethod, OpenFOAMSpec, ProblemSize};
use crate::execution::plan::{Arg, Command, Plan, PlanFile};
use crate::kinds::mpi::MpiJob;

/// The mesh and time stepping of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mesh {
    /// Cells along each edge of the cube.
    pub cells_per_edge: u32,
    pub delta_t: f64,
    pub end_time: f64,
}

impl Mesh {
    /// The suite's mesh and time stepping for a problem size.
    pub fn of(size: ProblemSize) -> Self {
        let (cells_per_edge, delta_t, end_time) = match size {
            ProblemSize::S => (100, 0.0005, 0.5),
            ProblemSize::M => (200, 0.00025, 0.5),
            ProblemSize::XL => (400, 0.0000625, 0.00625),
            ProblemSize::XXL => (600, 0.0000625, 0.00625),
        };
        Self {
            cells_per_edge,
            delta_t,
            end_time,
        }
    }

    /// Time steps the solver takes.
    pub fn steps(&self) -> u64 {
        (self.end_time / self.delta_t).round() as u64
    }
}

pub fn plan(spec: &OpenFOAMSpec) -> Plan {
    let mut mesh = Mesh::of(spec.problem_size);
    if let Some(steps) = spec.time_steps {
        mesh.end_time = mesh.delta_t * f64::from(steps);
    }
    plan_with_mesh(spec, mesh)
}

/// The plan with another mesh than the problem size's: only for smoke tests that must
/// finish in seconds (the sizes of the suite are what a benchmark runs).
pub fn plan_with_mesh(spec: &OpenFOAMSpec, mesh: Mesh) -> Plan {
    let workers = spec.num_nodes.max(1);
    // One rank (the default numProcs) runs the solver serially: `icoFoam -parallel` on one
    // process stops with "FOAM FATAL ERROR: attempt to run parallel on 1 processor"
    // (found on a real cluster, issue 23), and there is nothing to decompose.
    let (rank_command, worker_setup) = if spec.num_procs <= 1 {
        (vec!["icoFoam".into()], vec![foam("blockMesh", &[])])
    } else {
        (
            vec!["icoFoam".into(), "-parallel".into()],
            vec![foam("blockMesh", &[]), foam("decomposePar", &["-force"])],
        )
    };
    MpiJob {
        kind: "OpenFOAM",
        transport: spec.transport,
        workers,
        slots: Some((spec.num_procs / workers).max(1)),
        rank_command,
        rank_programs: Vec::new(),
        rank_install_hint: "install the Debian package openfoam (apt-get install openfoam)".into(),
        worker_setup,
        worker_files: case_files(spec, mesh),
        worker_env: environment(spec),
        time_ranks: true,
    }
    .plan()
}

/// Where Debian's `openfoam` package (the default image, and the local backend) keeps
/// OpenFOAM's `etc` directory.
pub const DEBIAN_PROJECT_DIR: &str = "/usr/share/openfoam";

/// The environment OpenFOAM needs. The agent sources no shell scripts, so what
/// `etc/bashrc` would set comes from here: for Debian's package only `WM_PROJECT_DIR`
/// (its binaries are in `/usr/bin`, its libraries in `/usr/lib`). An image named in
/// `spec.image` must set its own OpenFOAM environment (`ENV` in its Dockerfile).
fn environment(spec: &OpenFOAMSpec) -> std::collections::BTreeMap<String, String> {
    let mut env = std::collections::BTreeMap::new();
    if spec.common.image.is_none() {
        env.insert("WM_PROJECT_DIR".to_owned(), DEBIAN_PROJECT_DIR.to_owned());
    }
    env
}

fn foam(program: &str, args: &[&str]) -> Command {
    Command {
        program: program.into(),
        package: "openfoam".into(),
        args: args.iter().map(|a| Arg::lit(*a)).collect(),
    }
}

fn header(class: &str, location: &str, object: &str) -> String {
    format!(
        "FoamFile\n{{\n    version     2.0;\n    format      ascii;\n    class       {class};\n    location    \"{location}\";\n    object      {object};\n}}\n\n"
    )
}

fn file(path: &str, class: &str, body: &str) -> PlanFile {
    let (location, object) = path.rsplit_once('/').unwrap_or(("", path));
    PlanFile {
        path: path.into(),
        contents: format!("{}{body}", header(class, location, object)),
    }
}

/// The case directory, as plan files relative to the working directory.
pub fn case_files(spec: &OpenFOAMSpec, mesh: Mesh) -> Vec<PlanFile> {
    let n = mesh.cells_per_edge;
    let petsc = matches!(
        spec.iterative_method,
        IterativeMethod::PetscAmgCgFixedNorm
            | IterativeMethod::PetscAmgCgFixedNormCaching
            | IterativeMethod::PetscIccCgFixedNorm
    );
    let libs = if petsc {
        "libs            (petscFoam);\n\n"
    } else {
        ""
    };
    // Beyond the last step: nothing is written while the solver is timed.
    let write_interval = mesh.steps() + 1;
    vec![
        file(
            "system/blockMeshDict",
            "dictionary",
            &format!(
                "convertToMeters 1;\n\nvertices\n(\n    (0 0 0) (1 0 0) (1 1 0) (0 1 0)\n    (0 0 1) (1 0 1) (1 1 1) (0 1 1)\n);\n\nblocks\n(\n    hex (0 1 2 3 4 5 6 7) ({n} {n} {n}) simpleGrading (1 1 1)\n);\n\nedges ();\n\nboundary\n(\n    movingWall\n    {{\n        type wall;\n        faces ((3 7 6 2));\n    }}\n    fixedWalls\n    {{\n        type wall;\n        faces ((0 4 7 3) (2 6 5 1) (1 5 4 0) (0 3 2 1) (4 5 6 7));\n    }}\n);\n\nmergePatchPairs ();\n"
            ),
        ),
        file(
            "system/controlDict",
            "dictionary",
            &format!(
                "{libs}application     icoFoam;\nstartFrom       startTime;\nstartTime       0;\nstopAt          endTime;\nendTime         {};\ndeltaT          {};\nwriteControl    timeStep;\nwriteInterval   {write_interval};\npurgeWrite      0;\nwriteFormat     binary;\nwritePrecision  6;\nwriteCompression off;\ntimeFormat      general;\ntimePrecision   6;\nrunTimeModifiable false;\n",
                mesh.end_time, mesh.delta_t
            ),
        ),
        file(
            "system/fvSchemes",
            "dictionary",
            "ddtSchemes { default Euler; }\ngradSchemes { default Gauss linear; grad(p) Gauss linear; }\ndivSchemes { default none; div(phi,U) Gauss linear; }\nlaplacianSchemes { default Gauss linear orthogonal; }\ninterpolationSchemes { default linear; }\nsnGradSchemes { default orthogonal; }\n",
        ),
        file(
            "system/fvSolution",
            "dictionary",
            &format!(
                "solvers\n{{\n    p\n    {{\n{}    }}\n\n    pFinal\n    {{\n        $p;\n        relTol          0;\n    }}\n\n    U\n    {{\n        solver          PBiCGStab;\n        preconditioner  DILU;\n        tolerance       {};\n        relTol          0;\n        maxIter         5;\n    }}\n}}\n\nPISO\n{{\n    nCorrectors     2;\n    nNonOrthogonalCorrectors 0;\n    pRefCell        0;\n    pRefValue       0;\n}}\n",
                pressure_solver(spec.iterative_method),
                if spec.iterative_method == IterativeMethod::FixedIter {
                    "1e-08"
                } else {
                    "0"
                }
            ),
        ),
        file("system/decomposeParDict", "dictionary", &{
            let (x, y, z) = split(spec.num_procs);
            format!(
                "numberOfSubdomains {};\n\nmethod          hierarchical;\n\nhierarchicalCoeffs\n{{\n    n               ({x} {y} {z});\n    delta           0.001;\n    order           xyz;\n}}\n",
                spec.num_procs
            )
        }),
        file(
            "constant/transportProperties",
            "dictionary",
            "transportModel  Newtonian;\n\nnu              [0 2 -1 0 0 0 0] 0.01;\n",
        ),
        file(
            "0/U",
            "volVectorField",
            "dimensions      [0 1 -1 0 0 0 0];\n\ninternalField   uniform (0 0 0);\n\nboundaryField\n{\n    movingWall\n    {\n        type            fixedValue;\n        value           uniform (1 0 0);\n    }\n    fixedWalls\n    {\n        type            noSlip;\n    }\n}\n",
        ),
        file(
            "0/p",
            "volScalarField",
            "dimensions      [0 2 -2 0 0 0 0];\n\ninternalField   uniform 0;\n\nboundaryField\n{\n    movingWall\n    {\n        type            zeroGradient;\n    }\n    fixedWalls\n    {\n        type            zeroGradient;\n    }\n}\n",
        ),
    ]
}

/// `procs` subdomains as an `x × y × z` grid of near-cubes (the least total cut area on
/// the cube; ties keep `z` smallest, which the HECToR study of this case found slightly
/// faster).
pub fn split(procs: u32) -> (u32, u32, u32) {
    let procs = procs.max(1);
    let mut best = (procs, 1, 1);
    for x in (1..=procs).filter(|x| procs.is_multiple_of(*x)) {
        let rest = procs / x;
        for y in (1..=rest).filter(|y| rest.is_multiple_of(*y)) {
            let z = rest / y;
            if x >= y && y >= z && x + y + z < best.0 + best.1 + best.2 {
                best = (x, y, z);
            }
        }
    }
    best
}

/// The `p` entry of `fvSolution` for a method, indented for the `solvers` block.
fn pressure_solver(method: IterativeMethod) -> String {
    let body = match method {
        IterativeMethod::FixedIter => {
            "solver PCG;\npreconditioner DIC;\ntolerance 1e-16;\nrelTol 0;\nmaxIter 250;\n"
        }
        IterativeMethod::FixedNorm | IterativeMethod::FoamDicPcgFixedNorm => {
            "solver PCG;\npreconditioner DIC;\ntolerance 1e-04;\nrelTol 0;\nmaxIter 3000;\n"
        }
        IterativeMethod::FoamGamgPcgFixedNorm => {
            "solver PCG;\npreconditioner\n{\n    preconditioner GAMG;\n    smoother GaussSeidel;\n    nPreSweeps 0;\n    nPostSweeps 2;\n    nFinestSweeps 2;\n    cacheAgglomeration on;\n    agglomerator faceAreaPair;\n    nCellsInCoarsestLevel 512;\n    mergeLevels 1;\n    tolerance 0;\n    relTol 0;\n    maxIter 1;\n}\ntolerance 1e-04;\nrelTol 0;\nmaxIter 3000;\n"
        }
        IterativeMethod::PetscAmgCgFixedNorm => {
            "solver petsc;\npetsc\n{\n    options\n    {\n        ksp_type cg;\n        ksp_cg_single_reduction true;\n        pc_type hypre;\n        pc_hypre_type boomeramg;\n    }\n    caching\n    {\n        matrix { update always; }\n        preconditioner { update always; }\n    }\n}\ntolerance 1e-04;\nrelTol 0;\nmaxIter 3000;\n"
        }
        IterativeMethod::PetscAmgCgFixedNormCaching => {
            "solver petsc;\npetsc\n{\n    options\n    {\n        ksp_type cg;\n        ksp_cg_single_reduction true;\n        pc_type hypre;\n        pc_hypre_type boomeramg;\n    }\n    caching\n    {\n        matrix { update always; }\n        preconditioner { update never; }\n    }\n}\ntolerance 1e-04;\nrelTol 0;\nmaxIter 3000;\n"
        }
        IterativeMethod::PetscIccCgFixedNorm => {
            "solver petsc;\npetsc\n{\n    options\n    {\n        ksp_type cg;\n        pc_type icc;\n    }\n    caching\n    {\n        matrix { update always; }\n        preconditioner { update always; }\n    }\n}\ntolerance 1e-04;\nrelTol 0;\nmaxIter 3000;\n"
        }
    };
    body.lines()
        .map(|line| format!("        {line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, fill, resolve_args};

    fn spec(json: serde_json::Value) -> OpenFOAMSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    #[test]
    fn ranks_are_spread_evenly_over_the_workers() {
        let plan = plan(&spec(serde_json::json!({"numProcs": 8, "numNodes": 2})));
        assert!(plan.remote_launch());
        let worker = plan.role("worker").expect("worker");
        assert_eq!(worker.replicas, 2);
        let programs: Vec<&str> = worker.setup.iter().map(|c| c.program.as_str()).collect();
        assert_eq!(programs, ["perfsweep", "blockMesh", "decomposePar"]);
        let launcher = plan.role("launcher").expect("launcher");
        assert!(!launcher.uses_devices);
        assert_eq!(launcher.waits_for, ["worker"]);
        let peers =
            PeerAddresses::from([("worker".into(), vec!["10.0.0.2".into(), "10.0.0.3".into()])]);
        assert_eq!(
            fill(&launcher.files[0].contents, &peers).expect("fills"),
            "10.0.0.2 slots=4\n10.0.0.3 slots=4\n"
        );
        let argv = resolve_args(&launcher.command.args, &peers)
            .expect("resolvable")
            .join(" ");
        assert!(
            argv.starts_with("mpi-time -- mpirun --hostfile hostfile -np 8"),
            "{argv}"
        );
        assert!(argv.contains("--mca plm_rsh_agent perfsweep rsh"), "{argv}");
        assert!(argv.contains("--mca btl tcp,vader,self"), "{argv}");
        // Issue 23: cross-memory attach fails under a pod's default seccomp profile.
        assert!(
            argv.contains("--mca btl_vader_single_copy_mechanism none"),
            "{argv}"
        );
        assert!(
            argv.ends_with("perfsweep mpi-rank -- icoFoam -parallel"),
            "{argv}"
        );
    }

    #[test]
    fn time_steps_shorten_the_run_on_the_suites_mesh() {
        let plan = plan(&spec(
            serde_json::json!({"problemSize": "S", "timeSteps": 40}),
        ));
        let worker = plan.role("worker").expect("worker");
        let control = &worker
            .files
            .iter()
            .find(|f| f.path == "system/controlDict")
            .expect("controlDict")
            .contents;
        let value = |key: &str| -> f64 {
            control
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches(';').parse().ok())
                .unwrap_or_else(|| panic!("{key} in {control}"))
        };
        assert_eq!(value("deltaT"), 0.0005);
        assert_eq!((value("endTime") / value("deltaT")).round(), 40.0);
        let mesh = &worker
            .files
            .iter()
            .find(|f| f.path == "system/blockMeshDict")
            .expect("blockMeshDict")
            .contents;
        assert!(mesh.contains("(100 100 100)"), "{mesh}");
    }

    /// Issue 23: the default (one rank) ran `icoFoam -parallel`, which OpenFOAM refuses on
    /// one process; it runs serially, undecomposed.
    #[test]
    fn one_rank_runs_the_solver_serially() {
        let plan = plan(&spec(serde_json::json!({})));
        let worker = plan.role("worker").expect("worker");
        let programs: Vec<&str> = worker.setup.iter().map(|c| c.program.as_str()).collect();
        assert_eq!(programs, ["perfsweep", "blockMesh"]);
        let launcher = plan.role("launcher").expect("launcher");
        let peers = PeerAddresses::from([("worker".into(), vec!["10.0.0.2".into()])]);
        let argv = resolve_args(&launcher.command.args, &peers)
            .expect("resolvable")
            .join(" ");
        assert!(argv.contains("-np 1"), "{argv}");
        assert!(argv.ends_with("perfsweep mpi-rank -- icoFoam"), "{argv}");
    }

    #[test]
    fn the_case_follows_the_suite() {
        let files = case_files(
            &spec(serde_json::json!({"numProcs": 4, "iterativeMethod": "fixedITER"})),
            Mesh::of(ProblemSize::XL),
        );
        let find = |path: &str| {
            files
                .iter()
                .find(|f| f.path == path)
                .map_or_else(|| panic!("{path} missing"), |f| f.contents.clone())
        };
        assert!(find("system/blockMeshDict").contains("(400 400 400)"));
        let decomposition = find("system/decomposeParDict");
        assert!(
            decomposition.contains("numberOfSubdomains 4;"),
            "{decomposition}"
        );
        assert!(
            decomposition.contains("n               (2 2 1);"),
            "{decomposition}"
        );
        let control = find("system/controlDict");
        assert!(
            control.contains("deltaT          0.0000625;")
                || control.contains("deltaT          6.25e-5;"),
            "{control}"
        );
        assert!(control.contains("writeInterval   101;"), "{control}");
        let solution = find("system/fvSolution");
        assert!(solution.contains("maxIter 250;"), "{solution}");
        assert_eq!(Mesh::of(ProblemSize::S).steps(), 1000);
        assert_eq!(Mesh::of(ProblemSize::XXL).steps(), 100);
        assert_eq!(split(1), (1, 1, 1));
        assert_eq!(split(8), (2, 2, 2));
        assert_eq!(split(12), (3, 2, 2));
        assert_eq!(split(7), (7, 1, 1));
    }

    #[test]
    fn rdma_uses_ucx_and_locks_memory_on_the_workers() {
        let plan = plan(&spec(
            serde_json::json!({"transport": "RDMA", "numProcs": 2, "numNodes": 2}),
        ));
        let worker = plan.role("worker").expect("worker");
        assert_eq!(worker.capabilities, ["IPC_LOCK"]);
        assert!(worker.env.contains_key("UCX_TLS"));
        let launcher = plan.role("launcher").expect("launcher");
        assert!(launcher.capabilities.is_empty());
        assert!(launcher.command.args.contains(&Arg::lit("ucx")));
    }
}
