//! The local backend: runs a benchmark's plan as local processes, one `perfsweep agent`
//! per process of the plan, talking over loopback instead of a pod network. The agents
//! are the same as in pods; only where they run differs.

pub mod claim;
pub mod nodes;
pub mod sweep;
pub mod table;
pub mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use perfsweep_benchmarks::execution::agent_env::{self, AddressSource, EnvValue};
use perfsweep_benchmarks::execution::agent_report::AgentReport;
use perfsweep_benchmarks::execution::plan::{Plan, Role, process_name};
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::outcome::{self, Expected, Failure, ProcessOutput, Reason};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::process::{Child, Command};

/// How local runs are made.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// The `perfsweep` binary the agents run as.
    pub agent_program: PathBuf,
    /// Where working directories go.
    pub scratch: PathBuf,
    /// Roles whose first process binds to this address instead of a numbered one: the
    /// stand-in node the role is placed on (`run --local --nodes`, see [`nodes`]).
    pub role_addresses: BTreeMap<String, Vec<std::net::Ipv4Addr>>,
}

impl LocalOptions {
    /// Agents run as this very binary; scratch space under the system temp directory.
    pub fn from_current_exe() -> anyhow::Result<Self> {
        Ok(Self {
            agent_program: std::env::current_exe()?,
            scratch: std::env::temp_dir(),
            role_addresses: BTreeMap::new(),
        })
    }
}

/// How one local run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum LocalOutcome {
    Succeeded {
        summary: String,
        result: Value,
        /// The acceptance criteria's verdict; `None` without criteria.
        acceptance: Option<perfsweep_benchmarks::judging::acceptance::Judgement>,
    },
    Failed(Failure),
}

impl LocalOutcome {
    /// The result, when the run succeeded.
    pub fn result(&self) -> Option<&Value> {
        match self {
            Self::Succeeded { result, .. } => Some(result),
            Self::Failed(_) => None,
        }
    }
}

/// One benchmark run on this machine.
#[derive(Clone, Debug)]
pub struct LocalRun {
    pub outcome: LocalOutcome,
    /// The result process's report, when it got that far.
    pub report: Option<AgentReport>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub elapsed: Duration,
}

/// Settings a pod would honour but loopback cannot, named so users are not misled.
pub fn ignored_settings(spec: &Value) -> Vec<&'static str> {
    let set = |field: &str| {
        spec.get(field)
            .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
    };
    [
        "hostNetwork",
        "networkName",
        "mtu",
        "resources",
        "placement",
        "nodeSelector",
        "affinity",
        "tolerations",
        "queue",
        "priorityClassName",
    ]
    .into_iter()
    .filter(|field| set(field))
    .collect()
}

/// Runs the benchmark of `kind` with `spec` (validated) on this machine.
pub async fn run(kind: &KindInfo, name: &str, spec: &Value, options: &LocalOptions) -> LocalRun {
    run_planned_spec(kind.plan(spec), name, spec, options).await
}

/// Runs a plan made from a spec (by [`KindInfo::plan`], or changed from one, as smoke
/// tests that shrink a problem do) on this machine; judged without acceptance criteria.
pub async fn run_planned(
    plan: Result<Plan, perfsweep_benchmarks::execution::plan::PlanError>,
    name: &str,
    options: &LocalOptions,
) -> LocalRun {
    run_planned_spec(plan, name, &Value::Null, options).await
}

/// [`run_planned`], the outcome judged against `spec`'s acceptance criteria.
async fn run_planned_spec(
    plan: Result<Plan, perfsweep_benchmarks::execution::plan::PlanError>,
    name: &str,
    spec: &Value,
    options: &LocalOptions,
) -> LocalRun {
    let started_at = Timestamp::now();
    let clock = Instant::now();
    let ran = match plan {
        Err(error) => Err(Failure::of_plan(&error)),
        // A missing device or unpackaged tool first: installing packages would not help.
        Ok(plan) => match preflight(&plan) {
            Some(failure) => Err(failure),
            None => match missing_tools(&plan) {
                Some(message) => Err(Failure::new(Reason::ToolMissing, message)),
                None => run_plan(&plan, name, options).await,
            },
        },
    };
    let (outcome, report) = match ran {
        Ok(finished) => judge(&finished, spec),
        Err(failure) => (LocalOutcome::Failed(failure), None),
    };
    LocalRun {
        outcome,
        report,
        started_at,
        finished_at: Timestamp::now(),
        elapsed: clock.elapsed(),
    }
}

