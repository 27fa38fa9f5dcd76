//! The execution plan: how a benchmark runs, described once for every backend.
//!
//! A kind turns its spec into a [`Plan`]: the roles its processes play, how many of each,
//! what each runs, which ports it listens on, when it is ready, whom it waits for and
//! whose output holds the result. Every process of a plan is run by the `perfsweep agent`
//! — in a pod on Kubernetes, as a local process with `run --local` — so waiting for peers,
//! readiness, running the tool, and parsing its output are written once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything a backend needs to run one benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The benchmark kind, e.g. `IPerf`; selects the parser.
    pub kind: String,
    pub roles: Vec<Role>,
    /// The role whose output the result is parsed from: replica 0's, or, when the role
    /// has several replicas, every replica's, merged by the kind (see
    /// `crate::outcome::evaluate`).
    pub result_role: String,
    /// Seconds from start to result before the benchmark fails.
    pub timeout_seconds: u64,
    /// Kubernetes settings for the pods of some roles, by role name, that replace or add
    /// to the benchmark-wide ones (e.g. a load generator image and its resources).
    /// The local backend has no pods and ignores them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_overrides: BTreeMap<String, PodOverride>,
}

/// Pod settings for one role's pods (OME's `podOverride`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema)]
#[x_kube(validation = kube::core::Rule::new("!has(self.env) || self.env.all(e, !e.name.startsWith('PERFSWEEP_') && !(e.name in ['TMPDIR', 'HOME']))").message("env may not set PERFSWEEP_* variables, TMPDIR or HOME: the agent sets them").field_path(".env"))]
#[serde(rename_all = "camelCase")]
pub struct PodOverride {
    /// The container image, instead of the benchmark's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// The container's resources, instead of the benchmark's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    /// Node labels the pods must match, on top of the benchmark's (this wins on a
    /// shared key).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations added to the benchmark's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// Environment variables added to the container's (values or `valueFrom`, e.g. a
    /// proxy, a CA bundle path, a key from a Secret); the agent's own are reserved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<k8s_openapi::api::core::v1::EnvVar>,
    /// Scheduling affinity, instead of the benchmark's (which spreads replicas over
    /// nodes): with it, where these pods run is entirely its say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<k8s_openapi::api::core::v1::Affinity>,
}

/// One role of a plan, run by `replicas` identical processes (pods).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// e.g. `server`, `client`, `launcher`, `worker`.
    pub name: String,
    pub replicas: u32,
    /// Commands run before `command`, in order, in the same working directory (for
    /// example mesh generation); their output is logged but not parsed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<Command>,
    /// The measured command.
    pub command: Command,
    /// Files written into the working directory before anything runs (job files,
    /// hostfiles); their contents may use the same placeholders as arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PlanFile>,
    /// Ports the role listens on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// When the role counts as ready for the roles that wait for it.
    #[serde(default)]
    pub ready_when: Readiness,
    /// Roles that must be ready (every replica) before this role starts its command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_for: Vec<String>,
    /// Whether this role's exit ends the benchmark, or it serves until the end.
    pub lifetime: Lifetime,
    /// Whether the role gets the spec's device resources (SR-IOV VFs, RDMA devices,
    /// GPUs). A launcher that only starts remote ranks does not.
    #[serde(default)]
    pub uses_devices: bool,
    /// Linux capabilities the tool needs beyond none (e.g. `IPC_LOCK` for RDMA).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Extra environment for the commands.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Environment variables whose values come from Secrets (API keys, tokens): never
    /// in the plan, arguments, logs or status. See [`SecretEnv`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<SecretEnv>,
    /// Volumes the role's processes mount (the storage a benchmark measures). Any role
    /// may name where another role's volume is mounted with `{volume:NAME}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<RoleVolume>,
}

