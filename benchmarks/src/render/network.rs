//! Which network the benchmark traffic crosses, and how a pod is attached to it: the pod
//! network, the node's (hostNetwork), or a Multus attachment, either secondary
//! (`k8s.v1.cni.cncf.io/networks`) or replacing the pod network
//! (`v1.multus-cni.io/default-network`, as kube-perftest did).
//!
//! The annotation syntax follows Multus (k8snetworkplumbingwg/multus-cni `95a0932`,
//! `parsePodNetworkAnnotation` in `pkg/k8sclient/k8sclient.go`); [`parse_selection`]
//! is a port of that parser, so tests check rendered annotations against what Multus
//! accepts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::execution::agent_env::AddressSource;
use crate::kinds::common::CommonSpec;

use super::{RenderError, invalid};

/// Secondary attachments of a pod (Multus, and the Network Plumbing WG's spec).
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// Replaces the pod's cluster network (Multus only).
pub const DEFAULT_NETWORK_ANNOTATION: &str = "v1.multus-cni.io/default-network";
/// Where Multus reports each attachment's interface and addresses.
pub const NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";

/// The downward-API volume that exposes the pod's annotations to the agent.
pub const PODINFO_VOLUME: &str = "podinfo";
pub const PODINFO_DIR: &str = "/etc/podinfo";
/// The file (in [`PODINFO_DIR`]) holding `metadata.annotations`.
pub const ANNOTATIONS_FILE: &str = "/etc/podinfo/annotations";

/// The variable the downward API fills with `status.podIP`.
pub const POD_IP_ENV: &str = "POD_IP";

/// How a benchmark's pods are networked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkPlan {
    pub host_network: bool,
    /// Pod annotations that request the attachment.
    pub annotations: BTreeMap<String, String>,
    /// How the agent finds the address peers send benchmark traffic to.
    pub address: AddressSource,
    /// Whether the pod needs its annotations as a file ([`ANNOTATIONS_FILE`]): Multus
    /// writes the attachment's address into `network-status` only after the pod starts,
    /// so it cannot be an environment variable.
    pub needs_podinfo: bool,
}

/// The network of a benchmark with these common fields.
pub fn plan(common: &CommonSpec) -> Result<NetworkPlan, RenderError> {
    // The CRD rejects these combinations; render checks again because a spec that gets
    // here some other way would otherwise be silently half-applied.
    if common.host_network && common.network_name.is_some() {
        return Err(invalid(
            "spec.networkName",
            "a Multus attachment cannot be combined with hostNetwork",
        ));
    }
    if common.host_network && common.mtu.is_some() {
        return Err(invalid(
            "spec.mtu",
            "the MTU is set inside the pod and never on the host's interface: it cannot be combined with hostNetwork",
        ));
    }
    let pod_ip = AddressSource::Env(POD_IP_ENV.to_owned());
    let Some(network) = &common.network_name else {
        // Pod network or hostNetwork: status.podIP is the address either way (the node's
        // address under hostNetwork).
        return Ok(NetworkPlan {
            host_network: common.host_network,
            annotations: BTreeMap::new(),
            address: pod_ip,
            needs_podinfo: false,
        });
    };
    if common.default_network {
        // Only the default-network annotation: attaching the same network again as a
        // secondary interface would take a second device (an SR-IOV VF) per pod and give
        // the pod two addresses on one subnet. The replaced primary network's address
        // is status.podIP. No interface is requested: the runtime reads the pod IP
        // from `eth0`, and Multus would rename the primary interface to the request.
        // A plain name is looked up in Multus's own namespace (kube-system), as
        // kube-perftest's users relied on; `namespace/name` names it exactly.
        let annotation = selection_annotation(network, None)?;
        return Ok(NetworkPlan {
            host_network: false,
            annotations: BTreeMap::from([(DEFAULT_NETWORK_ANNOTATION.to_owned(), annotation)]),
            address: pod_ip,
            needs_podinfo: false,
        });
    }
    let annotation = selection_annotation(network, common.network_interface.as_deref())?;
    Ok(NetworkPlan {
        host_network: false,
        annotations: BTreeMap::from([(NETWORKS_ANNOTATION.to_owned(), annotation)]),
        address: AddressSource::Multus {
            network: network.clone(),
            annotations_file: ANNOTATIONS_FILE.to_owned(),
        },
        needs_podinfo: true,
    })
}