/// What the result processes of a finished plan printed, and what else went wrong.
pub struct Finished {
    pub kind: String,
    pub result_role: String,
    /// The result role's replicas in order: label, standard output, end of the log.
    pub outputs: Vec<(String, String, String)>,
    /// Other processes that failed or did not stop: `label: why`.
    pub stragglers: Vec<String>,
}

/// The local backend's judgement of a finished plan: the shared outcome logic, then
/// the other processes (a peer that failed or hung fails a run the result process
/// thought a success).
pub fn judge(finished: &Finished, spec: &Value) -> (LocalOutcome, Option<AgentReport>) {
    let Some(kind) = perfsweep_benchmarks::kinds::registry::lookup(&finished.kind) else {
        let failure = Failure::new(
            Reason::PlanInvalid,
            format!("unknown benchmark kind {}", finished.kind),
        );
        return (LocalOutcome::Failed(failure), None);
    };
    let notes: Vec<String> = finished
        .outputs
        .iter()
        .map(|(_, _, tail)| format!("agent log: {tail}"))
        .collect();
    let outputs: Vec<ProcessOutput<'_>> = finished
        .outputs
        .iter()
        .zip(&notes)
        .map(|((label, stdout, _), note)| ProcessOutput {
            name: label,
            output: stdout,
            note: Some(note),
        })
        .collect();
    let expected = Expected {
        kind,
        role: &finished.result_role,
        spec,
    };
    let evaluation = outcome::evaluate(&expected, &outputs);
    let stragglers = &finished.stragglers;
    let outcome = match evaluation.outcome {
        Ok(_) if !stragglers.is_empty() => {
            LocalOutcome::Failed(Failure::new(Reason::PeerFailed, stragglers.join("; ")))
        }
        Ok(success) => LocalOutcome::Succeeded {
            summary: success.summary.unwrap_or_default(),
            result: success.result,
            acceptance: success.acceptance,
        },
        // A peer that failed is usually why the result process failed: say how.
        Err(mut failure) => {
            if !stragglers.is_empty() {
                failure
                    .message
                    .push_str(&format!("; other processes: {}", stragglers.join("; ")));
            }
            LocalOutcome::Failed(failure)
        }
    };
    (outcome, evaluation.report)
}

/// The plan's built-in checks (`perfsweep require-…` setup steps: an RDMA device, a
/// program Debian does not package), run before any process starts; the first failure.
pub fn preflight(plan: &Plan) -> Option<crate::agent::Failure> {
    let peers = perfsweep_benchmarks::execution::plan::PeerAddresses::new();
    plan.roles
        .iter()
        .flat_map(|role| &role.setup)
        .filter_map(|step| {
            let argv =
                perfsweep_benchmarks::execution::plan::resolve_args(&step.args, &peers).ok()?;
            crate::agent::builtin::run(step, &argv)
        })
        .find_map(Result::err)
}

/// A message naming every missing program and the Debian package that provides it.
pub fn missing_tools(plan: &Plan) -> Option<String> {
    missing_tools_in([plan])
}