/// An environment variable of a role's processes taken from a key of a user's Secret.
///
/// On Kubernetes it is the agent container's `valueFrom.secretKeyRef` (the kubelet
/// resolves it; the controller never reads the Secret), and the tool inherits it from
/// the agent. The local backend has no Secrets: it copies the value from its own
/// environment variable [`SecretEnv::local_variable`] and fails before starting
/// anything when that is unset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretEnv {
    /// The variable the processes see.
    pub name: String,
    /// The Secret, in the benchmark's namespace.
    pub secret: String,
    /// The key within the Secret.
    pub key: String,
    /// A missing key leaves the variable unset instead of failing the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl SecretEnv {
    /// `PERFSWEEP_SECRET_<SECRET>_<KEY>`, upper-cased, other characters as `_`: where a
    /// local run finds the value.
    pub fn local_variable(&self) -> String {
        let clean = |s: &str| {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        };
        format!(
            "PERFSWEEP_SECRET_{}_{}",
            clean(&self.secret),
            clean(&self.key)
        )
    }
}

/// A volume mounted into every process of a role.
///
/// On Kubernetes it is a pod volume mounted at `mount_path`; on the local backend every
/// volume name is one directory under the run's scratch space, shared by all processes
/// (they are on one filesystem anyway), so `{volume:NAME}` is the same path for every
/// process on both backends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleVolume {
    /// A DNS label, unique within the plan unless the same volume is meant (a shared
    /// claim mounted by several roles).
    pub name: String,
    /// Absolute path inside the pod.
    pub mount_path: String,
    pub source: VolumeSource,
}

/// Where a volume's storage comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VolumeSource {
    /// Scratch space on the node that lives as long as the process (`emptyDir`).
    Scratch,
    /// PersistentVolumeClaims made from `spec` when the benchmark starts and deleted
    /// when it ends (and owned by it, so deleting the benchmark deletes them too).
    NewClaim {
        spec: Box<k8s_openapi::api::core::v1::PersistentVolumeClaimSpec>,
        scope: ClaimScope,
    },
    /// A claim that already exists: mounted, never created nor deleted.
    ExistingClaim { claim_name: String },
    /// An existing ConfigMap, its keys as files (read-only; input files such as a
    /// tokenizer or a dataset). The local backend has no ConfigMaps: there the volume
    /// is an empty directory, and a program looking for a key finds it missing.
    ConfigMap { name: String },
    /// An existing Secret, its keys as files (read-only; credentials such as a CA
    /// bundle). Like [`VolumeSource::ConfigMap`], an empty directory on the local backend.
    Secret { name: String },
}

/// How many claims a [`VolumeSource::NewClaim`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimScope {
    /// One claim per process (`<benchmark>-<role>-<index>-<volume>`), as
    /// ReadWriteOnce storage needs.
    PerReplica,
    /// One claim (`<benchmark>-<volume>`) mounted by every process that names the
    /// volume, as ReadWriteMany storage allows.
    Shared,
}

/// The [`PeerAddresses`] key `{volume:NAME}` resolves with.
pub fn volume_key(name: &str) -> String {
    format!("volume:{name}")
}

/// A program and its arguments, passed as an argument vector (never through a shell).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Looked up on `PATH`.
    pub program: String,
    /// The Debian package that provides `program`, named in errors when it is missing.
    pub package: String,
    /// Arguments; see [`Arg`] for placeholders.
    #[serde(default)]
    pub args: Vec<Arg>,
}

/// One argument, or a placeholder the agent fills in once peers are known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Arg {
    /// Used as is. `{peer:ROLE:INDEX}` inside it is replaced by that replica's address.
    Literal(String),
    /// One argument per replica of `role`: `format` with `{address}` replaced.
    PerPeer { role: String, format: String },
}

impl Arg {
    pub fn lit(text: impl Into<String>) -> Self {
        Self::Literal(text.into())
    }
}

/// A file the agent writes before running the role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFile {
    /// Relative to the working directory.
    pub path: String,
    /// May contain `{peer:ROLE:INDEX}` and `{peers:ROLE}` (one address per line).
    pub contents: String,
}

