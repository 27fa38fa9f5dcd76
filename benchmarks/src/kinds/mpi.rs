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
    /// Ranks per worker.
    pub slots: u32,
    /// The rank's program and arguments (run by every rank).
    pub rank_command: Vec<String>,
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

impl MpiJob {
    pub fn plan(&self) -> crate::execution::plan::Plan {
        use crate::execution::plan::{
            AGENT_PROGRAM, Arg, Command, Lifetime, Plan, PlanFile, RSH_AGENT, Readiness, Role,
        };
        let hostfile: String = (0..self.workers)
            .map(|i| format!("{{peer:worker:{i}}} slots={}\n", self.slots))
            .collect();
        let mut args: Vec<String> = Vec::new();
        let mut program = "mpirun".to_owned();
        let mut package = "openmpi-bin";
        if self.time_ranks {
            AGENT_PROGRAM.clone_into(&mut program);
            package = "perfsweep";
            args.extend(["mpi-time".into(), "--".into(), "mpirun".into()]);
        }
        let total = self.workers * self.slots;
        args.extend(
            [
                "--hostfile",
                HOSTFILE,
                "-np",
                &total.to_string(),
                // Fill each worker's slots in order: rank r on worker r / slots.
                "--map-by",
                "slot",
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
                let btl = if self.slots > 1 {
                    "tcp,vader,self"
                } else {
                    "tcp,self"
                };
                args.extend(["--mca", "pml", "ob1", "--mca", "btl", btl].map(str::to_owned));
                if self.slots > 1 {
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
                self.rank_command.first().map_or("", String::as_str),
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
