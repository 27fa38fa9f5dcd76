//! What the MPI kinds (MPIPingPong, OpenFOAM) share.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How MPI ranks talk to each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Transport {
    /// Open MPI's TCP byte transfer layer.
    #[default]
    #[serde(rename = "TCP")]
    Tcp,
    /// UCX over RDMA (InfiniBand or RoCE).
    #[serde(rename = "RDMA")]
    Rdma,
}

pub(crate) fn default_ssh_port() -> u16 {
    2222
}

/// How an MPI job is launched, on Kubernetes and locally alike.
///
/// A **launcher** process runs `mpirun`; **worker** processes host the ranks. The
/// launcher starts Open MPI's daemon (`orted`) on each worker through the perfsweep
/// agent itself: `mpirun --mca plm_rsh_agent "perfsweep rsh"` makes Open MPI run
/// `perfsweep rsh WORKER orted …`, which asks the worker's agent, over its control
/// endpoint, to run the daemon, authenticated with a per-benchmark token, with the
/// daemon's output streamed back and its exit status returned. Chosen over SSH (what
/// kube-perftest does) because it needs no sshd, no host or client keys, no passwd
/// entry and no root: the agent is already in every pod, serves an endpoint already,
/// and the only secret is one random token per benchmark (a Secret owned by the
/// benchmark on Kubernetes, see `render::launch`). The worker agent runs nothing but
/// what an authenticated launcher asks for, as an argument vector (no shell).
///
/// The workers appear in the hostfile by their data address (`{peer:worker:i}`), with
/// `slots` ranks each; they prepare their own copy of whatever the ranks read (there is
/// no shared filesystem between pods), and are ready once that setup is done.
#[derive(Clone, Debug)]
pub struct MpiJob {
    pub kind: &'static str,
    pub transport: Transport,
    pub workers: u32,
    /// Ranks per worker; `None`: one per core Open MPI finds on each worker (a hostfile
    /// line without `slots=`, and no `-np`).
    pub slots: Option<u32>,
    /// The rank's program and arguments (run by every rank).
    pub rank_command: Vec<String>,
    /// The programs a worker must have, any one of them (checked before anything
    /// starts, failing with `ToolMissing`); empty: the rank command's program.
    pub rank_programs: Vec<String>,
    /// How to install the rank's program, for the error when a worker lacks it.
    pub rank_install_hint: String,
    /// Run on every worker before it is ready (for example mesh generation).
    pub worker_setup: Vec<crate::execution::plan::Command>,
    /// Written on every worker before its setup (for example a case directory).
    pub worker_files: Vec<crate::execution::plan::PlanFile>,
    /// Environment of the workers' setup and ranks, besides the transport's.
    pub worker_env: std::collections::BTreeMap<String, String>,
    /// Wrap `mpirun` in `perfsweep mpi-time` and each rank in `perfsweep mpi-rank`, to
    /// report user and system time summed over all ranks (`/usr/bin/time -v` style).
    pub time_ranks: bool,
}

/// The hostfile the launcher's `mpirun` reads.
pub const HOSTFILE: &str = "hostfile";

/// Separates the alternatives of [`REQUIRE_PROGRAM`]'s program argument
/// (`IMB-MPI1|NPopenmpi`: either will do).
pub const PROGRAM_ALTERNATIVES: char = '|';

impl MpiJob {
    /// [`REQUIRE_PROGRAM`]'s program argument: the alternatives a worker needs one of.
    fn required_programs(&self) -> String {
        if self.rank_programs.is_empty() {
            return self.rank_command.first().cloned().unwrap_or_default();
        }
        self.rank_programs.join(&PROGRAM_ALTERNATIVES.to_string())
    }