/// A port a role listens on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    pub name: String,
    pub port: u16,
    #[serde(default)]
    pub protocol: PortProtocol,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortProtocol {
    #[default]
    TCP,
    UDP,
}

/// When a role is ready for the roles that wait for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Readiness {
    /// As soon as its command has started.
    #[default]
    Started,
    /// When something accepts TCP connections on this port of its data address.
    Listening(u16),
}

/// How long a role's processes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifetime {
    /// The command runs to completion; when the result role's replica 0 exits, the
    /// benchmark is over.
    RunToCompletion,
    /// The command serves others and is stopped when the benchmark is over.
    Serve,
}

/// A plan that cannot be made from a spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{kind} benchmarks cannot run yet: their execution plan is not implemented")]
    NotImplemented { kind: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl Plan {
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name == name)
    }

    /// Whether the plan's processes must accept commands from [`RSH_AGENT`],
    /// authenticated with a per-benchmark token (on Kubernetes a Secret the controller
    /// fills with random bytes, locally a random token of the run): true when a command
    /// hands [`RSH_AGENT`] to a launcher.
    pub fn remote_launch(&self) -> bool {
        self.roles.iter().any(|role| {
            role.setup
                .iter()
                .chain(std::iter::once(&role.command))
                .flat_map(|c| &c.args)
                .any(|arg| matches!(arg, Arg::Literal(text) if text == RSH_AGENT))
        })
    }

    /// Total processes (pods) of the plan.
    pub fn process_count(&self) -> u32 {
        self.roles.iter().map(|r| r.replicas).sum()
    }

    /// Every (role, replica index) of the plan, in role order.
    pub fn processes(&self) -> impl Iterator<Item = (&Role, u32)> {
        self.roles
            .iter()
            .flat_map(|role| (0..role.replicas).map(move |index| (role, index)))
    }

    /// Where each volume of the plan is, by name, as `{volume:NAME}` resolves: its mount
    /// path in pods, or `root/NAME` when a backend keeps volumes in one directory (the
    /// local backend). Keys are [`volume_key`]s, ready to extend [`PeerAddresses`].
    pub fn volume_paths(&self, root: Option<&std::path::Path>) -> PeerAddresses {
        let mut paths = PeerAddresses::new();
        for volume in self.roles.iter().flat_map(|r| &r.volumes) {
            let path = match root {
                Some(root) => root.join(&volume.name).display().to_string(),
                None => volume.mount_path.clone(),
            };
            paths.entry(volume_key(&volume.name)).or_insert(vec![path]);
        }
        paths
    }
}

impl Role {
    /// Roles whose addresses this role's arguments and files refer to.
    pub fn referenced_roles(&self) -> std::collections::BTreeSet<String> {
        let mut texts: Vec<&str> = self.files.iter().map(|f| f.contents.as_str()).collect();
        let mut roles = std::collections::BTreeSet::new();
        for command in self.setup.iter().chain(std::iter::once(&self.command)) {
            for arg in &command.args {
                match arg {
                    Arg::Literal(text) => texts.push(text),
                    Arg::PerPeer { role, .. } => {
                        roles.insert(role.clone());
                    }
                }
            }
        }
        for text in texts {
            for token in text.split('{').skip(1).filter_map(|t| t.split('}').next()) {
                if let ["peer", role, _] | ["peers", role] =
                    token.split(':').collect::<Vec<_>>().as_slice()
                {
                    roles.insert((*role).to_owned());
                }
            }
        }
        roles
    }
}

/// The name of a process (pod hostname): `<role>-<index>`.
pub fn process_name(role: &str, index: u32) -> String {
    format!("{role}-{index}")
}

/// Addresses of the processes of a plan, by role; what placeholders resolve to. The
/// key [`SELF`] holds the process's own address.
pub type PeerAddresses = BTreeMap<String, Vec<String>>;

/// The [`PeerAddresses`] key of the process's own address, written `{self}` in
/// arguments (for tools that bind a specific address, like `fio --server`).
pub const SELF: &str = "self";

