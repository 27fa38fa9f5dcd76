//! The local backend: runs a benchmark's plan as local processes, one `perfsweep agent`
//! per process of the plan, talking over loopback instead of a pod network. The agents
//! are the same as in pods; only where they run differs.

pub mod nodes;
pub mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use perfsweep_benchmarks::agent_env::{self, AddressSource};
use perfsweep_benchmarks::plan::{Plan, process_name};
use perfsweep_benchmarks::registry::KindInfo;
use perfsweep_benchmarks::report::{self, AgentReport, Outcome};
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
    pub role_addresses: BTreeMap<String, std::net::Ipv4Addr>,
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
    Succeeded { summary: String, result: Value },
    Failed { reason: String, message: String },
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
    run_planned(kind.plan(spec), name, options).await
}

/// Runs a plan made from a spec (by [`KindInfo::plan`], or changed from one, as smoke
/// tests that shrink a problem do) on this machine.
pub async fn run_planned(
    plan: Result<Plan, perfsweep_benchmarks::plan::PlanError>,
    name: &str,
    options: &LocalOptions,
) -> LocalRun {
    let started_at = Timestamp::now();
    let clock = Instant::now();
    let outcome = match plan {
        Err(error) => Err(("Unsupported".to_owned(), error.to_string())),
        // A missing device or unpackaged tool first: installing packages would not help.
        Ok(plan) => match preflight(&plan) {
            Some(failure) => Err((failure.reason.to_owned(), failure.message)),
            None => match missing_tools(&plan) {
                Some(message) => Err(("ToolMissing".to_owned(), message)),
                None => run_plan(&plan, name, options).await,
            },
        },
    };
    let (outcome, report) = match outcome {
        Ok(report) => {
            let outcome = match &report.outcome {
                Outcome::Succeeded { result, summary } => LocalOutcome::Succeeded {
                    summary: summary.clone().unwrap_or_default(),
                    result: result.clone().unwrap_or(Value::Null),
                },
                Outcome::Failed { reason, message } => LocalOutcome::Failed {
                    reason: reason.clone(),
                    message: message.clone(),
                },
            };
            (outcome, Some(report))
        }
        Err((reason, message)) => (LocalOutcome::Failed { reason, message }, None),
    };
    LocalRun {
        outcome,
        report,
        started_at,
        finished_at: Timestamp::now(),
        elapsed: clock.elapsed(),
    }
}

/// The plan's built-in checks (`perfsweep require-…` setup steps: an RDMA device, a
/// program Debian does not package), run before any process starts; the first failure.
pub fn preflight(plan: &Plan) -> Option<crate::agent::Failure> {
    let peers = perfsweep_benchmarks::plan::PeerAddresses::new();
    plan.roles
        .iter()
        .flat_map(|role| &role.setup)
        .filter_map(|step| {
            let argv = perfsweep_benchmarks::plan::resolve_args(&step.args, &peers).ok()?;
            crate::agent::builtin::run(step, &argv)
        })
        .find_map(Result::err)
}

