//! `perfsweep agent`: plays one process of a plan. The same agent runs in every
//! benchmark pod and every local process, so waiting for peers, readiness, running the
//! tool and parsing its output exist once, for both backends.
//!
//! An agent: serves its control endpoint; resolves its data address; learns its peers'
//! addresses and waits for the roles it depends on; writes the role's files and runs its
//! setup; runs the measured command with its output streamed and captured; and ends with
//! one report line (see `perfsweep_benchmarks::execution::agent_report`). The result
//! process parses the output with the kind's parser, then tells the serving roles to
//! stop.

pub mod address;
pub mod auth;
pub mod builtin;
mod claim_export;
pub mod config;
pub mod control;
pub mod exec;
pub mod interface;
pub mod interrupt;
pub mod listening;
pub mod mpi;
mod peer_dns;
pub mod process;
pub mod sys;
pub mod version;

use std::process::ExitCode;
use std::time::Duration;

use jiff::Timestamp;
use perfsweep_benchmarks::execution::agent_report::{
    self, AgentReport, Counters, NetworkUse, Outcome,
};
use perfsweep_benchmarks::execution::parse_error::{ParseError, strip_terminal_codes};
use perfsweep_benchmarks::execution::plan::{self, Lifetime, PeerAddresses, Readiness};
use perfsweep_benchmarks::kinds::registry;
use tokio::net::TcpListener;
use tokio::time::Instant;

pub use config::AgentConfig;
use control::Control;

/// Used when a plan sets no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_mins(30);
/// How often peers are polled while waiting for them.
const POLL: Duration = Duration::from_millis(200);

/// Why a role failed, as it appears in the report and the benchmark's conditions: the
/// one failure type of every backend.
pub use perfsweep_benchmarks::outcome::{Failure, Reason};

/// What the measured command produced.
struct Played {
    command: Vec<String>,
    started_at: Timestamp,
    finished_at: Timestamp,
    stdout: Vec<u8>,
    network: NetworkUse,
}

/// Runs the agent configured by the process environment.
pub async fn run_from_env() -> anyhow::Result<ExitCode> {
    let config = AgentConfig::from_lookup(|name| std::env::var(name).ok())?;
    Ok(run(config).await)
}

/// Plays the configured role to the end and prints the report. A stop signal (see
/// [`interrupt`]) ends the tool and the agent at once, with an `Interrupted` report.
pub async fn run(config: AgentConfig) -> ExitCode {
    let started = Timestamp::now();
    let stop = interrupt::stop_signal();
    tokio::pin!(stop);
    let Some(token) = config.token.clone() else {
        let report = failed_report(
            &config,
            started,
            Failure::plain(
                Reason::LaunchTokenMissing,
                format!(
                    "{} is not set: the agents of a benchmark authenticate each other with its token (on Kubernetes from the benchmark's Secret)",
                    perfsweep_benchmarks::execution::agent_env::LAUNCH_TOKEN
                ),
            ),
        );
        publish(&config, &report);
        return ExitCode::FAILURE;
    };
    let control = Control::new(token.0);
    let bind_host = match &config.address {
        perfsweep_benchmarks::execution::agent_env::AddressSource::Literal(address) => {
            address.clone()
        }
        _ => "0.0.0.0".to_owned(),
    };
    let report = match TcpListener::bind((bind_host.as_str(), config.control_port)).await {
        Err(error) => {
            let report = failed_report(
                &config,
                started,
                Failure::plain(
                    Reason::ControlPortUnavailable,
                    format!(
                        "cannot serve the control endpoint on {bind_host}:{}: {error}",
                        config.control_port
                    ),
                ),
            );
            publish(&config, &report);
            report
        }
        Ok(listener) => {
            if config.index == 0 && config.role().replicas > 1 {
                // Before serving, so no replica's command finds it without barriers.
                if let Some(parties) = config.peers.get(&config.role) {
                    control.enable_barriers(parties.clone());
                }
            }
            let server = tokio::spawn(control.clone().serve(listener));
            let timeout = match config.plan.timeout_seconds {
                0 => DEFAULT_TIMEOUT,
                seconds => Duration::from_secs(seconds),
            };
            let deadline = Instant::now() + timeout;
            // Dropping `play` kills the tool (its child is killed on drop).
            let played = tokio::select! {
                played = play(&config, &control, deadline) => Ok(played),
                signal = &mut stop => Err(signal),
            };
            let mut report = match played {
                Ok(Ok(played)) => finish(&config, played),
                Ok(Err(failure)) => failed_report(&config, started, failure),
                Err(signal) => {
                    let report = failed_report(&config, started, interrupted(signal));
                    // Nothing else: the pod is going away and its peers with it.
                    publish(&config, &report);
                    server.abort();
                    return ExitCode::from(signal.exit_code());
                }
            };
            if config.produces_result() {
                // Asked after the measurement, so the probe never delays or disturbs it.
                report.tool_version = version::probe(&config.role().command.program).await;
            }
            // Into the claim of a pvc:// output location, before anyone sees it finished.
            claim_export::write_if_asked(&config, &report);
            // Reported before finishing: whoever sees this agent finished (the result
            // process, a Kubernetes log reader) finds the report in its output.
            publish(&config, &report);
            control.update(|s| s.finished = true);
            if config.is_result_process() {
                // Other replicas of the result role, if any, are done with the serving
                // roles by now: they pass a last barrier with replica 0 before ending
                // (as distributed load generators do).
                stop_serving_peers(&config).await;
            }
            server.abort();
            report
        }
    };
    match report.outcome {
        Outcome::Succeeded { .. } => ExitCode::SUCCESS,
        Outcome::Failed { .. } => ExitCode::FAILURE,
    }
}