/// The [`PeerAddresses`] key of the name of the network interface that carries the
/// process's own address, written `{interface}` (for tools that select interfaces by
/// name, like Open MPI's `btl_tcp_if_include`).
pub const INTERFACE: &str = "interface";

/// The [`PeerAddresses`] key of the process's replica index within its role, written
/// `{index}` (for processes of one role that each take their own share of the work).
pub const INDEX: &str = "index";

/// The [`PeerAddresses`] key of the control endpoints (`host:port`) of `role`'s
/// replicas, written `{control:ROLE:INDEX}`: where a command reaches another process's
/// agent (for example the barrier that starts distributed load generators together).
pub fn control_key(role: &str) -> String {
    format!("control:{role}")
}

/// A command whose program is this is run as the agent's own executable (`perfsweep`
/// subcommands such as `rsh` and `mpi-rank`), found without `PATH`.
pub const AGENT_PROGRAM: &str = "perfsweep";

/// The remote shell an MPI launcher is given (`mpirun --mca plm_rsh_agent "perfsweep rsh"`):
/// `perfsweep rsh HOST COMMAND...` asks the agent at HOST to run COMMAND. A plan with an
/// argument equal to this launches remotely (see [`Plan::remote_launch`]).
pub const RSH_AGENT: &str = "perfsweep rsh";

/// Why a placeholder cannot be filled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("placeholder {placeholder}: {reason}")]
pub struct PlaceholderError {
    pub placeholder: String,
    pub reason: String,
}

/// Fills the placeholders of `args` with peer addresses.
pub fn resolve_args(args: &[Arg], peers: &PeerAddresses) -> Result<Vec<String>, PlaceholderError> {
    let mut out = Vec::with_capacity(args.len());
    for arg in args {
        match arg {
            Arg::Literal(text) => out.push(fill(text, peers)?),
            Arg::PerPeer { role, format } => {
                let addresses = peers.get(role).ok_or_else(|| PlaceholderError {
                    placeholder: format!("per-peer {role}"),
                    reason: "no such role".into(),
                })?;
                out.extend(addresses.iter().map(|a| format.replace("{address}", a)));
            }
        }
    }
    Ok(out)
}

