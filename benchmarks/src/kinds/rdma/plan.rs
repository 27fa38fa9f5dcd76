//! The RDMA plans: a perftest server (`ib_{read,write,send}_{bw,lat}`) and a client that
//! waits until the server listens on perftest's TCP exchange port (`-p`), so the client
//! never races the server and nothing crash-loops.
//!
//! Both roles first check that the process sees an RDMA device (the built-in setup step
//! [`REQUIRE_RDMA_DEVICE`]): without one perftest fails with a terse `No IB devices
//! found` or, worse, a segmentation fault, so the benchmark fails before starting with
//! the reason `NoRdmaDevice` and the devices that are there.

use super::{Mode, PerftestOptions};
use crate::execution::plan::{
    AGENT_PROGRAM, Arg, Command, Lifetime, Plan, Port, PortProtocol, Readiness, Role,
};
use std::collections::BTreeMap;

const PACKAGE: &str = "perftest";

/// The agent's built-in check that an RDMA device (optionally a named one) is present:
/// `perfsweep require-rdma-device [DEVICE]`.
pub const REQUIRE_RDMA_DEVICE: &str = "require-rdma-device";

/// Bandwidth or latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    Bandwidth { qps: u32 },
    Latency,
}

/// The perftest program for `mode` and `measure`, e.g. `ib_write_bw`.
pub fn program(mode: Mode, measure: Measure) -> String {
    let suffix = match measure {
        Measure::Bandwidth { .. } => "bw",
        Measure::Latency => "lat",
    };
    format!("ib_{}_{suffix}", mode.as_str())
}