fn interrupted(signal: interrupt::Stop) -> Failure {
    Failure::plain(
        Reason::Interrupted,
        format!(
            "the agent received {} (its pod deleted, or its node shutting down) and stopped the tool before it finished",
            signal.name()
        ),
    )
}

async fn play(
    config: &AgentConfig,
    control: &Control,
    deadline: Instant,
) -> Result<Played, Failure> {
    let role = config.role();
    let remaining = deadline.saturating_duration_since(Instant::now());
    let own = address::resolve(&config.address, remaining)
        .await
        .map_err(|e| Failure::plain(Reason::NetworkUnavailable, e.to_string()))?;
    tracing::info!(address = %own.ip, interface = ?own.interface, "data address");
    if let Some(mtu) = config.mtu {
        set_mtu(own.interface.as_deref().unwrap_or("eth0"), mtu).await?;
    }
    control.update(|s| s.address = Some(own.ip.clone()));

    let mut peers = peer_addresses(config, deadline).await?;
    peers.insert(plan::SELF.to_owned(), vec![own.ip.clone()]);
    peers.insert(plan::INDEX.to_owned(), vec![config.index.to_string()]);
    for (role, endpoints) in &config.peers {
        // As found: a command's own lookup could hit a miss the cluster DNS still caches.
        let endpoints = endpoints.iter().map(|e| peer_dns::known(e)).collect();
        peers.insert(plan::control_key(role), endpoints);
    }
    peers.extend(config.plan.volume_paths(config.volumes_dir.as_deref()));
    if let Some(dir) = &config.volumes_dir {
        // In pods the kubelet mounts them; here they are plain directories.
        for volume in &role.volumes {
            let path = dir.join(&volume.name);
            std::fs::create_dir_all(&path).map_err(|e| {
                Failure::plain(
                    Reason::VolumeUnavailable,
                    format!("{}: {e}", path.display()),
                )
            })?;
        }
    }
    if let Some(name) = own
        .interface
        .clone()
        .or_else(|| interface::interface_of(&own.ip))
    {
        peers.insert(plan::INTERFACE.to_owned(), vec![name]);
    }
    let env = exec::command_env(config, &peers)?;
    for dependency in &role.waits_for {
        wait_until_ready(config, dependency, deadline).await?;
    }

    std::fs::create_dir_all(&config.workdir).map_err(|e| {
        Failure::plain(
            Reason::WorkdirUnavailable,
            format!("{}: {e}", config.workdir.display()),
        )
    })?;
    for file in &role.files {
        let contents = plan::fill(&file.contents, &peers)
            .map_err(|e| Failure::plain(Reason::PlanInvalid, e.to_string()))?;
        let path = config.workdir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Failure::plain(
                    Reason::WorkdirUnavailable,
                    format!("{}: {e}", parent.display()),
                )
            })?;
        }
        std::fs::write(&path, contents).map_err(|e| {
            Failure::plain(
                Reason::WorkdirUnavailable,
                format!("{}: {e}", path.display()),
            )
        })?;
    }
    for step in &role.setup {
        let argv = plan::resolve_args(&step.args, &peers)
            .map_err(|e| Failure::plain(Reason::PlanInvalid, e.to_string()))?;
        if let Some(checked) = builtin::run(step, &argv) {
            checked?;
            continue;
        }
        within(
            deadline,
            process::run_setup(step, &argv, &config.workdir, &env),
        )
        .await??;
    }

    let argv = plan::resolve_args(&role.command.args, &peers)
        .map_err(|e| Failure::plain(Reason::PlanInvalid, e.to_string()))?;
    let mut command = vec![role.command.program.clone()];
    command.extend(argv.iter().cloned());
    tracing::info!(command = %command.join(" "), "starting");
    let counted_from = interface::counters();
    let started_at = Timestamp::now();
    if config.plan.remote_launch() && role.lifetime == Lifetime::Serve {
        // Setup is done: the launcher may start this worker's ranks now.
        control.enable_exec(exec::ExecConfig {
            workdir: config.workdir.clone(),
            env: env.clone(),
        });
    }
    let mut child = process::spawn(&role.command, &argv, &config.workdir, &env)?;
    let readiness = tokio::spawn(become_ready(
        role.ready_when.clone(),
        own.ip.parse().ok(),
        control.clone(),
    ));
    let capture = process::tee_stdout(child.stdout.take());
    tokio::pin!(capture);

    let outcome = match role.lifetime {
        Lifetime::RunToCompletion => {
            tokio::select! {
                stdout = &mut capture => Ok(stdout),
                () = tokio::time::sleep_until(deadline) => Err(Failure::plain(Reason::Timeout, "the command did not finish before the benchmark's timeout")),
            }
        }
        Lifetime::Serve => {
            tokio::select! {
                stdout = &mut capture => Ok(stdout),
                () = control.stopped() => {
                    let _ = child.start_kill();
                    Ok(capture.await)
                }
                () = tokio::time::sleep_until(deadline) => Err(Failure::plain(Reason::Timeout, "the benchmark's timeout passed while serving")),
            }
        }
    };
    readiness.abort();
    let stdout = match outcome {
        Ok(stdout) => stdout,
        Err(failure) => {
            let _ = child.start_kill();
            return Err(failure);
        }
    };
    let status = child.wait().await.map_err(|e| {
        Failure::plain(
            Reason::ToolFailed,
            format!("waiting for {}: {e}", role.command.program),
        )
    })?;
    let stopped_on_request =
        role.lifetime == Lifetime::Serve && !status.success() && control_stopped(status);
    if !status.success() && !stopped_on_request {
        // A tool that exits non-zero after saying why in its result document (the load
        // generator does: scripts read its exit code) fails with its own reason, and its
        // document is kept as evidence, as when it exits 0 (see `finish`).
        if config.produces_result()
            && let Some(Err(ParseError::ToolReportedError(_))) = registry::lookup(&config.plan.kind)
                .map(|kind| kind.parse(&String::from_utf8_lossy(&stdout)))
        {
            return Ok(Played {
                command,
                started_at,
                finished_at: Timestamp::now(),
                stdout,
                network: network_use(&own, &counted_from),
            });
        }
        let tail = String::from_utf8_lossy(&stdout);
        let tail: Vec<&str> = tail.lines().rev().take(3).collect();
        return Err(Failure::plain(
            Reason::ToolFailed,
            format!(
                "{} exited with {}: {}",
                role.command.program,
                process::describe(status),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ),
        ));
    }
    Ok(Played {
        command,
        started_at,
        finished_at: Timestamp::now(),
        stdout,
        network: network_use(&own, &counted_from),
    })
}

