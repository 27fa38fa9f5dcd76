//! The contract between the backends and `perfsweep agent`: the environment an agent is
//! started with. The Kubernetes backend sets it on pods, the local backend on processes.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The plan, as JSON.
pub const PLAN: &str = "PERFSWEEP_PLAN";
/// This process's role name.
pub const ROLE: &str = "PERFSWEEP_ROLE";
/// This process's replica index within its role.
pub const INDEX: &str = "PERFSWEEP_INDEX";
/// JSON map of role name → control endpoints (`host:port`) of its replicas, in order.
pub const PEERS: &str = "PERFSWEEP_PEERS";
/// Port this agent serves its control endpoint on.
pub const CONTROL_PORT: &str = "PERFSWEEP_CONTROL_PORT";
/// How this agent finds its own data-plane address; see [`AddressSource`].
pub const ADDRESS: &str = "PERFSWEEP_ADDRESS";
/// Working directory for files and commands.
pub const WORKDIR: &str = "PERFSWEEP_WORKDIR";
/// MTU to set on the interface that carries the benchmark traffic (optional).
pub const MTU: &str = "PERFSWEEP_MTU";
/// Name of the node or host, for the report (optional).
pub const HOST: &str = "PERFSWEEP_HOST";
/// Where the agent writes its short termination message (optional; Kubernetes only).
pub const TERMINATION_LOG: &str = "PERFSWEEP_TERMINATION_LOG";
/// A directory holding the plan's volumes as `DIR/NAME` (optional; the local backend).
/// Unset in pods, where each volume is mounted at its `mountPath`.
pub const VOLUMES_DIR: &str = "PERFSWEEP_VOLUMES_DIR";

/// The per-benchmark token every request between a benchmark's agents proves it holds
/// (status, stop, barriers, and `perfsweep rsh` in a plan that launches remotely); on
/// Kubernetes from the Secret [`launch_secret_name`], key [`LAUNCH_SECRET_KEY`].
pub const LAUNCH_TOKEN: &str = "PERFSWEEP_LAUNCH_TOKEN";
/// JSON map of peer data address → control endpoint, set by an agent for its commands
/// so that `perfsweep rsh HOST` finds the agent of HOST.
pub const RSH_PEERS: &str = "PERFSWEEP_RSH_PEERS";
/// The key of the token in the launch Secret.
pub const LAUNCH_SECRET_KEY: &str = "token";

/// The Secret holding a benchmark's launch token: `<benchmark>-launch`.
pub fn launch_secret_name(benchmark: &str) -> String {
    format!("{benchmark}-launch")
}

/// The port agents serve their control endpoint on in pods.
pub const DEFAULT_CONTROL_PORT: u16 = 7470;

/// Control endpoints of every process, by role.
pub type PeerEndpoints = BTreeMap<String, Vec<String>>;

/// How an agent learns the address its peers should send benchmark traffic to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressSource {
    /// A fixed address (`literal:127.0.0.1`), as on the local backend.
    Literal(String),
    /// An environment variable (`env:POD_IP`), set from the pod's status by the
    /// downward API: the pod network, or the node's under hostNetwork.
    Env(String),
    /// The address Multus gave the attachment `network` (`name` or `namespace/name`),
    /// read from the pod's `k8s.v1.cni.cncf.io/network-status` annotation, which the
    /// downward API exposes in `annotations_file` (`multus:<network>:<file>`).
    Multus {
        network: String,
        annotations_file: String,
    },
}

impl fmt::Display for AddressSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(address) => write!(f, "literal:{address}"),
            Self::Env(name) => write!(f, "env:{name}"),
            Self::Multus {
                network,
                annotations_file,
            } => write!(f, "multus:{network}:{annotations_file}"),
        }
    }
}

