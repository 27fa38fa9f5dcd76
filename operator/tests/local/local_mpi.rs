//! The MPI and RDMA kinds on the local backend, for real where the tools are here:
//! Open MPI's mpirun starts ranks on two "nodes" (worker agents on 127.0.0.N) through
//! `perfsweep rsh` — the same launch path as in pods — and the ranks talk over TCP.

use std::path::PathBuf;
use std::time::Instant;

use perfsweep::local::{self, LocalOptions, LocalOutcome};
use perfsweep_benchmarks::kinds::openfoam::OpenFOAMSpec;
use perfsweep_benchmarks::kinds::openfoam::plan::{Mesh, plan_with_mesh};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::outcome::Failure;
use serde_json::{Value, json};

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn options(name: &str) -> LocalOptions {
    let scratch =
        std::env::temp_dir().join(format!("perfsweep-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    LocalOptions {
        agent_program: PathBuf::from(env!("CARGO_BIN_EXE_perfsweep")),
        scratch,
        role_addresses: std::collections::BTreeMap::default(),
    }
}

fn openfoam_spec(value: Value) -> (Value, OpenFOAMSpec) {
    let spec = serde_json::from_value(value.clone()).expect("valid OpenFOAM spec");
    (value, spec)
}

fn succeeded(outcome: &LocalOutcome) -> &Value {
    match outcome {
        LocalOutcome::Succeeded { result, .. } => result,
        LocalOutcome::Failed(Failure { reason, message }) => panic!("failed: {reason}: {message}"),
    }
}

/// A smoke run, not the benchmark: the cavity at 20³ cells for 10 steps, so that it
/// takes seconds on two cores (the S case takes about 50 minutes there; see the opt-in
/// test).
#[tokio::test(flavor = "multi_thread")]
async fn openfoam_runs_ranks_on_two_workers_through_the_agents() {
    if !on_path("mpirun") || !on_path("icoFoam") {
        assert!(
            std::env::var_os("CI").is_none(),
            "Open MPI or OpenFOAM is missing under CI: .ci/run installs openmpi-bin and openfoam"
        );
        eprintln!("SKIPPED: needs Open MPI and OpenFOAM (apt-get install openmpi-bin openfoam)");
        return;
    }
    let (_, spec) = openfoam_spec(json!({"numProcs": 2, "numNodes": 2, "timeout": "5m"}));
    let mesh = Mesh {
        cells_per_edge: 20,
        delta_t: 0.005,
        end_time: 0.05,
    };
    let mut plan = plan_with_mesh(&spec, mesh);
    plan.timeout_seconds = 300;
    let started = Instant::now();
    let run = local::run_planned(Ok(plan), "of-smoke", &options("of-smoke")).await;
    let result = succeeded(&run.outcome);
    eprintln!(
        "OpenFOAM smoke (20^3 cells, 10 steps, 2 ranks on 2 workers): {:?}",
        started.elapsed()
    );
    assert_eq!(result["processes"], 2, "{result}");
    assert_eq!(result["timeSteps"], 10, "{result}");
    assert_eq!(result["completed"], true, "{result}");
    let timing = &result["processTiming"];
    assert!(
        timing["userSeconds"].as_f64().is_some_and(|u| u > 0.0),
        "{result}"
    );
    let raw = run
        .report
        .as_ref()
        .and_then(|r| r.raw_output.clone())
        .unwrap_or_default();
    assert!(
        raw.contains("2 ranks; user and system time summed"),
        "{raw}"
    );
}

/// The S case (1M cells, 1000 steps): opt-in, it takes far too long for CI. Measured on
/// 2 vCPUs with 2 ranks (`steps:10`): blockMesh and decomposePar about 5 s, the first
/// step 6.5 s, then 2.85 s per step — about 48 minutes for the 1000 steps.
/// `PERFSWEEP_OPENFOAM_S=1` runs it whole; `PERFSWEEP_OPENFOAM_S=steps:N` runs its mesh
/// for N steps, to measure; unset, it runs whole.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "the OpenFOAM S case (100^3 cells, 1000 time steps) takes about 50 minutes on 2 cores: cargo test -p perfsweep --test local -- --ignored openfoam_s_case (PERFSWEEP_OPENFOAM_S=steps:N for N steps)"]
async fn openfoam_s_case_opt_in() {
    let setting = std::env::var("PERFSWEEP_OPENFOAM_S").unwrap_or_default();
    let (_, spec) =
        openfoam_spec(json!({"problemSize": "S", "numProcs": 2, "numNodes": 1, "timeout": "4h"}));
    let mut mesh = Mesh::of(spec.problem_size);
    if let Some(steps) = setting
        .strip_prefix("steps:")
        .and_then(|n| n.parse::<u32>().ok())
    {
        mesh.end_time = mesh.delta_t * f64::from(steps);
    }
    let mut plan = plan_with_mesh(&spec, mesh);
    plan.timeout_seconds = 4 * 3600;
    let started = Instant::now();
    let run = local::run_planned(Ok(plan), "of-s", &options("of-s")).await;
    let result = succeeded(&run.outcome);
    eprintln!(
        "OpenFOAM S mesh, {} steps, 2 ranks: {:?} in all (mesh, decomposition, solver): {result}",
        mesh.steps(),
        started.elapsed()
    );
    assert_eq!(result["timeSteps"], mesh.steps(), "{result}");
}

/// Whether the MPI tools CI installs are here; under CI they must be.
fn mpi_tools_present(tools: &[&str]) -> bool {
    let missing: Vec<&&str> = tools.iter().filter(|t| !on_path(t)).collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{missing:?} missing under CI: .ci/run installs openmpi-bin, netpipe-openmpi and hpcc"
    );
    eprintln!(
        "SKIPPED: needs {missing:?} (apt-get install openmpi-bin netpipe-openmpi hpcc libopenblas0-serial)"
    );
    false
}