/// A pod has two or three interfaces; a local run shares the host's, which may have
/// many: the record keeps the data address's and the busiest others.
const MAX_INTERFACES_RECORDED: usize = 8;

/// What crossed each interface since `before`, and which carried the data address.
fn network_use(
    own: &address::DataAddress,
    before: &std::collections::BTreeMap<String, Counters>,
) -> NetworkUse {
    let carrier = own
        .interface
        .clone()
        .or_else(|| interface::interface_of(&own.ip));
    let used = agent_report::interface_use(before, &interface::counters());
    NetworkUse {
        address: own.ip.clone(),
        interfaces: agent_report::most_used(used, carrier.as_deref(), MAX_INTERFACES_RECORDED),
        interface: carrier,
    }
}

/// A serving command we killed ends by SIGKILL; that is how it is meant to end.
fn control_stopped(status: std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal() == Some(9)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        false
    }
}

async fn within<T>(
    deadline: Instant,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Failure> {
    tokio::time::timeout_at(deadline, work)
        .await
        .map_err(|_| Failure::plain(Reason::Timeout, "the benchmark's timeout passed"))
}

/// The data addresses of the roles this role's command and files refer to, in replica
/// order. Only those: a role that finished early has no endpoint left to ask.
async fn peer_addresses(config: &AgentConfig, deadline: Instant) -> Result<PeerAddresses, Failure> {
    let mut peers = PeerAddresses::new();
    let referenced = config.role().referenced_roles();
    for (role, endpoints) in config.peers.iter().filter(|(r, _)| referenced.contains(*r)) {
        let mut addresses = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let status = poll(config, endpoint, deadline, |s| s.address.is_some(), role).await?;
            addresses.push(status.address.unwrap_or_default());
        }
        peers.insert(role.clone(), addresses);
    }
    Ok(peers)
}