pub fn plan(kind: &str, options: &PerftestOptions, measure: Measure) -> Plan {
    let server = Role {
        name: "server".into(),
        replicas: 1,
        setup: vec![require_device(options)],
        command: command(options, measure, None),
        files: Vec::new(),
        ports: vec![Port {
            name: "perftest".into(),
            port: options.port,
            protocol: PortProtocol::TCP,
        }],
        // perftest's server listens on the TCP exchange port once its device is open.
        // With rdma_cm the connection goes through the RDMA connection manager's port
        // space instead, which no TCP socket shows; the server is then ready once started
        // and the client gives it a moment (see `client_setup`).
        ready_when: if options.rdma_cm {
            Readiness::Started
        } else {
            Readiness::Listening(options.port)
        },
        waits_for: Vec::new(),
        lifetime: Lifetime::Serve,
        uses_devices: true,
        capabilities: vec!["IPC_LOCK".into()],
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    let client = Role {
        name: "client".into(),
        replicas: 1,
        setup: client_setup(options),
        command: command(options, measure, Some("{peer:server:0}")),
        files: Vec::new(),
        ports: Vec::new(),
        ready_when: Readiness::Started,
        waits_for: vec!["server".into()],
        lifetime: Lifetime::RunToCompletion,
        uses_devices: true,
        capabilities: vec!["IPC_LOCK".into()],
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    Plan {
        kind: kind.into(),
        roles: vec![server, client],
        result_role: "client".into(),
        timeout_seconds: 0,
        pod_overrides: BTreeMap::default(),
    }
}

fn require_device(options: &PerftestOptions) -> Command {
    let mut args = vec![Arg::lit(REQUIRE_RDMA_DEVICE)];
    args.extend(options.device.iter().map(Arg::lit));
    Command {
        program: AGENT_PROGRAM.into(),
        package: "perfsweep".into(),
        args,
    }
}

fn client_setup(options: &PerftestOptions) -> Vec<Command> {
    let mut setup = vec![require_device(options)];
    if options.rdma_cm {
        // The server's rdma_cm listener is not observable from outside; it is up within
        // milliseconds of the start that made the server ready.
        setup.push(Command {
            program: "sleep".into(),
            package: "coreutils".into(),
            args: vec![Arg::lit("1")],
        });
    }
    setup
}

/// The perftest command line; `server` is the server's address for the client.
fn command(options: &PerftestOptions, measure: Measure, server: Option<&str>) -> Command {
    let tool = program(options.mode, measure);
    let mut args: Vec<String> = Vec::new();
    let program = match &options.cpu_affinity {
        Some(cpus) => {
            args.extend(["-c".into(), cpus.clone(), tool]);
            "taskset".to_owned()
        }
        None => tool,
    };
    args.extend(["-p".into(), options.port.to_string()]);
    if let Some(device) = &options.device {
        args.extend(["-d".into(), device.clone()]);
    }
    if let Some(port) = options.ib_port {
        args.extend(["-i".into(), port.to_string()]);
    }
    if let Some(gid) = options.gid_index {
        args.extend(["-x".into(), gid.to_string()]);
    }
    if options.rdma_cm {
        args.push("-R".into());
    }
    if options.all_sizes {
        args.push("-a".into());
    } else if let Some(size) = options.message_size {
        args.extend(["-s".into(), size.to_string()]);
    }
    match options.duration {
        Some(seconds) => args.extend(["-D".into(), seconds.to_string()]),
        None => args.extend(["-n".into(), options.iterations.to_string()]),
    }
    if let Measure::Bandwidth { qps } = measure {
        args.extend(["-q".into(), qps.to_string(), "--report_gbits".into()]);
    }
    if let Some(gpu) = options.use_cuda {
        args.push(format!("--use_cuda={gpu}"));
    }
    // Without -F, latency tests abort when the CPU frequency governor is not at its
    // maximum, which is the norm in containers that cannot change it; the warning
    // stays in the output.
    args.push("-F".into());
    args.extend(options.extra_args.iter().map(|a| a.0.clone()));
    if let Some(server) = server {
        args.push(server.into());
    }
    let args: Vec<Arg> = args.into_iter().map(Arg::Literal).collect();
    Command {
        package: if program == "taskset" {
            "util-linux".into()
        } else {
            PACKAGE.into()
        },
        program,
        args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, resolve_args};

    fn options(json: serde_json::Value) -> PerftestOptions {
        serde_json::from_value(json).expect("valid options")
    }

    fn client_args(plan: &Plan) -> Vec<String> {
        let peers = PeerAddresses::from([("server".into(), vec!["10.0.0.1".into()])]);
        let client = plan.role("client").expect("client");
        let mut argv = vec![client.command.program.clone()];
        argv.extend(resolve_args(&client.command.args, &peers).expect("resolvable"));
        argv
    }

    #[test]
    fn the_client_waits_for_the_listening_server() {
        let plan = plan(
            "RDMABandwidth",
            &options(serde_json::json!({"mode": "write"})),
            Measure::Bandwidth { qps: 4 },
        );
        let server = plan.role("server").expect("server");
        assert_eq!(server.ready_when, Readiness::Listening(18515));
        assert_eq!(server.command.program, "ib_write_bw");
        assert_eq!(server.capabilities, ["IPC_LOCK"]);
        assert_eq!(server.setup[0].args, [Arg::lit(REQUIRE_RDMA_DEVICE)]);
        assert_eq!(
            client_args(&plan),
            [
                "ib_write_bw",
                "-p",
                "18515",
                "-n",
                "1000",
                "-q",
                "4",
                "--report_gbits",
                "-F",
                "10.0.0.1"
            ]
        );
        assert!(!plan.remote_launch());
    }

    #[test]
    fn every_option_reaches_the_command_line_as_separate_arguments() {
        let plan = plan(
            "RDMALatency",
            &options(serde_json::json!({
                "mode": "send", "device": "mlx5_1", "ibPort": 2, "gidIndex": 3,
                "rdmaCm": true, "messageSize": 64, "duration": 5, "cpuAffinity": "2-3",
                "useCuda": 0, "port": 20000, "extraArgs": ["--tclass", "106", "a b; rm -rf /"]
            })),
            Measure::Latency,
        );
        assert_eq!(
            client_args(&plan),
            [
                "taskset",
                "-c",
                "2-3",
                "ib_send_lat",
                "-p",
                "20000",
                "-d",
                "mlx5_1",
                "-i",
                "2",
                "-x",
                "3",
                "-R",
                "-s",
                "64",
                "-D",
                "5",
                "--use_cuda=0",
                "-F",
                "--tclass",
                "106",
                "a b; rm -rf /",
                "10.0.0.1"
            ]
        );
        let server = plan.role("server").expect("server");
        assert_eq!(server.ready_when, Readiness::Started, "rdma_cm");
        assert_eq!(server.command.package, "util-linux");
        assert_eq!(
            server.setup[0].args,
            [Arg::lit(REQUIRE_RDMA_DEVICE), Arg::lit("mlx5_1")]
        );
        assert_eq!(plan.role("client").expect("client").setup.len(), 2);
    }

    #[test]
    fn all_sizes_replaces_the_message_size() {
        let plan = plan(
            "RDMABandwidth",
            &options(serde_json::json!({"allSizes": true, "mode": "read"})),
            Measure::Bandwidth { qps: 1 },
        );
        let argv = client_args(&plan);
        assert!(argv.contains(&"-a".to_owned()), "{argv:?}");
        assert!(!argv.contains(&"-s".to_owned()), "{argv:?}");
        assert_eq!(argv[0], "ib_read_bw");
    }
}
