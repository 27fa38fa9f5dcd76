//! Fields shared by every benchmark kind: image, networking, placement and scheduling.
//!
//! Each kind's spec embeds [`CommonSpec`] with `#[serde(flatten)]`, so these fields sit
//! beside the kind's own fields exactly as kube-perftest users wrote them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When the kubelet pulls the benchmark image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImagePullPolicy {
    Always,
    #[default]
    IfNotPresent,
    Never,
}

impl ImagePullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// Which scheduler places the benchmark's pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// Volcano gang-schedules all pods of a benchmark together through a PodGroup, so no
    /// role starts (and skews the measurement) while another is still waiting for a node.
    #[default]
    Volcano,
    /// The cluster's default scheduler: no gang guarantee. Use it where Volcano is not
    /// installed; the benchmark's status says that pods may start at different times.
    Default,
}

/// Node placement for one role of a benchmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolePlacement {
    /// Exact nodes for this role's pods, in replica order (replica i runs on
    /// `nodes[i % len]`). Overrides the default anti-affinity between roles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Extra node labels this role's pods must match, on top of `nodeSelector`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
}

/// Fields every benchmark kind accepts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonSpec {
    /// Container image for the benchmark pods. Defaults to perfsweep's published image
    /// for this kind, at the operator's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,

    /// Pull policy for the benchmark image (Always, IfNotPresent, Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,

    /// Run the pods in the host's network namespace (with dnsPolicy
    /// ClusterFirstWithHostNet). Measures the node's own NICs without the CNI overlay.
    #[serde(default)]
    pub host_network: bool,

    /// A Multus NetworkAttachmentDefinition, as `name` or `namespace/name`, attached as a
    /// secondary interface. Benchmark traffic is sent over this attachment's address.
    /// Ignored when hostNetwork is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
    ))]
    pub network_name: Option<String>,

    /// Interface name for the secondary attachment inside the pod (Multus JSON form,
    /// e.g. `net1`). Defaults to the name Multus assigns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_.-]{1,15}$"))]
    pub network_interface: Option<String>,

    /// Also set Multus's default-network annotation to this attachment, replacing the
    /// pod's primary network as kube-perftest did. Only meaningful with networkName.
    #[serde(default)]
    pub default_network: bool,

    /// MTU for the interface the benchmark actually uses inside the pod (the secondary
    /// attachment, or eth0). Never applied to the host's interface under hostNetwork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 576, max = 65535))]
    pub mtu: Option<u32>,

    /// Resources for the benchmark containers, including device resources such as
    /// SR-IOV virtual functions, RDMA shared devices or GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Node labels every benchmark pod must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Tolerations for every benchmark pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,

    /// Affinity for every benchmark pod. When set, it replaces the default anti-affinity
    /// that keeps the roles of a network benchmark on different nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Explicit placement per role (for example `server` and `client`), keyed by role name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<BTreeMap<String, RolePlacement>>,

    /// `volcano` (default: all pods start together or not at all) or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,

    /// Volcano queue for the benchmark's PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub queue: Option<String>,

    /// PriorityClass for the benchmark pods and PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,

    /// How long the benchmark may take from creation to a result, as a duration such as
    /// `90s`, `15m` or `1h30m`. Unschedulable pods past this time fail the benchmark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub timeout: Option<String>,
}

/// The timeout used when a benchmark does not set one.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

impl CommonSpec {
    /// The effective timeout, from `timeout` or [`DEFAULT_TIMEOUT`].
    pub fn timeout(&self) -> Result<std::time::Duration, crate::duration::DurationError> {
        match &self.timeout {
            Some(text) => crate::duration::parse(text),
            None => Ok(DEFAULT_TIMEOUT),
        }
    }

    /// The network the benchmark traffic uses, for results and status.
    pub fn network_mode(&self) -> NetworkMode {
        if self.host_network {
            NetworkMode::Host
        } else if let Some(name) = &self.network_name {
            NetworkMode::Multus(name.clone())
        } else {
            NetworkMode::Pod
        }
    }
}

/// The network a benchmark's traffic crosses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkMode {
    /// The cluster's CNI (pod network).
    Pod,
    /// The nodes' own network namespace.
    Host,
    /// A Multus secondary attachment, by `name` or `namespace/name`.
    Multus(String),
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pod => f.write_str("pod"),
            Self::Host => f.write_str("host"),
            Self::Multus(name) => write!(f, "multus:{name}"),
        }
    }
}
