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
    /// `nodes[i % len]`). Overrides the default anti-affinity between roles; except that
    /// several replicas of a role that spreads (workers, servers) listed with at least as
    /// many nodes go one per listed node, the scheduler choosing which (an MPI node pair's
    /// two workers).
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
    /// SR-IOV virtual functions, RDMA shared devices or GPUs. Without a request or limit
    /// for cpu or memory a container requests 100m CPU and 64Mi memory, so Volcano
    /// admits the gang by what it needs (set either to override, 0 included).
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

    /// Acceptance criteria on this benchmark's results, e.g.
    /// `[{metric: received_bits_per_second, min: 9.0e9}]`. When set, the `Accepted`
    /// condition says whether a succeeded result met every one (and if not, which
    /// missed and by how much). Not part of the workload: criteria do not change the
    /// spec digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub acceptance: Vec<crate::judging::acceptance::Criterion>,

    /// Where the operator exports the result record (JSON Lines and Parquet) and the
    /// raw evidence when the benchmark finishes, as OME's BenchmarkJob
    /// `outputLocation`: `{storageUri: s3://bucket/prefix, parameters: {endpoint: ...},
    /// secretName: credentials}`. The `Exported` condition reports the upload; a failed
    /// upload loses nothing (status and the evidence ConfigMap stay). Not part of the
    /// workload: it does not change the spec digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_location: Option<crate::execution::output::OutputLocation>,
}

/// The timeout used when a benchmark does not set one.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_mins(30);

impl CommonSpec {
    /// The effective timeout, from `timeout` or [`DEFAULT_TIMEOUT`].
    pub fn timeout(&self) -> Result<std::time::Duration, crate::formats::duration::DurationError> {
        match &self.timeout {
            Some(text) => crate::formats::duration::parse(text),
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

/// Defaults an operator installation applies to benchmarks that leave these fields
/// unset (the chart's `benchmarkDefaults`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterDefaults {
    /// Registry path benchmark images come from instead of perfsweep's (for mirrors and
    /// air-gapped clusters), e.g. `registry.example.com/perfsweep`.
    pub image_registry: Option<String>,
    pub scheduler: Option<Scheduler>,
    /// Volcano queue for benchmarks scheduled by Volcano.
    pub queue: Option<String>,
}

impl ClusterDefaults {
    /// Fills unset fields of `spec` (a benchmark spec as JSON). `image` gives the kind's
    /// image under a registry.
    pub fn apply(&self, spec: &mut serde_json::Value, image: impl FnOnce(&str) -> String) {
        let Some(fields) = spec.as_object_mut() else {
            return;
        };
        let unset = |fields: &serde_json::Map<String, serde_json::Value>, key: &str| {
            fields.get(key).is_none_or(serde_json::Value::is_null)
        };
        if let Some(registry) = &self.image_registry
            && unset(fields, "image")
        {
            fields.insert("image".into(), image(registry).into());
        }
        if let Some(scheduler) = self.scheduler
            && unset(fields, "scheduler")
        {
            let name = match scheduler {
                Scheduler::Volcano => "volcano",
                Scheduler::Default => "default",
            };
            fields.insert("scheduler".into(), name.into());
        }
        let volcano = fields.get("scheduler").and_then(|s| s.as_str()) != Some("default");
        if let Some(queue) = &self.queue
            && volcano
            && unset(fields, "queue")
        {
            fields.insert("queue".into(), queue.clone().into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_defaults_fill_only_unset_fields() {
        let defaults = ClusterDefaults {
            image_registry: Some("mirror.example/ps".into()),
            scheduler: Some(Scheduler::Volcano),
            queue: Some("bench".into()),
        };
        let mut spec = json!({"streams": 2});
        defaults.apply(&mut spec, |registry| format!("{registry}/iperf:1"));
        assert_eq!(
            spec,
            json!({"streams": 2, "image": "mirror.example/ps/iperf:1", "scheduler": "volcano", "queue": "bench"})
        );

        let mut own = json!({"image": "mine", "scheduler": "default"});
        defaults.apply(&mut own, |_| unreachable!("the spec names its image"));
        assert_eq!(
            own,
            json!({"image": "mine", "scheduler": "default"}),
            "no queue without Volcano"
        );
    }
}