/// A message naming every missing program and the Debian package that provides it.
pub fn missing_tools(plan: &Plan) -> Option<String> {
    let mut missing: BTreeMap<&str, &str> = BTreeMap::new();
    for role in &plan.roles {
        for command in role.setup.iter().chain(std::iter::once(&role.command)) {
            // The agents run `perfsweep` as themselves.
            if command.program != perfsweep_benchmarks::plan::AGENT_PROGRAM
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

type RunError = (String, String);

async fn run_plan(
    plan: &Plan,
    name: &str,
    options: &LocalOptions,
) -> Result<AgentReport, RunError> {
    let scratch = options
        .scratch
        .join(format!("perfsweep-{}-{name}", std::process::id()));
    let io_error =
        |what: &str, e: std::io::Error| ("LocalSetupFailed".to_owned(), format!("{what}: {e}"));
    // One random token per run for plans whose launcher starts commands on the others.
    let launch_token = if plan.remote_launch() {
        Some(
            crate::agent::exec::random_token()
                .map_err(|e| ("LocalSetupFailed".to_owned(), e.to_string()))?,
        )
    } else {
        None
    };
    std::fs::create_dir_all(&scratch).map_err(|e| io_error(&scratch.display().to_string(), e))?;

    // Every process gets its own loopback address (127.0.0.2, 127.0.0.3, …), for its
    // control endpoint and as its data address, so that servers of one role can all use
    // the plan's port, as they would in their own pods.
    let mut endpoints = BTreeMap::new();
    let mut peers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (number, (role, index)) in plan.processes().enumerate() {
        let placed = (index == 0)
            .then(|| options.role_addresses.get(&role.name).copied())
            .flatten();
        let address = placed.or_else(|| loopback_address(number)).ok_or_else(|| {
            (
                "PlanInvalid".to_owned(),
                format!("{number} processes do not fit in 127.0.0.0/8"),
            )
        })?;
        let port = free_port(address).map_err(|e| io_error("allocating a control port", e))?;
        endpoints.insert((role.name.clone(), index), (address, port));
        peers
            .entry(role.name.clone())
            .or_default()
            .push(format!("{address}:{port}"));
    }
    // The plan's volumes: one directory per name, the same for every process.
    let volumes = scratch.join("volumes");
    let plan_json =
        serde_json::to_string(plan).map_err(|e| ("PlanInvalid".into(), e.to_string()))?;
    let peers_json =
        serde_json::to_string(&peers).map_err(|e| ("PlanInvalid".into(), e.to_string()))?;
    let host = hostname();

    // Secrets come from our environment (there is no Secret store locally); a missing
    // one fails the run before anything starts.
    let mut secrets: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for role in &plan.roles {
        for secret in &role.secret_env {
            let variable = secret.local_variable();
            let value = match std::env::var(&variable) {
                Err(_) if secret.optional => continue,
                value => value,
            };
            let value = value.map_err(|_| {
                (
                    "SecretMissing".to_owned(),
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

    let mut result_process = None;
    let mut others = Vec::new();
    for (role, index) in plan.processes() {
        let workdir = scratch.join(process_name(&role.name, index));
        let (address, port) = endpoints
            .get(&(role.name.clone(), index))
            .copied()
            .unwrap_or((std::net::Ipv4Addr::LOCALHOST, 0));
        let mut command = Command::new(&options.agent_program);
        command
            .arg("agent")
            .env(agent_env::PLAN, &plan_json)
            .env(agent_env::ROLE, &role.name)
            .env(agent_env::INDEX, index.to_string())
            .env(agent_env::PEERS, &peers_json)
            .env(agent_env::CONTROL_PORT, port.to_string())
            .env(
                agent_env::ADDRESS,
                AddressSource::Literal(address.to_string()).to_string(),
            )
            .env(agent_env::WORKDIR, &workdir)
            .env(agent_env::VOLUMES_DIR, &volumes)
            .env(agent_env::HOST, &host)
            .envs(launch_token.iter().map(|t| (agent_env::LAUNCH_TOKEN, t)))
            .envs(
                secrets
                    .get(role.name.as_str())
                    .into_iter()
                    .flatten()
                    .cloned(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command.spawn().map_err(|e| {
            io_error(
                &format!("starting the agent {}", options.agent_program.display()),
                e,
            )
        })?;
        let is_result = role.name == plan.result_role && index == 0;
        let process = AgentProcess {
            label: process_name(&role.name, index),
            produces_result: role.name == plan.result_role,
            child,
            echo_progress: is_result,
        };
        if is_result {
            result_process = Some(process);
        } else {
            others.push(process);
        }
    }
    let Some(mut result_process) = result_process else {
        return Err((
            "PlanInvalid".into(),
            format!("the plan has no {}-0 process", plan.result_role),
        ));
    };

    // The agents enforce the plan's timeout themselves; this is the backstop.
    let backstop = Duration::from_secs(plan.timeout_seconds.max(60) + 30);
    let collected = tokio::time::timeout(backstop, result_process.collect()).await;
    let mut stragglers = Vec::new();
    // The other replicas of the result role report results too (distributed load
    // generators), merged with replica 0's.
    let mut result_outputs = Vec::new();
    for mut other in others {
        match tokio::time::timeout(Duration::from_secs(10), other.collect()).await {
            Ok(output) if other.produces_result => {
                if !output.success {
                    stragglers.push(format!("{}: {}", other.label, output.stderr_tail()));
                }
                result_outputs.push((other.label.clone(), output));
            }
            Ok(output) if output.success => {}
            Ok(output) => stragglers.push(format!("{}: {}", other.label, output.stderr_tail())),
            Err(_) => {
                let _ = other.child.start_kill();
                stragglers.push(format!("{} did not stop and was killed", other.label));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let output = collected.map_err(|_| {
        let _ = result_process.child.start_kill();
        (
            "Timeout".to_owned(),
            format!("no result within {backstop:?}"),
        )
    })?;
    let mut reports = vec![report::find(&output.stdout)];
    for (label, output) in &result_outputs {
        reports.push(report::find(&output.stdout).map_err(|error| match error {
            report::ReportError::Missing => report::ReportError::Malformed(format!(
                "{label} reported nothing; agent log: {}",
                output.stderr_tail()
            )),
            other => other,
        }));
    }
    let combined = reports
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map(
            |reports| match perfsweep_benchmarks::registry::lookup(&plan.kind) {
                Some(kind) => report::combine(kind, reports),
                None => reports
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| unreachable!("one report at least")),
            },
        );
    match combined {
        Ok(mut report) => {
            match (&mut report.outcome, stragglers.is_empty()) {
                (Outcome::Succeeded { .. }, false) => {
                    report.outcome = Outcome::Failed {
                        reason: "PeerFailed".into(),
                        message: stragglers.join("; "),
                    };
                }
                // A peer that failed is usually why the result process failed: say how.
                (Outcome::Failed { message, .. }, false) => {
                    message.push_str(&format!("; other processes: {}", stragglers.join("; ")));
                }
                _ => {}
            }
            Ok(report)
        }
        Err(error) => Err((
            "AgentFailed".into(),
            format!("{error}; agent log: {}", output.stderr_tail()),
        )),
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
                if echo && let Some(text) = perfsweep_benchmarks::progress::parse(&line) {
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

/// The loopback address of the `number`th process of a plan: 127.0.0.2 onwards (Linux
/// routes all of 127.0.0.0/8 to the loopback interface).
pub fn loopback_address(number: usize) -> Option<std::net::Ipv4Addr> {
    let first = u32::from(std::net::Ipv4Addr::new(127, 0, 0, 2));
    let address = first.checked_add(u32::try_from(number).ok()?)?;
    (address < u32::from(std::net::Ipv4Addr::new(127, 255, 255, 255)))
        .then(|| std::net::Ipv4Addr::from(address))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