/// One element of Multus's JSON selection form (`NetworkSelectionElement` in Multus's
/// `pkg/types/types.go`; only the fields perfsweep writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkSelection {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

/// The annotation value selecting `network` (`name` or `namespace/name`): the plain form
/// where Multus's comma-separated syntax can express it, otherwise the JSON form — when
/// an interface is requested, or a name has a dot (NetworkAttachmentDefinition names
/// are DNS subdomains, but the plain form accepts only DNS labels).
pub fn selection_annotation(network: &str, interface: Option<&str>) -> Result<String, RenderError> {
    let (namespace, name) = match network.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, network),
    };
    if name.is_empty() || name.contains('/') || namespace.is_some_and(str::is_empty) {
        return Err(invalid(
            "spec.networkName",
            format!("{network:?} must be name or namespace/name"),
        ));
    }
    if let Some(interface) = interface {
        check_interface(interface).map_err(|m| invalid("spec.networkInterface", m))?;
    }
    let plain = interface.is_none()
        && super::is_dns1123_label(name)
        && namespace.is_none_or(super::is_dns1123_label);
    if plain {
        return Ok(network.to_owned());
    }
    let selection = [NetworkSelection {
        name: name.to_owned(),
        namespace: namespace.map(str::to_owned),
        interface: interface.map(str::to_owned),
    }];
    serde_json::to_string(&selection).map_err(|e| invalid("spec.networkName", e))
}

/// Multus's interface-name rule (shorter than `IFNAMSIZ`, no `/` or whitespace).
fn check_interface(interface: &str) -> Result<(), String> {
    if interface.is_empty()
        || interface.len() > 15
        || interface.contains(|c: char| c == '/' || c.is_whitespace())
    {
        return Err(format!(
            "interface name {interface:?} must be 1 to 15 characters without '/' or spaces"
        ));
    }
    Ok(())
}

/// Parses a selection annotation as Multus 95a0932 does (`parsePodNetworkAnnotation`):
/// JSON when it contains `[`, `{` or `"`, otherwise comma-separated
/// `[namespace/]name[@interface]` items whose names are DNS labels. Stricter than
/// Multus in two ways that matter to perfsweep: an element without a name (which
/// Multus accepts, then fails to look up) and a JSON key Multus does not read (which it
/// silently ignores) are errors.
pub fn parse_selection(annotation: &str) -> Result<Vec<NetworkSelection>, String> {
    if annotation.is_empty() {
        return Err("empty network selection".into());
    }
    let selections = if annotation.contains(['[', '{', '"']) {
        parse_json_selection(annotation)?
    } else {
        annotation
            .split(',')
            .map(|item| parse_plain_item(item.trim()))
            .collect::<Result<Vec<_>, _>>()?
    };
    for selection in &selections {
        if selection.name.is_empty() {
            return Err("a network selection without a name".into());
        }
        if let Some(interface) = &selection.interface {
            check_interface(interface)?;
        }
    }
    Ok(selections)
}

/// The keys of Multus's `NetworkSelectionElement`.
const MULTUS_KEYS: &[&str] = &[
    "name",
    "namespace",
    "ips",
    "mac",
    "infiniband-guid",
    "interface",
    "interfaceRequest",
    "portMappings",
    "bandwidth",
    "deviceID",
    "cni-args",
    "default-route",
];

fn parse_json_selection(annotation: &str) -> Result<Vec<NetworkSelection>, String> {
    // Multus unmarshals into a list; a single object is an error there too.
    let elements: Vec<serde_json::Map<String, Value>> = serde_json::from_str(annotation)
        .map_err(|e| format!("not a JSON list of network selection objects: {e}"))?;
    elements
        .into_iter()
        .map(|element| {
            if let Some(key) = element.keys().find(|k| !MULTUS_KEYS.contains(&k.as_str())) {
                return Err(format!("Multus does not read the key {key:?}"));
            }
            let text = |key: &str| -> Result<Option<String>, String> {
                match element.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(other) => Err(format!("{key:?} must be a string, got {other}")),
                }
            };
            Ok(NetworkSelection {
                name: text("name")?.unwrap_or_default(),
                namespace: text("namespace")?.filter(|s| !s.is_empty()),
                // Multus falls back to the pre-3.2 key when `interface` is unset.
                interface: text("interface")?
                    .filter(|s| !s.is_empty())
                    .or(text("interfaceRequest")?.filter(|s| !s.is_empty())),
            })
        })
        .collect()
}