/// [`missing_tools`] over several plans (a whole sweep), so a run checks once, before
/// anything starts.
pub fn missing_tools_in<'a>(plans: impl IntoIterator<Item = &'a Plan>) -> Option<String> {
    let mut missing: BTreeMap<&str, &str> = BTreeMap::new();
    for role in plans.into_iter().flat_map(|plan| &plan.roles) {
        for command in role.setup.iter().chain(std::iter::once(&role.command)) {
            // The agents run `perfsweep` as themselves.
            if command.program != perfsweep_benchmarks::execution::plan::AGENT_PROGRAM
                && find_on_path(&command.program).is_none()
            {
                missing.insert(&command.program, &command.package);
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let programs: Vec<&str> = missing.keys().copied().collect();
    let mut packages: Vec<&str> = missing.values().copied().collect();
    packages.sort_unstable();
    packages.dedup();
    Some(format!(
        "{} not found on PATH: install the Debian package{} {} (apt-get install {})",
        programs.join(", "),
        if packages.len() > 1 { "s" } else { "" },
        packages.join(", "),
        packages.join(" ")
    ))
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

async fn run_plan(plan: &Plan, name: &str, options: &LocalOptions) -> Result<Finished, Failure> {
    let scratch = options
        .scratch
        .join(format!("perfsweep-{}-{name}", std::process::id()));
    // One random token per run: the agents accept control requests (and a launcher's
    // commands) only from holders of it, as pods do with their benchmark's Secret.
    let launch_token = crate::token::random()
        .map_err(|e| Failure::new(Reason::LocalSetupFailed, e.to_string()))?;
    std::fs::create_dir_all(&scratch)
        .map_err(|e| local_setup_failed(&scratch.display().to_string(), e))?;
    let _scratch = RemovedOnDrop(scratch.clone());

    // Every process gets its own loopback address (127.B.0.2, 127.B.0.3, …, in a block
    // no other local run holds), for its control endpoint and as its data address, so
    // that servers of one role — and of two runs at once — can all use the plan's port,
    // as they would in their own pods.
    let block = claim::LoopbackBlock::claim(
        &claim::LoopbackBlock::default_dir(),
        &claim::Holder::this_process(name),
    )
    .map_err(|e| Failure::new(Reason::LocalSetupFailed, e.to_string()))?;
    let launch = Launch {
        plan,
        options,
        scratch: &scratch,
        addresses: Addresses::assign(plan, options, &block)?,
        // The plan's volumes: one directory per name, the same for every process.
        volumes: scratch.join("volumes"),
        host: hostname(),
        secrets: secrets_from_environment(plan)?,
        token: launch_token,
    };

    let mut result_process = None;
    let mut others = Vec::new();
    // The agents' process groups: ended below on every way out of this function, and
    // killed outright if the run is dropped half-way (a signal stopped it).
    let mut groups = tree::Groups::default();
    for (role, index) in plan.processes() {
        let process = launch.spawn(role, index, &mut groups)?;
        if role.name == plan.result_role && index == 0 {
            result_process = Some(process);
        } else {
            others.push(process);
        }
    }
    let Some(mut result_process) = result_process else {
        return Err(Failure::new(
            Reason::PlanInvalid,
            format!("the plan has no {}-0 process", plan.result_role),
        ));
    };

    // The agents enforce the plan's timeout themselves; this is the backstop.
    let backstop = Duration::from_secs(plan.timeout_seconds.max(60) + 30);
    let watched = watch(&mut result_process, others, backstop).await;
    // Whatever is left of this benchmark (a straggler, a tool its agent left behind)
    // ends here, before the next benchmark starts.
    groups.end_all(STOP_GRACE).await;
    let Watched {
        result: output,
        stragglers,
        result_outputs,
    } = watched;
    let output = output.finished(backstop)?;
    Ok(Finished {
        kind: plan.kind.clone(),
        result_role: plan.result_role.clone(),
        outputs: replica_outputs(plan, &result_process.label, &output, &result_outputs),
        stragglers,
    })
}

fn local_setup_failed(what: &str, e: std::io::Error) -> Failure {
    Failure::new(Reason::LocalSetupFailed, format!("{what}: {e}"))
}

/// Where every process of a run listens: its address and control port, and the
/// `address:port` list of each role that its peers are given.
struct Addresses {
    endpoints: BTreeMap<(String, u32), (std::net::Ipv4Addr, u16)>,
    peers: BTreeMap<String, Vec<String>>,
}

impl Addresses {
    /// An address from `block` for each process (a role's replica i at its i-th placed
    /// address instead, when it has one), and a free control port on it.
    fn assign(
        plan: &Plan,
        options: &LocalOptions,
        block: &claim::LoopbackBlock,
    ) -> Result<Self, Failure> {
        let mut endpoints = BTreeMap::new();
        let mut peers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (number, (role, index)) in plan.processes().enumerate() {
            let placed = options
                .role_addresses
                .get(&role.name)
                .and_then(|addresses| addresses.get(index as usize))
                .copied();
            let address = placed.or_else(|| block.address(number)).ok_or_else(|| {
                Failure::new(
                    Reason::PlanInvalid,
                    format!(
                        "{number} processes do not fit in the loopback block 127.{}.0.0/16",
                        block.octet()
                    ),
                )
            })?;
            let port = free_port(address)
                .map_err(|e| local_setup_failed("allocating a control port", e))?;
            endpoints.insert((role.name.clone(), index), (address, port));
            peers
                .entry(role.name.clone())
                .or_default()
                .push(format!("{address}:{port}"));
        }
        Ok(Self { endpoints, peers })
    }
}

/// Each role's Secret values, as `(variable, value)`.
type SecretValues<'a> = BTreeMap<&'a str, Vec<(String, String)>>;

/// Secrets come from our environment (there is no Secret store locally); a missing one
/// fails the run before anything starts.
fn secrets_from_environment(plan: &Plan) -> Result<SecretValues<'_>, Failure> {
    let mut secrets = SecretValues::new();
    for role in &plan.roles {
        for secret in &role.secret_env {
            let variable = secret.local_variable();
            let value = match std::env::var(&variable) {
                Err(_) if secret.optional => continue,
                value => value,
            };
            let value = value.map_err(|_| {
                Failure::new(
                    Reason::SecretMissing,
                    format!(
                        "role {} needs key {:?} of Secret {:?}: set the environment variable {variable} for a local run",
                        role.name, secret.key, secret.secret
                    ),
                )
            })?;
            secrets
                .entry(role.name.as_str())
                .or_default()
                .push((secret.name.clone(), value));
        }
    }
    Ok(secrets)
}

/// What the agents of one run start from.
struct Launch<'a> {
    plan: &'a Plan,
    options: &'a LocalOptions,
    /// The run's working directory; each process has its own directory in it.
    scratch: &'a Path,
    addresses: Addresses,
    volumes: PathBuf,
    host: String,
    secrets: SecretValues<'a>,
    /// The run's launch token.
    token: String,
}

impl Launch<'_> {
    /// Starts the agent of process `index` of `role`, its process group one of `groups`.
    fn spawn(
        &self,
        role: &Role,
        index: u32,
        groups: &mut tree::Groups,
    ) -> Result<AgentProcess, Failure> {
        let mut command = self.command(role, index)?;
        let child = command.spawn().map_err(|e| {
            local_setup_failed(
                &format!(
                    "starting the agent {}",
                    self.options.agent_program.display()
                ),
                e,
            )
        })?;
        groups.add(child.id());
        Ok(AgentProcess {
            label: process_name(&role.name, index),
            produces_result: role.name == self.plan.result_role,
            child,
            // The result process's progress is the run's.
            echo_progress: role.name == self.plan.result_role && index == 0,
        })
    }

    /// The command that starts the agent of process `index` of `role`, in its own
    /// process group, with its environment and Secrets.
    fn command(&self, role: &Role, index: u32) -> Result<Command, Failure> {
        let workdir = self.scratch.join(process_name(&role.name, index));
        let (address, port) = self
            .addresses
            .endpoints
            .get(&(role.name.clone(), index))
            .copied()
            .unwrap_or((std::net::Ipv4Addr::LOCALHOST, 0));
        let address = AddressSource::Literal(address.to_string());
        let site = agent_env::Site {
            peers: &self.addresses.peers,
            control_port: port,
            address: &address,
            address_variable: None,
            workdir: workdir.display().to_string(),
            volumes_dir: Some(self.volumes.display().to_string()),
            host: EnvValue::Text(self.host.clone()),
            // Loopback's MTU is not the benchmark's to set (named as ignored).
            mtu: None,
        };
        let environment = agent_env::environment(self.plan, &role.name, index, &site)
            .map_err(|e| Failure::new(Reason::PlanInvalid, e.to_string()))?;
        let mut command = Command::new(&self.options.agent_program);
        command
            .arg("agent")
            .envs(
                environment
                    .into_iter()
                    .filter_map(|(name, value)| match value {
                        EnvValue::Text(text) => Some((name, text)),
                        // Pods only; no site of a local run names one.
                        EnvValue::PodField(_) => None,
                    }),
            )
            .env(agent_env::LAUNCH_TOKEN, &self.token);
        // Every process of a local run is on loopback, but Open MPI's out-of-band channel
        // (mpirun ↔ its daemons) would advertise and use the host's other interfaces: a
        // machine whose rules block local traffic on them (a CI sandbox) leaves the
        // daemons unable to call back and the run waits out its timeout (seen in CI: an
        // OpenFOAM run's orted never reached mpirun at the host's eth0 address). The
        // user's own setting wins.
        if std::env::var_os(OPEN_MPI_OOB_INTERFACES).is_none() {
            command.env(OPEN_MPI_OOB_INTERFACES, "lo");
        }
        // Each pod has a /tmp of its own; processes of a local run share the host's, and
        // two Open MPI daemons of one job on one host name share a session directory
        // (/tmp/ompi.HOST.UID/jf.N): seen in CI, one of them then never reported to
        // mpirun and the run waited out its timeout. A temporary directory per process,
        // as in pods.
        let tmp = self
            .scratch
            .join(format!("{}.tmp", process_name(&role.name, index)));
        std::fs::create_dir_all(&tmp)
            .map_err(|e| local_setup_failed(&format!("creating {}", tmp.display()), e))?;
        command.env("TMPDIR", &tmp);
        command
            .envs(
                self.secrets
                    .get(role.name.as_str())
                    .into_iter()
                    .flatten()
                    .cloned(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        tree::own(&mut command);
        Ok(command)
    }
}

/// The result role's replicas in index order, as the outcome logic checks them: the
/// first one's `output`, the others' from `others`; one that did not finish is there
/// with nothing to report.
fn replica_outputs(
    plan: &Plan,
    first_label: &str,
    output: &AgentOutput,
    others: &[(String, AgentOutput)],
) -> Vec<(String, String, String)> {
    let mut outputs = vec![(
        first_label.to_owned(),
        output.stdout.clone(),
        output.stderr_tail(),
    )];
    let replicas = plan.role(&plan.result_role).map_or(1, |r| r.replicas);
    for index in 1..replicas {
        let label = process_name(&plan.result_role, index);
        outputs.push(match others.iter().find(|(done, _)| *done == label) {
            Some((_, output)) => (label, output.stdout.clone(), output.stderr_tail()),
            None => (label, String::new(), "it did not finish".to_owned()),
        });
    }
    outputs
}

/// Open MPI's setting of the interfaces its out-of-band channel uses.
const OPEN_MPI_OOB_INTERFACES: &str = "OMPI_MCA_oob_tcp_if_include";

/// How long agents and tools get to stop after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How long the result process may go on after a peer failed: it usually fails itself
/// with the better message; if it still waits for the peer, it never would.
const PEER_FAILURE_GRACE: Duration = Duration::from_secs(5);
/// How long the other processes get to finish after the result process did.
const STRAGGLER_WAIT: Duration = Duration::from_secs(10);

/// Removes a benchmark's scratch directory on every way out.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

enum ResultProcess {
    Finished(AgentOutput),
    TimedOut,
    /// A peer's agent failed while the result process still ran: `label: log tail`.
    PeerFailed(String),
}

impl ResultProcess {
    /// The result process's output, or why there is none.
    fn finished(self, backstop: Duration) -> Result<AgentOutput, Failure> {
        match self {
            Self::Finished(output) => Ok(output),
            // The backstop is the local runner's deadline, as the operator's is on
            // Kubernetes (the agent's own is `Timeout`).
            Self::TimedOut => Err(Failure::new(
                Reason::TimedOut,
                format!("no result within {backstop:?}"),
            )),
            // The peer's own log says why; the others only stopped because of it.
            Self::PeerFailed(peer) => Err(Failure::new(Reason::PeerFailed, peer)),
        }
    }
}

struct Watched {
    result: ResultProcess,
    /// Other processes that failed or did not stop: `label: why`.
    stragglers: Vec<String>,
    /// Reports of the result role's other replicas.
    result_outputs: Vec<(String, AgentOutput)>,
}

/// Waits for the result process while watching the others: a peer that fails first
/// (a server that could not bind its port) would leave the result process waiting for
/// it until the timeout, so it ends the benchmark, after a short grace.
async fn watch(
    result_process: &mut AgentProcess,
    others: Vec<AgentProcess>,
    backstop: Duration,
) -> Watched {
    let labels: Vec<String> = others.iter().map(|o| o.label.clone()).collect();
    let mut running: futures::stream::FuturesUnordered<_> = others
        .into_iter()
        .map(|mut other| async move {
            let output = other.collect().await;
            (other.label, other.produces_result, output)
        })
        .collect();
    let mut finished: Vec<(String, bool, AgentOutput)> = Vec::new();
    let mut failed_peer: Option<String> = None;
    let give_up = tokio::time::sleep(backstop);
    tokio::pin!(give_up);
    let result = {
        let collect = result_process.collect();
        tokio::pin!(collect);
        let peer_grace = tokio::time::sleep(backstop);
        tokio::pin!(peer_grace);
        loop {
            tokio::select! {
                output = &mut collect => break ResultProcess::Finished(output),
                () = &mut give_up => break ResultProcess::TimedOut,
                Some((label, produces, output)) = futures::StreamExt::next(&mut running) => {
                    if !output.success && failed_peer.is_none() {
                        failed_peer = Some(format!("{label} failed: {}", output.stderr_tail()));
                        peer_grace
                            .as_mut()
                            .reset(tokio::time::Instant::now() + PEER_FAILURE_GRACE);
                    }
                    finished.push((label, produces, output));
                }
                () = &mut peer_grace, if failed_peer.is_some() => {
                    break ResultProcess::PeerFailed(failed_peer.take().unwrap_or_default());
                }
            }
        }
    };
    if matches!(result, ResultProcess::Finished(_)) {
        let _ = tokio::time::timeout(STRAGGLER_WAIT, async {
            while let Some(done) = futures::StreamExt::next(&mut running).await {
                finished.push(done);
            }
        })
        .await;
    }
    let mut stragglers = Vec::new();
    if matches!(result, ResultProcess::Finished(_)) {
        // Dropping what still runs kills it (and `end_all` ends its group).
        stragglers.extend(
            labels
                .iter()
                .filter(|label| !finished.iter().any(|(done, ..)| done == *label))
                .map(|label| format!("{label} did not stop and was killed")),
        );
    }
    drop(running);
    let mut result_outputs = Vec::new();
    for (label, produces_result, output) in finished {
        if !output.success {
            stragglers.push(format!("{label}: {}", output.stderr_tail()));
        }
        if produces_result {
            result_outputs.push((label, output));
        }
    }
    Watched {
        result,
        stragglers,
        result_outputs,
    }
}

struct AgentProcess {
    label: String,
    /// A replica of the result role, whose report is part of the result.
    produces_result: bool,
    child: Child,
    /// Echo the tool's progress lines (`perfsweep-progress: …`) as they arrive.
    echo_progress: bool,
}

struct AgentOutput {
    stdout: String,
    stderr: String,
    success: bool,
}

impl AgentOutput {
    fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl AgentProcess {
    async fn collect(&mut self) -> AgentOutput {
        let mut stdout = String::new();
        let mut stderr = String::new();
        let out = self.child.stdout.take();
        let err = self.child.stderr.take();
        let read_out = async {
            if let Some(mut out) = out {
                let _ = out.read_to_string(&mut stdout).await;
            }
        };
        let echo = self.echo_progress;
        let read_err = async {
            let Some(err) = err else { return };
            let mut lines = tokio::io::BufReader::new(err);
            let mut line = String::new();
            let mut first = true;
            loop {
                line.clear();
                match lines.read_line(&mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if echo && let Some(text) = perfsweep_benchmarks::execution::progress::parse(&line)
                {
                    // The run's own line ("[1/3] … ...") is still open: start below it.
                    if std::mem::take(&mut first) {
                        eprintln!();
                    }
                    eprintln!("    {text}");
                }
                stderr.push_str(&line);
            }
        };
        tokio::join!(read_out, read_err);
        let success = self.child.wait().await.is_ok_and(|s| s.success());
        AgentOutput {
            stdout,
            stderr,
            success,
        }
    }
}

fn free_port(address: std::net::Ipv4Addr) -> std::io::Result<u16> {
    // Another process could take the port before the agent binds it; agents fail with
    // ControlPortUnavailable then, which names the port.
    Ok(std::net::TcpListener::bind((address, 0))?
        .local_addr()?
        .port())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