impl FromStr for AddressSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            Some(("literal", address)) if !address.is_empty() => Ok(Self::Literal(address.into())),
            Some(("env", name)) if !name.is_empty() => Ok(Self::Env(name.into())),
            Some(("multus", rest)) => match rest.split_once(':') {
                Some((network, file)) if !network.is_empty() && !file.is_empty() => {
                    Ok(Self::Multus {
                        network: network.into(),
                        annotations_file: file.into(),
                    })
                }
                _ => Err(format!(
                    "{ADDRESS}={text:?}: expected multus:<network>:<annotations file>"
                )),
            },
            _ => Err(format!(
                "{ADDRESS}={text:?}: expected literal:<address>, env:<variable> or multus:<network>:<file>"
            )),
        }
    }
}

/// The first IP Multus reports for `network` in a `network-status` annotation value
/// (a JSON list of `{name, interface, ips, default}`), with the interface name.
/// `network` may omit the namespace, which then matches any namespace.
pub fn multus_address(network_status: &str, network: &str) -> Option<(String, Option<String>)> {
    let entries: Vec<serde_json::Value> = serde_json::from_str(network_status).ok()?;
    entries.iter().find_map(|entry| {
        let name = entry.get("name")?.as_str()?;
        let matches =
            name == network || (!network.contains('/') && name.rsplit('/').next() == Some(network));
        if !matches {
            return None;
        }
        let ip = entry.get("ips")?.as_array()?.first()?.as_str()?.to_owned();
        let interface = entry
            .get("interface")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        Some((ip, interface))
    })
}

/// The value of `key` in a downward-API annotations file (`key="escaped value"` lines).
pub fn annotation_from_file(contents: &str, key: &str) -> Option<String> {
    contents.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        if k != key {
            return None;
        }
        // The downward API writes Go-quoted strings; JSON string syntax covers them.
        serde_json::from_str::<String>(v).ok()
    })
}

/// Where the value of an agent's variable comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvValue {
    Text(String),
    /// A field of the pod the kubelet fills in (downward API; pods only).
    PodField(&'static str),
}

/// What differs between where agents run; the rest of their environment is the plan's.
#[derive(Clone, Debug)]
pub struct Site<'a> {
    /// Control endpoints of every process, by role.
    pub peers: &'a PeerEndpoints,
    pub control_port: u16,
    pub address: &'a AddressSource,
    /// A variable the address source reads and where it comes from (the pod's IP).
    pub address_variable: Option<(&'a str, EnvValue)>,
    pub workdir: String,
    /// Where the plan's volumes are, when they are not mounted (local runs).
    pub volumes_dir: Option<String>,
    pub host: EnvValue,
    pub mtu: Option<u32>,
}

/// The environment the agent of process `index` of `role` starts with: the contract of
/// this module, built once for both backends (the pod renderer and the local runner add
/// only how secrets and the launch token arrive, which differ by nature).
pub fn environment(
    plan: &crate::execution::plan::Plan,
    role: &str,
    index: u32,
    site: &Site<'_>,
) -> Result<Vec<(String, EnvValue)>, serde_json::Error> {
    let text = |name: &str, value: String| (name.to_owned(), EnvValue::Text(value));
    let mut env = vec![
        text(PLAN, serde_json::to_string(plan)?),
        text(ROLE, role.to_owned()),
        text(INDEX, index.to_string()),
        text(PEERS, serde_json::to_string(site.peers)?),
        text(CONTROL_PORT, site.control_port.to_string()),
        text(ADDRESS, site.address.to_string()),
    ];
    if let Some((name, value)) = &site.address_variable {
        env.push(((*name).to_owned(), value.clone()));
    }
    env.push(text(WORKDIR, site.workdir.clone()));
    if let Some(dir) = &site.volumes_dir {
        env.push(text(VOLUMES_DIR, dir.clone()));
    }
    env.push((HOST.to_owned(), site.host.clone()));
    if let Some(mtu) = site.mtu {
        env.push(text(MTU, mtu.to_string()));
    }
    Ok(env)
}