/// Replaces `{self}`, `{index}`, `{interface}`, `{peer:ROLE:INDEX}`, `{peers:ROLE}`,
/// `{control:ROLE:INDEX}` (from the [`control_key`] entries) and `{volume:NAME}` (from
/// the [`volume_key`] entries of `peers`) in `text`.
pub fn fill(text: &str, peers: &PeerAddresses) -> Result<String, PlaceholderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let Some(end) = after.find('}') else {
            out.push_str(after);
            return Ok(out);
        };
        let token = &after[1..end];
        match token.split(':').collect::<Vec<_>>().as_slice() {
            [INTERFACE] => {
                let own = peers
                    .get(INTERFACE)
                    .and_then(|a| a.first())
                    .ok_or_else(|| PlaceholderError {
                        placeholder: "{interface}".into(),
                        reason: "the interface of the process's own address is not known".into(),
                    })?;
                out.push_str(own);
            }
            [INDEX] => {
                let own =
                    peers
                        .get(INDEX)
                        .and_then(|a| a.first())
                        .ok_or_else(|| PlaceholderError {
                            placeholder: "{index}".into(),
                            reason: "the process's replica index is not known".into(),
                        })?;
                out.push_str(own);
            }
            ["control", role, index] => {
                let endpoint = index
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| peers.get(&control_key(role))?.get(i))
                    .ok_or_else(|| PlaceholderError {
                        placeholder: format!("{{{token}}}"),
                        reason: "no such process".into(),
                    })?;
                out.push_str(endpoint);
            }
            [SELF] => {
                let own =
                    peers
                        .get(SELF)
                        .and_then(|a| a.first())
                        .ok_or_else(|| PlaceholderError {
                            placeholder: "{self}".into(),
                            reason: "the process's own address is not known".into(),
                        })?;
                out.push_str(own);
            }
            ["peer", role, index] => {
                let address = index
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| peers.get(*role)?.get(i))
                    .ok_or_else(|| PlaceholderError {
                        placeholder: format!("{{{token}}}"),
                        reason: "no such peer".into(),
                    })?;
                out.push_str(address);
            }
            ["peers", role] => {
                let addresses = peers.get(*role).ok_or_else(|| PlaceholderError {
                    placeholder: format!("{{{token}}}"),
                    reason: "no such role".into(),
                })?;
                out.push_str(&addresses.join("\n"));
            }
            ["volume", name] => {
                let path = peers
                    .get(&volume_key(name))
                    .and_then(|p| p.first())
                    .ok_or_else(|| PlaceholderError {
                        placeholder: format!("{{{token}}}"),
                        reason: "no role of the plan mounts such a volume".into(),
                    })?;
                out.push_str(path);
            }
            _ => out.push_str(&after[..=end]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers() -> PeerAddresses {
        BTreeMap::from([
            ("server".to_owned(), vec!["10.0.0.1".to_owned()]),
            (
                "worker".to_owned(),
                vec!["10.0.0.2".to_owned(), "10.0.0.3".to_owned()],
            ),
        ])
    }

    #[test]
    fn fills_peer_placeholders() {
        let args = vec![
            Arg::lit("-c"),
            Arg::lit("{peer:server:0}"),
            Arg::PerPeer {
                role: "worker".into(),
                format: "--client={address},8765".into(),
            },
            Arg::lit("{not-a-placeholder}"),
        ];
        assert_eq!(
            resolve_args(&args, &peers()).unwrap(),
            vec![
                "-c",
                "10.0.0.1",
                "--client=10.0.0.2,8765",
                "--client=10.0.0.3,8765",
                "{not-a-placeholder}"
            ]
        );
        assert_eq!(
            fill("{peers:worker}", &peers()).unwrap(),
            "10.0.0.2\n10.0.0.3"
        );
    }

    #[test]
    fn fills_the_index_and_control_endpoints() {
        let mut peers = peers();
        peers.insert(INDEX.into(), vec!["2".into()]);
        peers.insert(
            control_key("worker"),
            vec!["w-0:7470".into(), "w-1:7470".into()],
        );
        assert_eq!(
            fill("--worker {index} --sync {control:worker:1}", &peers).unwrap(),
            "--worker 2 --sync w-1:7470"
        );
        assert!(fill("{control:worker:2}", &peers).is_err());
        assert!(fill("{control:server:0}", &peers).is_err());
        assert!(fill("{index}", &super::PeerAddresses::new()).is_err());
    }

    #[test]
    fn finds_the_roles_a_role_refers_to() {
        let role = Role {
            name: "launcher".into(),
            replicas: 1,
            setup: Vec::new(),
            command: Command {
                program: "mpirun".into(),
                package: "openmpi-bin".into(),
                args: vec![Arg::lit("-H"), Arg::lit("{peer:worker:0},{peer:worker:1}")],
            },
            files: vec![PlanFile {
                path: "hosts".into(),
                contents: "{peers:spare}".into(),
            }],
            ports: Vec::new(),
            ready_when: Readiness::Started,
            waits_for: Vec::new(),
            lifetime: Lifetime::RunToCompletion,
            uses_devices: false,
            capabilities: Vec::new(),
            env: BTreeMap::new(),
            secret_env: Vec::new(),
            volumes: Vec::new(),
        };
        let roles: Vec<String> = role.referenced_roles().into_iter().collect();
        assert_eq!(roles, vec!["spare", "worker"]);
    }

    #[test]
    fn unknown_peers_are_errors() {
        assert!(fill("{peer:server:1}", &peers()).is_err());
        assert!(fill("{peer:client:0}", &peers()).is_err());
        assert!(
            resolve_args(
                &[Arg::PerPeer {
                    role: "x".into(),
                    format: "{address}".into()
                }],
                &peers()
            )
            .is_err()
        );
    }
}