/// `parsePodNetworkObjectName`: `[namespace/]name[@interface]`.
fn parse_plain_item(item: &str) -> Result<NetworkSelection, String> {
    let parts: Vec<&str> = item.split('/').collect();
    let (namespace, rest) = match parts.as_slice() {
        [name] => ("", *name),
        [namespace, name] => (namespace.trim(), *name),
        _ => return Err(format!("{item:?}: invalid network object (failed at '/')")),
    };
    let at: Vec<&str> = rest.split('@').collect();
    let (name, interface) = match at.as_slice() {
        [name] => (name.trim(), ""),
        [name, interface] => (name.trim(), interface.trim()),
        _ => return Err(format!("{item:?}: invalid network object (failed at '@')")),
    };
    for part in [namespace, name] {
        if !part.is_empty() && !is_label_shape(part) {
            return Err(format!(
                "{item:?}: {part:?} must consist of lower case alphanumeric characters or '-' and start and end with an alphanumeric character"
            ));
        }
    }
    Ok(NetworkSelection {
        name: name.to_owned(),
        namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
        interface: (!interface.is_empty()).then(|| interface.to_owned()),
    })
}

/// Multus's `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` (no length limit there).
fn is_label_shape(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(name: &str, namespace: Option<&str>, interface: Option<&str>) -> NetworkSelection {
        NetworkSelection {
            name: name.into(),
            namespace: namespace.map(Into::into),
            interface: interface.map(Into::into),
        }
    }

    #[test]
    fn plain_and_json_forms() {
        assert_eq!(selection_annotation("sriov", None).as_deref(), Ok("sriov"));
        assert_eq!(
            selection_annotation("default/mlnx-net", None).as_deref(),
            Ok("default/mlnx-net")
        );
        assert_eq!(
            selection_annotation("ns/net", Some("net1")).as_deref(),
            Ok(r#"[{"name":"net","namespace":"ns","interface":"net1"}]"#)
        );
        // A dotted name is a valid object name but not valid in the plain form.
        assert_eq!(
            selection_annotation("sriov.v2", None).as_deref(),
            Ok(r#"[{"name":"sriov.v2"}]"#)
        );
        assert!(selection_annotation("a/b/c", None).is_err());
        assert!(selection_annotation("/b", None).is_err());
        assert!(selection_annotation("net", Some("much-too-long-name")).is_err());
    }

    #[test]
    fn every_rendered_form_parses_back_as_multus_reads_it() {
        let cases = [
            ("sriov", None, selection("sriov", None, None)),
            (
                "default/mlnx-net",
                None,
                selection("mlnx-net", Some("default"), None),
            ),
            (
                "ns/net",
                Some("net1"),
                selection("net", Some("ns"), Some("net1")),
            ),
            ("sriov.v2", None, selection("sriov.v2", None, None)),
            (
                "kube-system/x.y",
                Some("hs0"),
                selection("x.y", Some("kube-system"), Some("hs0")),
            ),
        ];
        for (network, interface, expected) in cases {
            let annotation = selection_annotation(network, interface).expect("renders");
            assert_eq!(
                parse_selection(&annotation),
                Ok(vec![expected]),
                "{annotation}"
            );
        }
    }

    #[test]
    fn the_parser_rejects_what_multus_rejects() {
        for bad in [
            "",
            "a/b/c",
            "net@if@x",
            "Net",
            "net.v2",
            "-net",
            "ns_x/net",
            "net@much-too-long-name",
            r#"{"name":"net"}"#,
            r#"[{"name":"net","interfaces":"net1"}]"#,
            r#"[{"namespace":"ns"}]"#,
            r#"[{"name":1}]"#,
        ] {
            assert!(parse_selection(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            parse_selection(" a , ns/b@net2 "),
            Ok(vec![
                selection("a", None, None),
                selection("b", Some("ns"), Some("net2"))
            ])
        );
        assert_eq!(
            parse_selection(r#"[{"name":"a","interfaceRequest":"old0"}]"#),
            Ok(vec![selection("a", None, Some("old0"))])
        );
    }
}