    pub fn plan(&self) -> crate::execution::plan::Plan {
        use crate::execution::plan::{
            AGENT_PROGRAM, Arg, Command, Lifetime, Plan, PlanFile, RSH_AGENT, Readiness, Role,
        };
        let hostfile: String = (0..self.workers)
            .map(|i| match self.slots {
                Some(slots) => format!("{{peer:worker:{i}}} slots={slots}\n"),
                None => format!("{{peer:worker:{i}}}\n"),
            })
            .collect();
        // Several ranks on a worker talk through shared memory; unknown counts may be.
        let shared_memory = self.slots.is_none_or(|slots| slots > 1);
        let mut args: Vec<String> = Vec::new();
        let mut program = "mpirun".to_owned();
        let mut package = "openmpi-bin";
        if self.time_ranks {
            AGENT_PROGRAM.clone_into(&mut program);
            package = "perfsweep";
            args.extend(["mpi-time".into(), "--".into(), "mpirun".into()]);
        }
        args.extend(["--hostfile".to_owned(), HOSTFILE.to_owned()]);
        if let Some(slots) = self.slots {
            args.extend(["-np".to_owned(), (self.workers * slots).to_string()]);
        }
        args.extend(
            [
                // Fill each worker's slots in order: rank r on worker r / slots.
                "--map-by",
                "slot",
                // No binding: each worker's daemon would bind its first rank to core 0,
                // and workers that share a machine (two pods on one node, the local
                // backend's stand-in nodes) would then spin on one core, each waiting a
                // scheduler tick for the other: 4 ms per message where 6 µs is right
                // (measured here). A pod cannot tell which cores are its own.
                "--bind-to",
                "none",
                "--mca",
                "plm_rsh_agent",
                RSH_AGENT,
                // The launcher starts every daemon itself, so only it needs to reach
                // the workers' agents.
                "--mca",
                "plm_rsh_no_tree_spawn",
                "1",
                // No ssh options (an image may still set OMPI_MCA_plm_rsh_args).
                "--mca",
                "plm_rsh_args",
                "",
            ]
            .map(str::to_owned),
        );
        match self.transport {
            Transport::Tcp => {
                // Each worker restricts the TCP transport to the interface of its data
                // address (OMPI_MCA_btl_tcp_if_include in its environment, below);
                // ranks on one worker talk through shared memory.
                let btl = if shared_memory {
                    "tcp,vader,self"
                } else {
                    "tcp,self"
                };
                args.extend(["--mca", "pml", "ob1", "--mca", "btl", btl].map(str::to_owned));
                if shared_memory {
                    // Pods have a small /dev/shm; /tmp is the pod's scratch volume.
                    args.extend(
                        ["--mca", "btl_vader_backing_directory", "/tmp"].map(str::to_owned),
                    );
                    // No cross-memory attach: a pod's default seccomp profile allows
                    // process_vm_readv only with CAP_SYS_PTRACE, and without it every
                    // transfer fails ("Read -1, expected 80000, errno = 1") and the run
                    // stalls (seen on a real cluster, issue 23). Copy-in/copy-out instead.
                    args.extend(
                        ["--mca", "btl_vader_single_copy_mechanism", "none"].map(str::to_owned),
                    );
                }
            }
            Transport::Rdma => {
                args.extend(["--mca", "pml", "ucx", "--mca", "osc", "ucx"].map(str::to_owned));
            }
        }
        if self.time_ranks {
            args.extend([AGENT_PROGRAM.into(), "mpi-rank".into(), "--".into()]);
        }
        args.extend(self.rank_command.iter().cloned());

        let mut worker_env = self.worker_env.clone();
        let mut worker_capabilities = Vec::new();
        match self.transport {
            Transport::Tcp => {
                worker_env.insert(
                    "OMPI_MCA_btl_tcp_if_include".to_owned(),
                    format!("{{{}}}", crate::execution::plan::INTERFACE),
                );
            }
            Transport::Rdma => {
                // RDMA transports only (no silent fallback to TCP), on the RDMA devices
                // the pod was given.
                worker_env.insert("UCX_TLS".to_owned(), "self,sm,rc,ud".to_owned());
                worker_capabilities.push("IPC_LOCK".to_owned());
            }
        }
        let launcher = Role {
            name: "launcher".into(),
            replicas: 1,
            setup: Vec::new(),
            command: Command {
                program,
                package: package.into(),
                args: args.into_iter().map(Arg::Literal).collect(),
            },
            files: vec![PlanFile {
                path: HOSTFILE.into(),
                contents: hostfile,
            }],
            ports: Vec::new(),
            ready_when: Readiness::Started,
            waits_for: vec!["worker".into()],
            lifetime: Lifetime::RunToCompletion,
            // It only starts remote daemons; the ranks' traffic never passes through it.
            uses_devices: false,
            capabilities: Vec::new(),
            // In pods the launcher runs as non-root; a local run is as the user who
            // started it, root included (mpirun refuses root unless told).
            env: [
                ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            secret_env: Vec::new(),
            volumes: Vec::new(),
        };
        let worker = Role {
            name: "worker".into(),
            replicas: self.workers,
            setup: std::iter::once(require_program(
                &self.required_programs(),
                &self.rank_install_hint,
            ))
            .chain(self.worker_setup.iter().cloned())
            .collect(),
            // Keeps the worker up while its agent serves the launcher; stopped at the end.
            command: Command {
                program: "sleep".into(),
                package: "coreutils".into(),
                args: vec![Arg::lit("infinity")],
            },
            files: self.worker_files.clone(),
            ports: Vec::new(),
            ready_when: Readiness::Started,
            waits_for: Vec::new(),
            lifetime: Lifetime::Serve,
            uses_devices: true,
            capabilities: worker_capabilities,
            env: worker_env,
            secret_env: Vec::new(),
            volumes: Vec::new(),
        };
        Plan {
            kind: self.kind.into(),
            roles: vec![launcher, worker],
            result_role: "launcher".into(),
            timeout_seconds: 0,
            pod_overrides: BTreeMap::default(),
        }
    }
}

/// The agent's built-in check that a program is on `PATH`, run before anything starts:
/// `perfsweep require-program PROGRAM HINT` fails with reason `ToolMissing` and HINT.
/// PROGRAM may list alternatives separated by [`PROGRAM_ALTERNATIVES`].
pub const REQUIRE_PROGRAM: &str = "require-program";

fn require_program(program: &str, hint: &str) -> crate::execution::plan::Command {
    crate::execution::plan::Command {
        program: crate::execution::plan::AGENT_PROGRAM.into(),
        package: "perfsweep".into(),
        args: [REQUIRE_PROGRAM, program, hint]
            .into_iter()
            .map(crate::execution::plan::Arg::lit)
            .collect(),
    }
}

/// The agent's rank wrapper for kinds whose tool needs more than a command line:
/// `perfsweep mpi-tool KIND ARGS…` (as the rank command) asks the kind, given what the
/// rank finds where it runs ([`RankProbe`]), for an [`Invocation`], and plays it: in the
/// worker's working directory, rank 0 writing the inputs and printing what the parser
/// reads. The kinds' decisions stay pure; the wrapper only looks and runs.
pub const MPI_TOOL: &str = "mpi-tool";

/// The rank command of a kind that runs through the wrapper: `perfsweep mpi-tool KIND
/// ARGS…`.
pub fn tool_rank_command(kind: &str, args: impl IntoIterator<Item = String>) -> Vec<String> {
    [crate::execution::plan::AGENT_PROGRAM, MPI_TOOL, kind]
        .map(str::to_owned)
        .into_iter()
        .chain(args)
        .collect()
}

/// What a rank finds where it runs.
pub struct RankProbe<'a> {
    /// `OMPI_COMM_WORLD_RANK`.
    pub rank: u32,
    /// `OMPI_COMM_WORLD_SIZE`: ranks in the job.
    pub world_size: u32,
    /// `OMPI_COMM_WORLD_LOCAL_SIZE`: ranks on this node.
    pub local_size: u32,
    /// Memory this rank's node (its container) may use, in bytes: the cgroup's limit,
    /// else the machine's.
    pub memory_bytes: u64,
    /// Whether a program is on `PATH`.
    pub has_program: &'a dyn Fn(&str) -> bool,
}