/// Where the result role's agent writes its report and evidence for a `pvc://` output
/// location: `{volume:export}/<path>` (see
/// [`crate::execution::output::export_into_claim`]).
pub const EXPORT_DIR: &str = "PERFSWEEP_EXPORT_DIR";
/// The run directory under [`EXPORT_DIR`] (`<benchmark>-<uid prefix>`, as the operator's
/// object storage export names runs), set by rendering.
pub const EXPORT_RUN: &str = "PERFSWEEP_EXPORT_RUN";
/// The benchmark's name, the report's file name, set by rendering.
pub const EXPORT_NAME: &str = "PERFSWEEP_EXPORT_NAME";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_sources_round_trip() {
        for text in [
            "literal:127.0.0.1",
            "env:POD_IP",
            "multus:default/sriov:/etc/podinfo/annotations",
        ] {
            let source: AddressSource = text.parse().expect("parses");
            assert_eq!(source.to_string(), text);
        }
        assert!("multus:net".parse::<AddressSource>().is_err());
        assert!("bogus".parse::<AddressSource>().is_err());
    }

    #[test]
    fn reads_multus_network_status() {
        let status = r#"[{"name":"cilium","interface":"eth0","ips":["10.0.0.5"],"default":true},
            {"name":"default/sriov-net","interface":"net1","ips":["192.168.10.7"],"mac":"aa"}]"#;
        assert_eq!(
            multus_address(status, "default/sriov-net"),
            Some(("192.168.10.7".into(), Some("net1".into())))
        );
        assert_eq!(
            multus_address(status, "sriov-net").map(|a| a.0),
            Some("192.168.10.7".into())
        );
        assert_eq!(multus_address(status, "other/sriov-net"), None);
        assert_eq!(multus_address("not json", "x"), None);
    }

    #[test]
    fn reads_downward_api_annotation_files() {
        let file = "kubernetes.io/config.seen=\"2026-11-21\"\nk8s.v1.cni.cncf.io/network-status=\"[{\\\"name\\\":\\\"n\\\"}]\"\n";
        assert_eq!(
            annotation_from_file(file, "k8s.v1.cni.cncf.io/network-status"),
            Some(r#"[{"name":"n"}]"#.into())
        );
        assert_eq!(annotation_from_file(file, "missing"), None);
    }

    #[test]
    fn both_sites_get_the_same_contract() {
        let iperf = crate::kinds::registry::lookup("IPerf").expect("registered");
        let plan = iperf
            .plan(&serde_json::json!({"duration": 1}))
            .expect("a plan");
        let peers = PeerEndpoints::from([("server".to_owned(), vec!["s:7470".to_owned()])]);
        let pod_ip = AddressSource::Env("POD_IP".into());
        let literal = AddressSource::Literal("127.9.0.2".into());
        let pod = Site {
            peers: &peers,
            control_port: DEFAULT_CONTROL_PORT,
            address: &pod_ip,
            address_variable: Some(("POD_IP", EnvValue::PodField("status.podIP"))),
            workdir: "/work".into(),
            volumes_dir: None,
            host: EnvValue::PodField("spec.nodeName"),
            mtu: Some(9000),
        };
        let local = Site {
            address: &literal,
            address_variable: None,
            volumes_dir: Some("/tmp/v".into()),
            host: EnvValue::Text("here".into()),
            mtu: None,
            ..pod.clone()
        };
        let names = |site: &Site<'_>| -> Vec<String> {
            environment(&plan, "client", 0, site)
                .expect("serializable")
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let contract = [PLAN, ROLE, INDEX, PEERS, CONTROL_PORT, ADDRESS, WORKDIR];
        for site in [&pod, &local] {
            let names = names(site);
            for name in contract.iter().chain([&HOST]) {
                assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
            }
        }
        assert!(names(&pod).iter().any(|n| n == MTU));
        assert!(names(&pod).iter().any(|n| n == "POD_IP"));
        assert!(names(&local).iter().any(|n| n == VOLUMES_DIR));
        let env = environment(&plan, "client", 0, &local).expect("serializable");
        let plan_text = env.iter().find(|(n, _)| n == PLAN).map(|(_, v)| v.clone());
        let Some(EnvValue::Text(text)) = plan_text else {
            panic!("the plan is text: {plan_text:?}")
        };
        assert_eq!(
            serde_json::from_str::<crate::execution::plan::Plan>(&text)
                .expect("the plan reads back"),
            plan
        );
    }
}