async fn wait_until_ready(
    config: &AgentConfig,
    role: &str,
    deadline: Instant,
) -> Result<(), Failure> {
    let endpoints = config.peers.get(role).ok_or_else(|| {
        Failure::plain(
            Reason::PlanInvalid,
            format!("this role waits for {role}, which has no peers"),
        )
    })?;
    for endpoint in endpoints {
        tracing::info!(%role, %endpoint, "waiting for peer to be ready");
        poll(config, endpoint, deadline, |s| s.ready || s.finished, role).await?;
    }
    Ok(())
}

/// Polls a peer until `accept` holds. A peer that is not up yet is not an error: pods of
/// a gang start within moments of each other, local processes likewise.
async fn poll(
    config: &AgentConfig,
    endpoint: &str,
    deadline: Instant,
    accept: impl Fn(&control::Status) -> bool,
    role: &str,
) -> Result<control::Status, Failure> {
    loop {
        match control::query(endpoint, token(config)).await {
            Ok(status) if accept(&status) => return Ok(status),
            Ok(status) if status.finished => {
                return Err(Failure::plain(
                    Reason::PeerFailed,
                    format!("peer {role} at {endpoint} finished before it was ready"),
                ));
            }
            Err(error) if Instant::now() >= deadline => {
                return Err(Failure::plain(
                    Reason::PeerUnreachable,
                    format!(
                        "peer {role} at {endpoint} could not be reached before the timeout: {error}"
                    ),
                ));
            }
            Ok(_) | Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(Failure::plain(
                Reason::PeerUnreachable,
                format!("peer {role} at {endpoint} did not become ready before the timeout"),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The benchmark's token (checked at the agent's start).
fn token(config: &AgentConfig) -> &[u8] {
    config.token.as_ref().map_or(&[], |t| t.0.as_slice())
}

/// `own`: the data address; a listener bound to another address (another local process
/// on the same port) does not count.
async fn become_ready(readiness: Readiness, own: Option<std::net::IpAddr>, control: Control) {
    match readiness {
        Readiness::Started => {}
        Readiness::Listening(port) => {
            while !listening::is_listening_on(port, own) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    control.update(|s| s.ready = true);
}

async fn stop_serving_peers(config: &AgentConfig) {
    for role in config
        .plan
        .roles
        .iter()
        .filter(|r| r.lifetime == Lifetime::Serve)
    {
        for endpoint in config.peers.get(&role.name).into_iter().flatten() {
            if let Err(error) = control::stop(endpoint, token(config)).await {
                tracing::debug!(%endpoint, %error, "peer already gone");
            }
        }
    }
}

async fn set_mtu(interface: &str, mtu: u32) -> Result<(), Failure> {
    let status = tokio::process::Command::new("ip")
        .args(["link", "set", "dev", interface, "mtu", &mtu.to_string()])
        .status()
        .await
        .map_err(|e| {
            Failure::plain(
                Reason::MtuFailed,
                format!("cannot run ip (package iproute2): {e}"),
            )
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::plain(
            Reason::MtuFailed,
            format!(
                "setting MTU {mtu} on {interface} failed ({}); the pod needs NET_ADMIN",
                process::describe(status)
            ),
        ))
    }
}

/// Why a finished tool gave no result: it said it failed (fio's job errors, the load
/// generator's start-up failures), or what it printed is not a result.
pub fn failure_reason(error: &ParseError) -> Reason {
    match error {
        ParseError::ToolReportedError(_) => Reason::ToolFailed,
        _ => Reason::ResultUnparseable,
    }
}

fn finish(config: &AgentConfig, played: Played) -> AgentReport {
    let raw = String::from_utf8_lossy(&played.stdout).into_owned();
    let outcome = if config.produces_result() {
        match registry::lookup(&config.plan.kind).map(|kind| kind.parse(&raw)) {
            Some(Ok(parsed)) => Outcome::Succeeded {
                result: Some(parsed.result),
                summary: Some(parsed.summary),
            },
            Some(Err(error)) => Outcome::Failed {
                reason: failure_reason(&error).to_string(),
                message: strip_terminal_codes(&error.to_string()),
            },
            None => Outcome::Failed {
                reason: Reason::PlanInvalid.to_string(),
                message: format!("unknown benchmark kind {}", config.plan.kind),
            },
        }
    } else {
        Outcome::Succeeded {
            result: None,
            summary: None,
        }
    };
    let evidence = config.produces_result().then_some(raw);
    AgentReport {
        kind: config.plan.kind.clone(),
        role: config.role.clone(),
        index: config.index,
        outcome,
        command: played.command,
        started_at: played.started_at.to_string(),
        finished_at: played.finished_at.to_string(),
        host: config.host.clone(),
        raw_output_sha256: evidence
            .as_ref()
            .map(|raw| agent_report::sha256_hex(raw.as_bytes())),
        raw_output: evidence,
        tool_version: None,
        network: Some(played.network),
    }
}

fn failed_report(config: &AgentConfig, started: Timestamp, failure: Failure) -> AgentReport {
    tracing::error!(reason = %failure.reason, message = %failure.message, "role failed");
    AgentReport {
        kind: config.plan.kind.clone(),
        role: config.role.clone(),
        index: config.index,
        outcome: Outcome::Failed {
            reason: failure.reason.to_string(),
            message: failure.message,
        },
        command: Vec::new(),
        started_at: started.to_string(),
        finished_at: Timestamp::now().to_string(),
        host: config.host.clone(),
        raw_output: None,
        raw_output_sha256: None,
        tool_version: None,
        network: None,
    }
}

/// Writes the report: the termination message and the report line.
fn publish(config: &AgentConfig, report: &AgentReport) {
    write_termination_log(config, report);
    println!("{}", report.to_line());
}

/// The kubelet shows this file in the pod's status; keep it to a short summary (the
/// kubelet truncates it at 4 KiB). The full report is the last line of the log.
fn write_termination_log(config: &AgentConfig, report: &AgentReport) {
    let Some(path) = &config.termination_log else {
        return;
    };
    let text = match &report.outcome {
        Outcome::Succeeded { summary, .. } => summary.clone().unwrap_or_else(|| "succeeded".into()),
        Outcome::Failed { reason, message } => format!("{reason}: {message}"),
    };
    let text: String = text.chars().take(1024).collect();
    if let Err(error) = std::fs::write(path, text) {
        tracing::warn!(path = %path.display(), %error, "cannot write the termination message");
    }
}

#[cfg(test)]
mod plain_text_tests {
    use super::*;

    /// Finding 10 of issue 18: a tool's coloured error reached `outcome.message` with its
    /// escape codes.
    #[test]
    fn failure_messages_carry_no_terminal_codes() {
        let iperf = registry::lookup("IPerf").expect("registered");
        let plan = iperf
            .plan(&serde_json::json!({"duration": 1}))
            .expect("plan");
        let config = AgentConfig {
            role: plan.result_role.clone(),
            plan,
            index: 0,
            peers: std::collections::BTreeMap::default(),
            control_port: 0,
            address: perfsweep_benchmarks::execution::agent_env::AddressSource::Literal(
                "127.0.0.1".into(),
            ),
            workdir: std::env::temp_dir(),
            mtu: None,
            host: None,
            termination_log: None,
            volumes_dir: None,
            token: None,
        };
        let played = Played {
            command: vec!["iperf3".into()],
            started_at: Timestamp::now(),
            finished_at: Timestamp::now(),
            stdout: b"\x1b[1;31miperf3: error - unable to connect to server\x1b[0m\n".to_vec(),
            network: NetworkUse::default(),
        };
        match finish(&config, played).outcome {
            Outcome::Failed { reason, message } => {
                assert_eq!(reason, "ToolFailed");
                assert_eq!(
                    message,
                    "the benchmark tool reported an error: unable to connect to server"
                );
            }
            other @ Outcome::Succeeded { .. } => panic!("{other:?}"),
        }
        assert_eq!(
            Failure::plain(Reason::SetupFailed, "\x1b[33mwarning\x1b[0m").message,
            "warning"
        );
    }
}