/// An MPIPingPong that names no tool, as kube-perftest's sweeps write it, measures with
/// what is here: NetPIPE from Debian when IMB is absent, two ranks on two worker agents
/// over TCP, and says which tool measured.
#[tokio::test(flavor = "multi_thread")]
async fn mpi_pingpong_without_imb_measures_with_netpipe_and_names_it() {
    if !mpi_tools_present(&["mpirun", "NPopenmpi"]) {
        return;
    }
    let kind = registry::lookup("MPIPingPong").expect("MPIPingPong");
    let spec = json!({"maxlog": 12, "timeout": "5m"});
    let started = Instant::now();
    let run = local::run(kind, "pingpong", &spec, &options("pingpong")).await;
    let result = succeeded(&run.outcome);
    eprintln!(
        "MPIPingPong (auto, maxlog 12) on the local backend: {:?}, {result}",
        started.elapsed()
    );
    let expected = if on_path("IMB-MPI1") {
        "IMB-MPI1"
    } else {
        "NPopenmpi"
    };
    assert_eq!(result["tool"], expected, "{result}");
    assert_eq!(result["complete"], true, "{result}");
    let rows = result["rows"].as_array().expect("rows");
    assert_eq!(
        rows.last().and_then(|r| r["bytes"].as_u64()),
        Some(4096),
        "the table reaches 2^maxlog: {result}"
    );
    // Physical bounds for loopback TCP between two processes: a one-way latency between
    // 0.1 µs and 10 ms, a bandwidth between 1 MB/s and 100 GB/s.
    let latency = result["minLatencyMicros"].as_f64().expect("latency");
    assert!((0.1..10_000.0).contains(&latency), "{result}");
    let bandwidth = result["peakBandwidthMegabytesPerSecond"]
        .as_f64()
        .expect("bandwidth");
    assert!((1.0..100_000.0).contains(&bandwidth), "{result}");
}