/// How a rank runs its kind's tool.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    /// Files rank 0 writes into its working directory before the program starts.
    pub input_files: Vec<crate::execution::plan::PlanFile>,
    /// Lines rank 0 prints before the program's output (what the parser reads first,
    /// such as which tool measured).
    pub preamble: Vec<String>,
    /// Rank 0's standard error is part of the result (NetPIPE prints its table there).
    pub stderr_is_output: bool,
    /// Files rank 0 prints when the program has exited (hpcc writes its results to a
    /// file, on the worker, which the launcher could not read otherwise).
    pub output_files: Vec<String>,
}

impl Invocation {
    pub fn of(program: &str, args: impl IntoIterator<Item = String>) -> Self {
        Self {
            program: program.to_owned(),
            args: args.into_iter().collect(),
            input_files: Vec::new(),
            preamble: Vec::new(),
            stderr_is_output: false,
            output_files: Vec::new(),
        }
    }
}

/// The line rank 0 prints after its tool exited, so that a parser can tell a finished
/// run from one cut short: `# perfsweep: PROGRAM exited with status N`.
pub fn exit_line(program: &str, status: i32) -> String {
    format!("# perfsweep: {program} exited with status {status}")
}

/// The exit status in an [`exit_line`] of `program` within `raw`, if there is one.
pub fn exit_status(raw: &str, program: &str) -> Option<i32> {
    let prefix = format!("# perfsweep: {program} exited with status ");
    raw.lines()
        .find_map(|line| line.trim().strip_prefix(&prefix)?.trim().parse().ok())
}
