//! The IPerf plan: an iperf3 server and a client that waits for it.

use super::{IPerfSpec, Protocol};
use crate::execution::plan::{Arg, Command, Lifetime, Plan, Port, PortProtocol, Readiness, Role};
use std::collections::BTreeMap;

const PACKAGE: &str = "iperf3";

pub fn plan(spec: &IPerfSpec) -> Plan {
    let port = spec.port.to_string();
    let server = Role {
        name: "server".into(),
        replicas: 1,
        setup: Vec::new(),
        command: Command {
            program: "iperf3".into(),
            package: PACKAGE.into(),
            // One test, then exit: a stray second client cannot skew the result. Bound
            // to its own data address only, so that servers of two local runs (each on
            // its own loopback addresses) can share the port; in a pod it is the address
            // clients are given anyway.
            args: ["--server", "--one-off", "--bind", "{self}", "--port", &port]
                .into_iter()
                .map(Arg::lit)
                .collect(),
        },
        files: Vec::new(),
        ports: vec![
            Port {
                name: "iperf".into(),
                port: spec.port,
                protocol: PortProtocol::TCP,
            },
            Port {
                name: "iperf-udp".into(),
                port: spec.port,
                protocol: PortProtocol::UDP,
            },
        ],
        ready_when: Readiness::Listening(spec.port),
        waits_for: Vec::new(),
        lifetime: Lifetime::Serve,
        uses_devices: true,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    let client = Role {
        name: "client".into(),
        replicas: 1,
        setup: Vec::new(),
        command: Command {
            program: "iperf3".into(),
            package: PACKAGE.into(),
            args: client_args(spec),
        },
        files: Vec::new(),
        ports: Vec::new(),
        ready_when: Readiness::Started,
        waits_for: vec!["server".into()],
        lifetime: Lifetime::RunToCompletion,
        uses_devices: true,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    Plan {
        kind: "IPerf".into(),
        roles: vec![server, client],
        result_role: "client".into(),
        timeout_seconds: 0,
        pod_overrides: BTreeMap::default(),
    }
}

fn client_args(spec: &IPerfSpec) -> Vec<Arg> {
    let mut args: Vec<String> = vec![
        "--client".into(),
        "{peer:server:0}".into(),
        "--port".into(),
        spec.port.to_string(),
        "--time".into(),
        spec.duration.to_string(),
        "--parallel".into(),
        spec.streams.to_string(),
        "--json".into(),
    ];
    if spec.protocol == Protocol::Udp {
        args.push("--udp".into());
    }
    if let Some(bitrate) = &spec.bitrate {
        args.extend(["--bitrate".into(), bitrate.clone()]);
    }
    if spec.reverse {
        args.push("--reverse".into());
    }
    if spec.bidirectional {
        args.push("--bidir".into());
    }
    if let Some(window) = &spec.window {
        args.extend(["--window".into(), window.clone()]);
    }
    if let Some(mss) = spec.mss {
        args.extend(["--set-mss".into(), mss.to_string()]);
    }
    if spec.omit > 0 {
        args.extend(["--omit".into(), spec.omit.to_string()]);
    }
    args.into_iter().map(Arg::Literal).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, resolve_args};

    fn spec(json: serde_json::Value) -> IPerfSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    #[test]
    fn client_waits_for_a_listening_server() {
        let plan = plan(&spec(serde_json::json!({"duration": 5, "streams": 4})));
        let server = plan.role("server").expect("server role");
        assert_eq!(server.ready_when, Readiness::Listening(5201));
        let client = plan.role("client").expect("client role");
        assert_eq!(client.waits_for, vec!["server"]);
        let own = PeerAddresses::from([(
            crate::execution::plan::SELF.to_owned(),
            vec!["10.1.2.4".into()],
        )]);
        let server_args = resolve_args(&server.command.args, &own).expect("resolvable");
        assert!(
            server_args.windows(2).any(|w| w == ["--bind", "10.1.2.4"]),
            "the server binds its own data address: {server_args:?}"
        );
        assert_eq!(plan.result_role, "client");
        let peers = PeerAddresses::from([("server".into(), vec!["10.1.2.3".into()])]);
        let args = resolve_args(&client.command.args, &peers).expect("resolvable");
        assert_eq!(
            args,
            [
                "--client",
                "10.1.2.3",
                "--port",
                "5201",
                "--time",
                "5",
                "--parallel",
                "4",
                "--json"
            ]
        );
    }

    #[test]
    fn udp_reverse_window_and_mss_reach_the_command_line() {
        let plan = plan(&spec(serde_json::json!({
            "protocol": "UDP", "bitrate": "10G", "reverse": true, "window": "4M", "mss": 1400, "omit": 2
        })));
        let args = resolve_args(
            &plan.role("client").expect("client").command.args,
            &PeerAddresses::from([("server".into(), vec!["h".into()])]),
        )
        .expect("resolvable");
        let text = args.join(" ");
        for expected in [
            "--udp",
            "--bitrate 10G",
            "--reverse",
            "--window 4M",
            "--set-mss 1400",
            "--omit 2",
        ] {
            assert!(text.contains(expected), "{text} lacks {expected}");
        }
    }
}