/// A spec that names IMB gets IMB or a clear failure, never another tool's figures.
#[tokio::test(flavor = "multi_thread")]
async fn mpi_pingpong_naming_imb_fails_clearly_without_it() {
    if on_path("IMB-MPI1") {
        eprintln!("SKIPPED: IMB-MPI1 is installed here; this test is about its absence");
        return;
    }
    let kind = registry::lookup("MPIPingPong").expect("MPIPingPong");
    let spec = json!({"tool": "IMB", "maxlog": 4, "timeout": "1m"});
    let run = local::run(kind, "pingpong-imb", &spec, &options("pingpong-imb")).await;
    match &run.outcome {
        LocalOutcome::Failed(Failure { reason, message }) => {
            assert_eq!(reason, "ToolMissing", "{message}");
            assert!(
                message.starts_with("IMB-MPI1 not found on PATH"),
                "{message}"
            );
            assert!(message.contains("IMB-v2021.3.tar.gz"), "{message}");
        }
        other @ LocalOutcome::Succeeded { .. } => panic!("IMB-MPI1 is missing, yet {other:?}"),
    }
}

/// HPCC with two ranks on one worker and a small HPL problem, for real: HPL, DGEMM and
/// STREAM figures from Debian's hpcc, the problem the spec asked for.
#[tokio::test(flavor = "multi_thread")]
async fn hpcc_runs_hpl_dgemm_and_stream_on_a_worker() {
    if !mpi_tools_present(&["mpirun", "hpcc"]) {
        return;
    }
    let kind = registry::lookup("HPCC").expect("HPCC");
    let spec = json!({"numNodes": 1, "ranksPerNode": 2, "n": 800, "nb": 80, "timeout": "5m"});
    let started = Instant::now();
    let run = local::run(kind, "hpcc", &spec, &options("hpcc")).await;
    let result = succeeded(&run.outcome);
    eprintln!(
        "HPCC (2 ranks, N=800) on the local backend: {:?}, HPL {} GFLOP/s, DGEMM {}, STREAM Triad {}",
        started.elapsed(),
        result["hpl"]["gflops"],
        result["starDgemmGflops"],
        result["starStream"]["triad"]
    );
    assert_eq!(result["processes"], 2, "{result}");
    assert_eq!(result["hpl"]["n"], 800, "{result}");
    assert_eq!(result["hpl"]["nb"], 80, "{result}");
    assert_eq!(
        (result["hpl"]["p"].as_u64(), result["hpl"]["q"].as_u64()),
        (Some(1), Some(2)),
        "{result}"
    );
    // Physical bounds for one core of any machine this runs on.
    let hpl = result["hpl"]["gflops"].as_f64().expect("HPL");
    assert!((0.01..1000.0).contains(&hpl), "{result}");
    let triad = result["starStream"]["triad"].as_f64().expect("Triad");
    assert!((0.1..1000.0).contains(&triad), "{result}");
    // HPL is a matrix factorisation built on DGEMM: it cannot beat every rank's DGEMM
    // rate by much (the ranks here share their cores with the rest of the machine).
    let dgemm = result["starDgemmGflops"].as_f64().expect("DGEMM") * 2.0;
    assert!(
        hpl < dgemm * 1.5,
        "HPL {hpl} against DGEMM {dgemm}: {result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rdma_kinds_need_a_device_and_say_so_before_starting() {
    let has_device =
        std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if has_device {
        eprintln!(
            "SKIPPED: this machine has an RDMA device; the no-device failure cannot be shown"
        );
        return;
    }
    for kind in ["RDMABandwidth", "RDMALatency"] {
        let info = registry::lookup(kind).expect(kind);
        let started = Instant::now();
        let run = local::run(info, "rdma", &json!({"mode": "write"}), &options("rdma")).await;
        match &run.outcome {
            LocalOutcome::Failed(Failure { reason, message }) => {
                assert_eq!(reason, "NoRdmaDevice", "{kind}: {message}");
                assert!(message.contains("/sys/class/infiniband"), "{message}");
            }
            other @ LocalOutcome::Succeeded { .. } => {
                panic!("{kind} without an RDMA device: {other:?}")
            }
        }
        assert!(run.report.is_none(), "no process was started");
        assert!(started.elapsed().as_secs() < 5);
    }
}
