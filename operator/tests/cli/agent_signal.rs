//! `perfsweep agent` as a real process stopped by SIGTERM, as the kubelet stops a deleted
//! pod (issue 23: the agent, PID 1 without a handler, ignored it; the pod took its whole
//! grace period to go and the tool ran on). It must stop its tool and exit within
//! seconds, reporting `Interrupted`.

use std::io::{BufRead, BufReader, Read, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use perfsweep_benchmarks::execution::agent_env;
use perfsweep_benchmarks::execution::agent_report::{self, Outcome};
use perfsweep_benchmarks::execution::plan::Arg;
use perfsweep_benchmarks::kinds::registry;
use serde_json::json;

/// The children of process `pid` (every thread's), from `/proc`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie no longer does).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn sigterm_stops_the_tool_and_the_agent_at_once_with_an_interrupted_report() {
    sigterm_ends_the_agent(false);
}

/// As in a pod: the agent is PID 1 of its own PID namespace, which the kernel shields
/// from every signal it has no handler for (from outside the namespace too, as the
/// container runtime sends it). Before the handler, this agent ran on.
#[test]
fn sigterm_stops_the_agent_as_pid_1_of_its_own_pid_namespace() {
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        // Straight to stderr: the harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED the agent as PID 1: `unshare --pid --fork` cannot run here ({})",
            probe.map_or_else(
                |e| e.to_string(),
                |o| String::from_utf8_lossy(&o.stderr).trim().to_owned()
            )
        );
        return;
    }
    sigterm_ends_the_agent(true);
}

/// Starts `perfsweep agent` (as PID 1 of a new PID namespace with `pid_1`), waits until
/// its tool runs, sends it SIGTERM and checks that it ended at once, reported
/// `Interrupted` and took its tool with it.
fn sigterm_ends_the_agent(pid_1: bool) {
    // IPerf's server role, playing `sleep 600` instead of iperf3: a tool that would run
    // far longer than the test waits.
    let mut plan = registry::lookup("IPerf")
        .expect("IPerf is registered")
        .plan(&json!({"duration": 1}))
        .expect("an IPerf plan");
    let role = plan
        .roles
        .iter_mut()
        .find(|r| r.name == "server")
        .expect("IPerf has a server role");
    role.command.program = "sleep".into();
    role.command.package = "coreutils".into();
    role.command.args = vec![Arg::lit("600")];
    role.setup.clear();
    role.files.clear();
    role.waits_for.clear();
    let scratch = crate::local_support::scratch(if pid_1 {
        "agent-sigterm-pid1"
    } else {
        "agent-sigterm"
    });
    let termination_log = scratch.join("termination-log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let agent_binary = env!("CARGO_BIN_EXE_perfsweep");
    let mut command = if pid_1 {
        let mut unshare = Command::new("unshare");
        // --kill-child: a failing test leaves no agent behind.
        unshare.args(["--pid", "--fork", "--kill-child", agent_binary, "agent"]);
        unshare
    } else {
        let mut agent = Command::new(agent_binary);
        agent.arg("agent");
        agent
    };
    let mut agent = command
        .env(
            agent_env::PLAN,
            serde_json::to_string(&plan).expect("plan JSON"),
        )
        // Every agent proves its benchmark's token to its peers; this one has none to
        // talk to, but starts only with one.
        .env(agent_env::LAUNCH_TOKEN, "0123456789abcdef0123456789abcdef")
        .env(agent_env::ROLE, "server")
        .env(agent_env::INDEX, "0")
        .env(agent_env::PEERS, "{}")
        .env(agent_env::CONTROL_PORT, port.to_string())
        .env(agent_env::ADDRESS, "literal:127.0.0.1")
        .env(agent_env::WORKDIR, &scratch)
        .env(agent_env::TERMINATION_LOG, &termination_log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perfsweep agent starts");
    // The agent's own process: under unshare, its child.
    let pid = if pid_1 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(child) = children_of(agent.id()).first() {
                break *child;
            }
            assert!(Instant::now() < deadline, "unshare never started the agent");
            std::thread::sleep(Duration::from_millis(10));
        }
    } else {
        agent.id()
    };
    let stderr = agent.stderr.take().expect("piped stderr");
    let log = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });

    // Wait until the tool runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    let tool = loop {
        if let Some(child) = children_of(pid).into_iter().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm"))
                .is_ok_and(|comm| comm.trim() == "sleep")
        }) {
            break child;
        }
        if let Ok(Some(status)) = agent.try_wait() {
            panic!(
                "the agent ended before its tool ran: {status}; log {:?}",
                log.join()
            );
        }
        if Instant::now() >= deadline {
            let _ = agent.kill();
            panic!("the agent never started its tool");
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    let signalled = Instant::now();
    // SAFETY: kill(2) on the agent this test started and has not reaped.
    let sent = unsafe { libc::kill(i32::try_from(pid).expect("a pid"), libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM sent");
    let status = loop {
        if let Some(status) = agent.try_wait().expect("the agent can be waited for") {
            break status;
        }
        if signalled.elapsed() > Duration::from_secs(10) {
            // SAFETY: kill(2) on the agent this test started.
            unsafe { libc::kill(i32::try_from(pid).expect("a pid"), libc::SIGKILL) };
            let _ = agent.kill();
            panic!("the agent ignored SIGTERM for 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = signalled.elapsed();
    eprintln!("the agent exited {took:?} after SIGTERM with {status}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");

    let mut stdout = String::new();
    agent
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut stdout)
        .expect("the agent's output");
    let report = agent_report::find(&stdout).expect("the agent printed its report");
    match &report.outcome {
        Outcome::Failed { reason, message } => {
            assert_eq!(reason, "Interrupted", "{message}");
            assert!(message.contains("SIGTERM"), "{message}");
        }
        Outcome::Succeeded { .. } => panic!("an interrupted agent reported success"),
    }
    let written = std::fs::read_to_string(&termination_log).expect("a termination message");
    assert!(written.starts_with("Interrupted: "), "{written}");

    // The tool did not outlive the agent.
    let gone = Instant::now() + Duration::from_secs(5);
    while alive(tool) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(tool),
        "the tool (pid {tool}) still runs after the agent ended"
    );
    let _ = log.join();
    let _ = std::fs::remove_dir_all(&scratch);
}
