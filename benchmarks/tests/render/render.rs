//! Rendering: the objects of IPerf benchmarks in every network, placement and scheduling
//! mode, each checked for its specifics and against the real schemas — Volcano's PodGroup
//! CRD, Multus's selection syntax and Kubernetes' own API schemas (through the PyPI tool
//! `kubernetes-validate`, which bundles them) — and for what the agent will read.

use crate::support;

use support::{kubernetes_validate, third_party, to_value, volcano_schema};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Affinity, EnvVar, Pod, PodSpec, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use perfsweep_benchmarks::api::schema::Node;
use perfsweep_benchmarks::api::volcano::{self, PodGroup};
use perfsweep_benchmarks::execution::agent_env::{self, AddressSource, PeerEndpoints};
use perfsweep_benchmarks::execution::plan::Plan;
use perfsweep_benchmarks::formats::yaml;
use perfsweep_benchmarks::input::document::{self, Checked};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::render::network::{
    self, DEFAULT_NETWORK_ANNOTATION, NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION,
};
use perfsweep_benchmarks::render::placement::{NODE_NAME_FIELD, SPREAD_LABEL};
use perfsweep_benchmarks::render::{BenchmarkRef, RenderError, Rendered, render};
use serde_json::{Value, json};

const NAME: &str = "bench";
const NAMESPACE: &str = "perf";
const UID: &str = "6f1c3a52-0d0e-4d59-9a55-3f6f0a1b2c3d";

fn benchmark() -> BenchmarkRef {
    BenchmarkRef {
        kind: "IPerf".into(),
        name: NAME.into(),
        namespace: NAMESPACE.into(),
        uid: UID.into(),
    }
}

/// The IPerf plan of `spec`, after checking that the spec is one admission accepts.
fn iperf_plan(spec: &Value) -> Plan {
    let kind = registry::lookup("IPerf").expect("IPerf is registered");
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": spec,
    });
    let errors = kind.validate(&object);
    assert!(errors.is_empty(), "test spec {spec} is invalid: {errors:?}");
    kind.plan(spec).expect("IPerf has a plan")
}

/// Renders an IPerf benchmark and runs every check that applies to all renderings.
fn render_iperf(spec: Value) -> (Rendered, Plan) {
    let plan = iperf_plan(&spec);
    let rendered = render(&benchmark(), &spec, &plan).expect("renders");
    check_everywhere(&rendered, &plan);
    (rendered, plan)
}

/// Every named scenario of the tests below, for the schema checks that run on all.
fn scenarios() -> Vec<(&'static str, Value)> {
    vec![
        ("pod network", json!({})),
        ("hostNetwork", json!({"hostNetwork": true})),
        (
            "multus name",
            json!({"networkName": "sriov-net", "mtu": 9000}),
        ),
        (
            "multus ns/name + interface",
            json!({"networkName": "hpc/sriov-net", "networkInterface": "net1"}),
        ),
        ("multus dotted name", json!({"networkName": "hpc/sriov.v2"})),
        (
            "defaultNetwork",
            json!({"networkName": "default/mlnx-net", "defaultNetwork": true}),
        ),
        (
            "sriov resources",
            json!({"networkName": "default/mlnx-net",
                   "resources": {"limits": {"nvidia.com/mlnxnet": 1, "cpu": "2", "memory": "1Gi"},
                                 "requests": {"cpu": "1", "memory": "512Mi"}}}),
        ),
        (
            "placement",
            json!({"nodeSelector": {"pool": "bench"},
                   "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}],
                   "placement": {"server": {"nodes": ["node-a"], "nodeSelector": {"nic": "cx6"}},
                                 "client": {"nodes": ["node-b"]}}}),
        ),
        ("scheduler default", json!({"scheduler": "default"})),
        ("user affinity", json!({"affinity": user_affinity()})),
        (
            "queue, priority, timeout, image",
            json!({"queue": "benchmarks", "priorityClassName": "bench-high", "timeout": "90s",
                   "image": "registry.example/iperf:dev", "imagePullPolicy": "Always"}),
        ),
    ]
}

fn user_affinity() -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node-role.kubernetes.io/bench", "operator": "Exists"}]}
    ]}}})
}

fn pod<'a>(rendered: &'a Rendered, name: &str) -> &'a Pod {
    rendered
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn spec_of(pod: &Pod) -> &PodSpec {
    pod.spec.as_ref().expect("pod spec")
}

fn env_of(pod: &Pod) -> BTreeMap<String, EnvVar> {
    spec_of(pod).containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect()
}

fn value_of(pod: &Pod, name: &str) -> Option<String> {
    env_of(pod).get(name).and_then(|e| e.value.clone())
}

fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

fn label(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.labels.as_ref()?.get(key).cloned()
}

// ---------------------------------------------------------------------------------------
// Checks every rendering passes.

fn check_everywhere(rendered: &Rendered, plan: &Plan) {
    assert_eq!(rendered.pods.len() as u32, plan.process_count());
    round_trips(rendered);
    if let Some(group) = &rendered.pod_group {
        let errors = volcano_schema().check_object_root(&to_value(group));
        assert!(
            errors.is_empty(),
            "PodGroup rejected by Volcano's CRD: {errors:?}"
        );
    }
    for pod in &rendered.pods {
        check_owned(&pod.metadata);
        check_agent_contract(pod, plan);
        for key in [NETWORKS_ANNOTATION, DEFAULT_NETWORK_ANNOTATION] {
            if let Some(value) = annotation(pod, key) {
                network::parse_selection(&value)
                    .unwrap_or_else(|e| panic!("Multus would reject {key}: {value}: {e}"));
                if value.starts_with('[') {
                    let errors =
                        selection_schema().check(&serde_json::from_str(&value).expect("JSON"), key);
                    assert!(errors.is_empty(), "{value}: {errors:?}");
                }
            }
        }
    }
    check_owned(&rendered.service.metadata);
    for object in rendered
        .pods
        .iter()
        .map(to_value)
        .chain([to_value(&rendered.service)])
    {
        let errors = api_server_rules(&object);
        assert!(
            errors.is_empty(),
            "{}: {errors:?}",
            object["metadata"]["name"]
        );
    }
    if let Some(group) = &rendered.pod_group {
        check_owned(&group.metadata);
    }
}

/// Owned by the benchmark, labelled as perfsweep's, in its namespace.
fn check_owned(metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    assert_eq!(metadata.namespace.as_deref(), Some(NAMESPACE));
    let labels = metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "perfsweep");
    assert_eq!(labels["app.kubernetes.io/name"], "iperf");
    assert_eq!(labels["perfsweep.io/benchmark"], NAME);
    let owners = metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    let owner = &owners[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("perfsweep.io/v1alpha1", "IPerf", NAME, UID)
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
}

/// The typed k8s-openapi objects survive JSON unchanged (no field lost or renamed).
fn round_trips(rendered: &Rendered) {
    for pod in &rendered.pods {
        let value = to_value(pod);
        assert_eq!(value["apiVersion"], "v1");
        assert_eq!(value["kind"], "Pod");
        let back: Pod = serde_json::from_value(value.clone()).expect("a Pod");
        assert_eq!(&back, pod);
        assert_eq!(to_value(&back), value);
    }
    let value = to_value(&rendered.service);
    let back: Service = serde_json::from_value(value.clone()).expect("a Service");
    assert_eq!(back, rendered.service);
    let policy = rendered
        .network_policy
        .as_ref()
        .expect("a benchmark of its own has its own NetworkPolicy");
    let value = to_value(policy);
    assert_eq!(value["apiVersion"], "networking.k8s.io/v1");
    let back: NetworkPolicy = serde_json::from_value(value).expect("a NetworkPolicy");
    assert_eq!(&back, policy);
    if let Some(group) = &rendered.pod_group {
        let value = to_value(group);
        assert_eq!(value["apiVersion"], "scheduling.volcano.sh/v1beta1");
        assert_eq!(value["kind"], "PodGroup");
        let back: PodGroup = serde_json::from_value(value).expect("a PodGroup");
        assert_eq!(&back, group);
    }
}

/// What the agent reads, resolved as the kubelet would (values, and downward-API fields
/// from a made-up node and pod IP), parses with the contract's own types.
fn check_agent_contract(pod: &Pod, plan: &Plan) {
    let spec = spec_of(pod);
    assert_eq!(spec.containers.len(), 1);
    let container = &spec.containers[0];
    assert_eq!(container.name, "agent");
    assert_eq!(
        container.command.as_deref(),
        Some(&["perfsweep".to_owned(), "agent".to_owned()][..])
    );
    let resolved: BTreeMap<String, String> = env_of(pod)
        .into_iter()
        .map(|(name, var)| {
            let value = match (
                &var.value,
                var.value_from.as_ref().and_then(|f| f.field_ref.as_ref()),
            ) {
                (Some(value), None) => value.clone(),
                (None, Some(field)) => match field.field_path.as_str() {
                    "status.podIP" => "10.1.2.3".into(),
                    "spec.nodeName" => "node-x".into(),
                    other => panic!("{name} reads unexpected field {other}"),
                },
                (None, None)
                    if var
                        .value_from
                        .as_ref()
                        .and_then(|f| f.secret_key_ref.as_ref())
                        .is_some_and(|secret| {
                            secret.name == agent_env::launch_secret_name(NAME)
                                && secret.key == agent_env::LAUNCH_SECRET_KEY
                        }) =>
                {
                    "the benchmark's token".into()
                }
                _ => panic!("{name} has neither a value nor a field reference"),
            };
            (name, value)
        })
        .collect();
    let get = |name: &str| {
        resolved.get(name).unwrap_or_else(|| {
            panic!(
                "{} lacks {name}",
                pod.metadata.name.as_deref().unwrap_or("?")
            )
        })
    };
    let parsed: Plan = serde_json::from_str(get(agent_env::PLAN)).expect("PLAN is a plan");
    assert_eq!(&parsed, plan);
    let role = get(agent_env::ROLE);
    let index: u32 = get(agent_env::INDEX).parse().expect("INDEX is a number");
    assert_eq!(label(pod, "perfsweep.io/role").as_ref(), Some(role));
    assert_eq!(
        spec.hostname.as_deref(),
        Some(format!("{role}-{index}").as_str())
    );
    assert_eq!(spec.subdomain.as_deref(), Some(NAME));
    assert_eq!(
        pod.metadata.name.as_deref(),
        Some(format!("{NAME}-{role}-{index}").as_str())
    );
    let peers: PeerEndpoints = serde_json::from_str(get(agent_env::PEERS)).expect("PEERS");
    let expected: PeerEndpoints = plan
        .roles
        .iter()
        .map(|r| {
            let names = (0..r.replicas)
                .map(|i| format!("{}-{i}.{NAME}:7470", r.name))
                .collect();
            (r.name.clone(), names)
        })
        .collect();
    assert_eq!(peers, expected);
    assert_eq!(get(agent_env::CONTROL_PORT), "7470");
    assert_eq!(get(agent_env::WORKDIR), "/work");
    assert_eq!(get(agent_env::HOST), "node-x");
    assert_eq!(get(agent_env::TERMINATION_LOG), "/dev/termination-log");
    assert_eq!(
        container.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        container.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    let mounts: BTreeMap<&str, &str> = container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.mount_path.as_str(), m.name.as_str()))
        .collect();
    let volume = |name: &str| {
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    assert!(
        volume(mounts["/work"]).empty_dir.is_some(),
        "/work is an emptyDir"
    );
    match get(agent_env::ADDRESS)
        .parse::<AddressSource>()
        .expect("ADDRESS parses")
    {
        AddressSource::Env(name) => assert_eq!(get(&name), "10.1.2.3"),
        AddressSource::Multus {
            network,
            annotations_file,
        } => {
            let (dir, file) = annotations_file.rsplit_once('/').expect("a path");
            let downward = volume(mounts[dir])
                .downward_api
                .as_ref()
                .expect("downward API");
            let item = downward
                .items
                .iter()
                .flatten()
                .find(|i| i.path == file)
                .expect("the file");
            assert_eq!(
                item.field_ref.as_ref().map(|f| f.field_path.as_str()),
                Some("metadata.annotations")
            );
            // The file as the kubelet writes it once Multus reported the attachment.
            let status = json!([
                {"name": "cilium", "interface": "eth0", "ips": ["10.1.2.3"], "default": true},
                {"name": qualified(&network), "interface": "net1", "ips": ["192.168.7.9"]}
            ])
            .to_string();
            let contents = format!("{NETWORK_STATUS_ANNOTATION}={}\n", json!(status));
            let found = agent_env::annotation_from_file(&contents, NETWORK_STATUS_ANNOTATION)
                .expect("the annotation");
            assert_eq!(
                agent_env::multus_address(&found, &network).map(|a| a.0),
                Some("192.168.7.9".into())
            );
        }
        AddressSource::Literal(_) => panic!("pods never get a literal address"),
    }
}

/// Multus reports attachments as `namespace/name`, with the pod's namespace by default.
fn qualified(network: &str) -> String {
    if network.contains('/') {
        network.to_owned()
    } else {
        format!("{NAMESPACE}/{network}")
    }
}

// ---------------------------------------------------------------------------------------
// Rules of the API server's validation (`pkg/apis/core/validation`) that the OpenAPI
// schemas cannot express — enums, name formats, uniqueness — for the fields rendering
// sets. A subset, written from the Kubernetes documentation of each field.

fn api_server_rules(object: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            errors.push(what);
        }
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let name = text(&object["metadata"]["name"]);
    for (key, value) in object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        check(is_qualified_name(key), format!("label key {key}"));
        check(is_label_value(&text(value)), format!("label value {value}"));
    }
    for key in object["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        check(is_qualified_name(key), format!("annotation key {key}"));
    }
    let spec = &object["spec"];
    if object["kind"] == "Service" {
        check(is_dns1035(&name), format!("service name {name}"));
        let ports = list(&spec["ports"]);
        let mut seen = Vec::new();
        for port in &ports {
            let protocol = text(&port["protocol"]);
            check(
                ["TCP", "UDP", "SCTP"].contains(&protocol.as_str()),
                format!("protocol {protocol}"),
            );
            check(
                is_iana_name(&text(&port["name"])),
                format!("port name {}", port["name"]),
            );
            check(
                port["port"]
                    .as_u64()
                    .is_some_and(|p| (1..=65535).contains(&p)),
                "port".into(),
            );
            seen.push((port["port"].clone(), protocol, text(&port["name"])));
        }
        let mut pairs: Vec<_> = seen
            .iter()
            .map(|(p, proto, _)| format!("{p}/{proto}"))
            .collect();
        let mut names: Vec<_> = seen.iter().map(|(_, _, n)| n.clone()).collect();
        let count = (pairs.len(), names.len());
        pairs.sort();
        pairs.dedup();
        names.sort();
        names.dedup();
        check(
            (pairs.len(), names.len()) == count,
            "duplicate service ports".into(),
        );
        return errors;
    }
    check(
        name.len() <= 253 && name.split('.').all(is_dns1123),
        format!("pod name {name}"),
    );
    check(is_dns1123(&text(&spec["hostname"])), "hostname".into());
    check(is_dns1123(&text(&spec["subdomain"])), "subdomain".into());
    check(
        text(&spec["restartPolicy"]) == "Never",
        "restartPolicy".into(),
    );
    if let Some(policy) = spec["dnsPolicy"].as_str() {
        let allowed = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
        check(allowed.contains(&policy), format!("dnsPolicy {policy}"));
    }
    check(
        spec["activeDeadlineSeconds"]
            .as_i64()
            .is_some_and(|s| s > 0),
        "activeDeadlineSeconds".into(),
    );
    let volumes: Vec<String> = list(&spec["volumes"])
        .iter()
        .map(|v| text(&v["name"]))
        .collect();
    check(volumes.iter().all(|v| is_dns1123(v)), "volume names".into());
    let mut unique = volumes.clone();
    unique.sort();
    unique.dedup();
    check(unique.len() == volumes.len(), "duplicate volumes".into());
    for container in list(&spec["containers"]) {
        check(
            is_dns1123(&text(&container["name"])),
            "container name".into(),
        );
        if let Some(policy) = container["imagePullPolicy"].as_str() {
            check(
                ["Always", "IfNotPresent", "Never"].contains(&policy),
                format!("pull {policy}"),
            );
        }
        let policy = text(&container["terminationMessagePolicy"]);
        check(
            ["File", "FallbackToLogsOnError"].contains(&policy.as_str()),
            "terminationMessagePolicy".into(),
        );
        let mut port_names = Vec::new();
        for port in list(&container["ports"]) {
            let protocol = text(&port["protocol"]);
            check(
                ["TCP", "UDP", "SCTP"].contains(&protocol.as_str()),
                format!("protocol {protocol}"),
            );
            check(
                port["containerPort"]
                    .as_u64()
                    .is_some_and(|p| (1..=65535).contains(&p)),
                "containerPort".into(),
            );
            if let Some(name) = port["name"].as_str() {
                check(is_iana_name(name), format!("port name {name}"));
                check(
                    !port_names.contains(&name.to_owned()),
                    format!("duplicate port name {name}"),
                );
                port_names.push(name.to_owned());
            }
        }
        for var in list(&container["env"]) {
            let name = text(&var["name"]);
            let ok = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            check(ok, format!("env name {name}"));
        }
        let mut paths = Vec::new();
        for mount in list(&container["volumeMounts"]) {
            check(
                volumes.contains(&text(&mount["name"])),
                format!("mount of unknown volume {}", mount["name"]),
            );
            check(
                !paths.contains(&text(&mount["mountPath"])),
                "duplicate mount path".into(),
            );
            paths.push(text(&mount["mountPath"]));
        }
        let security = &container["securityContext"];
        if security["allowPrivilegeEscalation"] == false {
            check(
                security["privileged"] != true,
                "privileged without escalation".into(),
            );
            let adds = list(&security["capabilities"]["add"]);
            check(
                !adds
                    .iter()
                    .any(|c| c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"),
                "SYS_ADMIN without escalation".into(),
            );
        }
    }
    // Node field selectors accept only metadata.name, In/NotIn with exactly one value.
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    for term in list(terms) {
        for field in list(&term["matchFields"]) {
            check(field["key"] == "metadata.name", "matchFields key".into());
            check(
                ["In", "NotIn"].contains(&text(&field["operator"]).as_str()),
                "matchFields operator".into(),
            );
            check(
                list(&field["values"]).len() == 1,
                "matchFields takes one value".into(),
            );
        }
    }
    for term in
        list(&spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"])
    {
        check(
            is_qualified_name(&text(&term["topologyKey"])),
            "topologyKey".into(),
        );
    }
    errors
}

fn is_dns1123(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_dns1035(text: &str) -> bool {
    is_dns1123(text) && text.starts_with(|c: char| c.is_ascii_lowercase())
}

fn is_iana_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 15
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && text.bytes().any(|b| b.is_ascii_lowercase())
        && !text.starts_with('-')
        && !text.ends_with('-')
        && !text.contains("--")
}

/// `[prefix/]name`: a DNS subdomain prefix and a 63-character name.
fn is_qualified_name(text: &str) -> bool {
    let (prefix, name) = match text.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    let prefix_ok = prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(is_dns1123));
    prefix_ok && !name.is_empty() && is_label_value(name)
}

fn is_label_value(text: &str) -> bool {
    text.len() <= 63
        && (text.is_empty()
            || (text.starts_with(|c: char| c.is_ascii_alphanumeric())
                && text.ends_with(|c: char| c.is_ascii_alphanumeric())
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
}

#[test]
fn the_api_server_rules_catch_what_the_schemas_cannot() {
    let (rendered, _) = render_iperf(json!({"placement": {"server": {"nodes": ["node-a"]}}}));
    let good = to_value(&rendered.pods[0]);
    assert!(api_server_rules(&good).is_empty());
    for (pointer, value) in [
        ("/spec/restartPolicy", json!("Nevr")),
        ("/spec/containers/0/ports/0/protocol", json!("tcp")),
        ("/spec/containers/0/ports/1/name", json!("control")),
        (
            "/spec/containers/0/ports/1/name",
            json!("much-too-long-name"),
        ),
        ("/spec/hostname", json!("Server_0")),
        ("/spec/containers/0/volumeMounts/0/name", json!("nope")),
        (
            "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/key",
            json!("kubernetes.io/hostname"),
        ),
        ("/metadata/labels/perfsweep.io~1role", json!("-server")),
    ] {
        let mut bad = good.clone();
        *bad.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = value;
        assert!(
            !api_server_rules(&bad).is_empty(),
            "{pointer} change must be caught"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Schemas.

fn selection_schema() -> &'static Node {
    static SCHEMA: OnceLock<Node> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(&third_party("multus/network-selection-element.schema.json"))
                .expect("JSON");
        Node::compile(&schema).expect("compiles")
    })
}

#[test]
fn the_volcano_schema_rejects_broken_pod_groups() {
    let (rendered, _) = render_iperf(json!({}));
    let good = to_value(rendered.pod_group.as_ref().expect("a PodGroup"));
    assert!(volcano_schema().check_object_root(&good).is_empty());
    let broken = |pointer: &str, value: Value| {
        let mut object = good.clone();
        *object.pointer_mut(pointer).expect("field exists") = value;
        volcano_schema().check_object_root(&object)
    };
    let errors = broken("/spec/minMember", json!("2"));
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("spec.minMember")),
        "minMember as a string must be rejected: {errors:?}"
    );
    assert!(!broken("/spec/minMember", json!(-1)).is_empty());
    assert!(!broken("/spec/minTaskMember", json!({"server": "one"})).is_empty());
    let mut unknown = good.clone();
    unknown["spec"]["minMembers"] = json!(2);
    assert!(!volcano_schema().check_object_root(&unknown).is_empty());
    let mut queue = good;
    queue["spec"]["queue"] = json!("Not_A_Queue");
    assert!(!volcano_schema().check_object_root(&queue).is_empty());
}

#[test]
fn the_multus_selection_schema_rejects_broken_json_forms() {
    let good = json!([{"name": "net", "namespace": "ns", "interface": "net1"}]);
    assert!(selection_schema().check(&good, "").is_empty());
    for bad in [
        json!({"name": "net"}),
        json!([{"namespace": "ns"}]),
        json!([{"name": "net", "interfaces": "net1"}]),
        json!([{"name": "net", "interface": "much-too-long-name"}]),
        json!([{"name": 7}]),
    ] {
        assert!(
            !selection_schema().check(&bad, "").is_empty(),
            "{bad} must be rejected"
        );
    }
}

#[test]
fn every_rendered_pod_and_service_passes_the_kubernetes_schemas() {
    let mut objects = Vec::new();
    for (name, spec) in scenarios() {
        let (rendered, _) = render_iperf(spec);
        eprintln!("{name}: {} pods", rendered.pods.len());
        objects.push(to_value(&rendered.service));
        objects.extend(rendered.pods.iter().map(to_value));
        objects.push(to_value(&rendered.network_policy));
    }
    let Some(result) = kubernetes_validate("all", &objects) else {
        return;
    };
    if let Err(message) = result {
        panic!("rendered objects fail the Kubernetes schemas: {message}");
    }

    // The check can fail: the same tool rejects a pod broken in two typical ways.
    let mut broken = objects[1].clone();
    broken["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("7470");
    let mut unknown = objects[1].clone();
    unknown["spec"]["containers"][0]["imagePullPolicie"] = json!("Always");
    for bad in [broken, unknown] {
        let result = kubernetes_validate("broken", std::slice::from_ref(&bad))
            .expect("the tool was there a moment ago");
        assert!(result.is_err(), "kubernetes-validate accepted a broken pod");
    }
}

/// Issue 24, finding 1: the agents' control port was open to every pod of the cluster.
/// The policy selects the benchmark's pods by name and uid and admits only them.
#[test]
fn only_the_benchmarks_own_pods_reach_its_pods() {
    let (rendered, _) = render_iperf(json!({}));
    let policy = to_value(&rendered.network_policy);
    assert_eq!(policy["metadata"]["name"], NAME);
    assert_eq!(policy["metadata"]["ownerReferences"][0]["uid"], UID);
    let own = json!({"matchLabels": {
        "perfsweep.io/benchmark": NAME,
        "perfsweep.io/benchmark-uid": UID,
    }});
    assert_eq!(policy["spec"]["podSelector"], own);
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"from": [{"podSelector": own}]}]),
        "only the benchmark's pods, on any port (MPI picks its ports at run time)"
    );
    // Every pod carries what the policy and the Service select on.
    for pod in &rendered.pods {
        assert_eq!(
            label(pod, "perfsweep.io/benchmark-uid"),
            Some(UID.to_owned())
        );
    }
    // Each pod reads the benchmark's token from its Secret.
    assert_eq!(rendered.secrets.len(), 1);
}

/// A set's children read their tokens from a batch Secret the set's controller wrote:
/// each pod reads its own child's key, the child creates no launch Secret of its own, and
/// the batch passes the Kubernetes schemas. A pod made later finds where the first ones
/// read it.
#[test]
fn a_childs_pods_read_its_own_key_of_its_sets_batch_of_tokens() {
    use perfsweep_benchmarks::render::launch;
    let (own, _) = render_iperf(json!({}));
    assert_eq!(own.secrets.len(), 1, "a benchmark's own launch Secret");
    let source = launch::batch_source(&launch::batch_secret_name("sweep", "0a1b2c3d"), NAME);
    let batched = own.clone().with_token_source(&source);
    assert!(batched.secrets.is_empty(), "{:?}", batched.secrets);
    assert_eq!(batched.pods.len(), own.pods.len());
    for pod in &batched.pods {
        assert_eq!(
            launch::token_source_of(pod).as_ref(),
            Some(&source),
            "{:?}",
            pod.metadata.name
        );
        let selector = env_of(pod)[agent_env::LAUNCH_TOKEN]
            .value_from
            .clone()
            .and_then(|from| from.secret_key_ref)
            .expect("the token comes from a Secret");
        assert_eq!(
            (selector.name.as_str(), selector.key.as_str()),
            ("sweep-launch-0a1b2c3d", NAME)
        );
        assert_eq!(
            selector.optional,
            Some(false),
            "a missing key must stop the pod, not start it without a token"
        );
    }
    for pod in &own.pods {
        assert_eq!(
            launch::token_source_of(pod),
            Some(launch::TokenSource {
                secret: agent_env::launch_secret_name(NAME),
                key: agent_env::LAUNCH_SECRET_KEY.to_owned(),
            })
        );
    }

    let tokens = BTreeMap::from([
        (NAME.to_owned(), "ab".repeat(32)),
        ("other".to_owned(), "cd".repeat(32)),
    ]);
    let batch = launch::batch_secret(source.secret.clone(), "sweep", NAMESPACE, UID, tokens);
    let value = to_value(&batch);
    assert_eq!(
        value["metadata"]["ownerReferences"][0]["kind"],
        "BenchmarkSet"
    );
    assert_eq!(value["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(value["immutable"], true);
    assert_eq!(value["stringData"][NAME], "ab".repeat(32));
    let objects = [value, to_value(&batched.pods[0])];
    if let Some(Err(message)) = kubernetes_validate("batch", &objects) {
        panic!("a batch of tokens or a pod reading it fails the Kubernetes schemas: {message}");
    }
}

// ---------------------------------------------------------------------------------------
// The specifics of each mode.

#[test]
fn pod_network() {
    let (rendered, plan) = render_iperf(json!({}));
    assert_eq!(plan.process_count(), 2);

    let group = rendered.pod_group.as_ref().expect("Volcano by default");
    assert_eq!(group.metadata.name.as_deref(), Some(NAME));
    assert_eq!(group.spec.min_member, Some(2));
    assert_eq!(
        group.spec.min_task_member,
        Some(BTreeMap::from([("client".into(), 1), ("server".into(), 1)]))
    );
    assert_eq!(
        (
            group.spec.queue.as_ref(),
            group.spec.priority_class_name.as_ref()
        ),
        (None, None)
    );

    let service = rendered.service.spec.as_ref().expect("service spec");
    assert_eq!(rendered.service.metadata.name.as_deref(), Some(NAME));
    assert_eq!(service.cluster_ip.as_deref(), Some("None"));
    assert_eq!(service.publish_not_ready_addresses, Some(true));
    // The uid too: a pod that copies the benchmark's name label is not selected.
    assert_eq!(
        service.selector,
        Some(BTreeMap::from([
            ("perfsweep.io/benchmark".into(), NAME.into()),
            ("perfsweep.io/benchmark-uid".into(), UID.into()),
        ]))
    );
    let ports: Vec<(String, i32, String)> = service
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port,
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("control".into(), 7470, "TCP".into()),
            ("iperf".into(), 5201, "TCP".into()),
            ("iperf-udp".into(), 5201, "UDP".into()),
        ]
    );

    let names: Vec<_> = rendered
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, ["bench-server-0", "bench-client-0"]);
    for pod in &rendered.pods {
        let spec = spec_of(pod);
        assert_eq!(
            annotation(pod, volcano::GROUP_NAME_ANNOTATION).as_deref(),
            Some(NAME)
        );
        assert_eq!(
            annotation(pod, volcano::TASK_SPEC_ANNOTATION),
            label(pod, "perfsweep.io/role"),
            "Volcano counts minTaskMember by this annotation"
        );
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.active_deadline_seconds, Some(30 * 60 + 60));
        assert_eq!(spec.host_network, None);
        assert_eq!(spec.dns_policy, None);
        assert_eq!(spec.node_name, None);
        assert_eq!(spec.automount_service_account_token, Some(false));
        let container = &spec.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some(format!("ghcr.io/perfsweep/iperf:{}", env!("CARGO_PKG_VERSION")).as_str())
        );
        assert_eq!(container.image_pull_policy, None);
        assert_eq!(
            value_of(pod, agent_env::ADDRESS).as_deref(),
            Some("env:POD_IP")
        );
        let pod_ip = env_of(pod)["POD_IP"]
            .value_from
            .clone()
            .and_then(|f| f.field_ref);
        assert_eq!(
            pod_ip.map(|f| f.field_path).as_deref(),
            Some("status.podIP")
        );
        assert_eq!(value_of(pod, agent_env::MTU), None);
        assert!(
            pod.metadata
                .annotations
                .iter()
                .flatten()
                .all(|(k, _)| !k.contains("cni"))
        );

        // Spread: server and client on different nodes.
        assert_eq!(label(pod, SPREAD_LABEL).as_deref(), Some(NAME));
        let anti = spec
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required anti-affinity");
        assert_eq!(anti.len(), 1);
        assert_eq!(anti[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(
            anti[0]
                .label_selector
                .as_ref()
                .and_then(|s| s.match_labels.clone()),
            Some(BTreeMap::from([(SPREAD_LABEL.into(), NAME.into())]))
        );

        // Least privilege.
        let pod_security = spec
            .security_context
            .as_ref()
            .expect("pod security context");
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_eq!(
            (
                pod_security.run_as_user,
                pod_security.run_as_group,
                pod_security.fs_group
            ),
            (Some(65532), Some(65532), Some(65532))
        );
        assert_eq!(
            pod_security
                .seccomp_profile
                .as_ref()
                .map(|s| s.type_.as_str()),
            Some("RuntimeDefault")
        );
        let security = container
            .security_context
            .as_ref()
            .expect("container security context");
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.run_as_user, None);
        let caps = security.capabilities.as_ref().expect("capabilities");
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(caps.add, None);
    }
    // The server exposes its iperf ports, the client only the control port.
    let ports = |name: &str| -> Vec<(i32, String)> {
        spec_of(pod(&rendered, name)).containers[0]
            .ports
            .iter()
            .flatten()
            .map(|p| (p.container_port, p.protocol.clone().unwrap_or_default()))
            .collect()
    };
    assert_eq!(
        ports("bench-server-0"),
        [
            (7470, "TCP".into()),
            (5201, "TCP".into()),
            (5201, "UDP".into())
        ]
    );
    assert_eq!(ports("bench-client-0"), [(7470, "TCP".into())]);
}

#[test]
fn host_network() {
    let (rendered, _) = render_iperf(json!({"hostNetwork": true}));
    for pod in &rendered.pods {
        let spec = spec_of(pod);
        assert_eq!(spec.host_network, Some(true));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
        // status.podIP is the node's address under hostNetwork.
        assert_eq!(
            value_of(pod, agent_env::ADDRESS).as_deref(),
            Some("env:POD_IP")
        );
        assert_eq!(annotation(pod, NETWORKS_ANNOTATION), None);
        let caps = spec.containers[0]
            .security_context
            .as_ref()
            .and_then(|s| s.capabilities.clone());
        assert_eq!(
            caps.and_then(|c| c.add),
            None,
            "no NET_ADMIN in the host's namespace"
        );
    }
}

#[test]
fn multus_by_name_with_mtu() {
    let (rendered, _) = render_iperf(json!({"networkName": "sriov-net", "mtu": 9000}));
    for pod in &rendered.pods {
        assert_eq!(
            annotation(pod, NETWORKS_ANNOTATION).as_deref(),
            Some("sriov-net")
        );
        assert_eq!(annotation(pod, DEFAULT_NETWORK_ANNOTATION), None);
        assert_eq!(
            value_of(pod, agent_env::ADDRESS).as_deref(),
            Some("multus:sriov-net:/etc/podinfo/annotations")
        );
        let spec = spec_of(pod);
        let podinfo = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "podinfo")
            .expect("podinfo");
        let items = podinfo
            .downward_api
            .as_ref()
            .and_then(|d| d.items.clone())
            .expect("items");
        assert_eq!(items[0].path, "annotations");
        let mount = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "podinfo")
            .expect("mounted");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            ("/etc/podinfo", Some(true))
        );
        // The agent sets the MTU itself: NET_ADMIN, which only reaches `ip` as root.
        assert_eq!(value_of(pod, agent_env::MTU).as_deref(), Some("9000"));
        let security = spec.containers[0]
            .security_context
            .clone()
            .expect("security");
        assert_eq!(
            security.capabilities.and_then(|c| c.add),
            Some(vec!["NET_ADMIN".to_owned()])
        );
        assert_eq!(
            (security.run_as_user, security.run_as_non_root),
            (Some(0), Some(false))
        );
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.read_only_root_filesystem, Some(true));
    }
}

#[test]
fn multus_namespace_and_interface_use_the_json_form() {
    let (rendered, _) =
        render_iperf(json!({"networkName": "hpc/sriov-net", "networkInterface": "net1"}));
    for pod in &rendered.pods {
        let value = annotation(pod, NETWORKS_ANNOTATION).expect("networks annotation");
        let parsed: Value = serde_json::from_str(&value).expect("JSON");
        assert_eq!(
            parsed,
            json!([{"name": "sriov-net", "namespace": "hpc", "interface": "net1"}])
        );
        assert!(selection_schema().check(&parsed, "").is_empty());
        assert_eq!(
            value_of(pod, agent_env::ADDRESS).as_deref(),
            Some("multus:hpc/sriov-net:/etc/podinfo/annotations")
        );
    }
    // Names Multus's plain form cannot carry (dots) switch to JSON as well.
    let (rendered, _) = render_iperf(json!({"networkName": "hpc/sriov.v2"}));
    assert_eq!(
        annotation(&rendered.pods[0], NETWORKS_ANNOTATION).as_deref(),
        Some(r#"[{"name":"sriov.v2","namespace":"hpc"}]"#)
    );
}

#[test]
fn default_network_replaces_the_pod_network() {
    let (rendered, _) =
        render_iperf(json!({"networkName": "default/mlnx-net", "defaultNetwork": true}));
    for pod in &rendered.pods {
        assert_eq!(
            annotation(pod, DEFAULT_NETWORK_ANNOTATION).as_deref(),
            Some("default/mlnx-net")
        );
        // Not attached a second time as a secondary network.
        assert_eq!(annotation(pod, NETWORKS_ANNOTATION), None);
        // The replaced primary interface carries the pod IP.
        assert_eq!(
            value_of(pod, agent_env::ADDRESS).as_deref(),
            Some("env:POD_IP")
        );
    }
}

#[test]
fn sriov_resources_go_to_device_roles_only() {
    let spec = json!({"networkName": "default/mlnx-net",
        "resources": {"limits": {"nvidia.com/mlnxnet": 1, "cpu": "2", "memory": "1Gi"},
                      "requests": {"cpu": "1", "memory": "512Mi"}}});
    let (rendered, _) = render_iperf(spec.clone());
    let limits = |pod: &Pod| -> Vec<String> {
        spec_of(pod).containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .map(|l| l.into_iter().map(|(k, v)| format!("{k}={}", v.0)).collect())
            .unwrap_or_default()
    };
    for pod in &rendered.pods {
        assert_eq!(limits(pod), ["cpu=2", "memory=1Gi", "nvidia.com/mlnxnet=1"]);
    }
    // A role that does not use devices (say an MPI launcher) keeps only compute.
    let mut plan = iperf_plan(&spec);
    plan.roles[1].uses_devices = false;
    let rendered = render(&benchmark(), &spec, &plan).expect("renders");
    check_everywhere(&rendered, &plan);
    let client = pod(&rendered, "bench-client-0");
    assert_eq!(limits(client), ["cpu=2", "memory=1Gi"]);
    let requests = spec_of(client).containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone());
    assert_eq!(requests.map(|r| r.len()), Some(2));
    // Nor is it spread: it may share a node with a device pod.
    assert_eq!(label(client, SPREAD_LABEL), None);
    assert_eq!(spec_of(client).affinity, None);
    assert_eq!(limits(pod(&rendered, "bench-server-0")).len(), 3);
}

#[test]
fn plan_capabilities_are_granted_and_nothing_else() {
    let spec = json!({});
    let mut plan = iperf_plan(&spec);
    plan.roles[0].capabilities = vec!["IPC_LOCK".into()];
    let rendered = render(&benchmark(), &spec, &plan).expect("renders");
    check_everywhere(&rendered, &plan);
    let security = |name: &str| {
        spec_of(pod(&rendered, name)).containers[0]
            .security_context
            .clone()
            .expect("security")
    };
    let server = security("bench-server-0");
    assert_eq!(
        server.capabilities.and_then(|c| c.add),
        Some(vec!["IPC_LOCK".to_owned()])
    );
    assert_eq!(server.run_as_user, Some(0));
    let client = security("bench-client-0");
    assert_eq!(client.capabilities.and_then(|c| c.add), None);
    assert_eq!(client.run_as_user, None);

    plan.roles[0].capabilities = vec!["SYS_ADMIN".into()];
    assert!(matches!(
        render(&benchmark(), &spec, &plan),
        Err(RenderError::Invalid { .. })
    ));
}

#[test]
fn explicit_placement_pins_through_the_scheduler() {
    let (rendered, _) = render_iperf(json!({
        "nodeSelector": {"pool": "bench"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}],
        "placement": {"server": {"nodes": ["node-a"], "nodeSelector": {"nic": "cx6"}},
                      "client": {"nodes": ["node-b"]}}
    }));
    for (name, node, selector) in [
        (
            "bench-server-0",
            "node-a",
            json!({"pool": "bench", "nic": "cx6"}),
        ),
        ("bench-client-0", "node-b", json!({"pool": "bench"})),
    ] {
        let pod = pod(&rendered, name);
        let spec = spec_of(pod);
        assert_eq!(
            spec.node_name, None,
            "nodeName would bypass the gang scheduler"
        );
        assert_eq!(to_value(&spec.node_selector), selector);
        assert_eq!(spec.tolerations.as_ref().map(Vec::len), Some(1));
        let affinity = to_value(spec.affinity.as_ref().expect("affinity"));
        assert_eq!(
            affinity,
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}
                ]}]
            }}}),
            "pinned, and no default anti-affinity"
        );
        assert_eq!(label(pod, SPREAD_LABEL), None);
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
    }
}

#[test]
fn scheduler_default_has_no_pod_group() {
    let (rendered, _) = render_iperf(json!({"scheduler": "default"}));
    assert!(rendered.pod_group.is_none());
    for pod in &rendered.pods {
        assert_eq!(spec_of(pod).scheduler_name, None);
        assert_eq!(annotation(pod, volcano::GROUP_NAME_ANNOTATION), None);
        assert_eq!(annotation(pod, volcano::TASK_SPEC_ANNOTATION), None);
        // Spreading does not depend on the scheduler.
        assert_eq!(label(pod, SPREAD_LABEL).as_deref(), Some(NAME));
    }
}

#[test]
fn user_affinity_replaces_the_default_spread() {
    let (rendered, _) = render_iperf(json!({"affinity": user_affinity()}));
    let expected: Affinity = serde_json::from_value(user_affinity()).expect("affinity");
    for pod in &rendered.pods {
        assert_eq!(spec_of(pod).affinity.as_ref(), Some(&expected));
        assert_eq!(label(pod, SPREAD_LABEL), None);
    }
}

#[test]
fn queue_priority_timeout_and_image() {
    let (rendered, _) = render_iperf(json!({
        "queue": "benchmarks", "priorityClassName": "bench-high", "timeout": "90s",
        "image": "registry.example/iperf:dev", "imagePullPolicy": "Always"
    }));
    let group = rendered.pod_group.as_ref().expect("PodGroup");
    assert_eq!(group.spec.queue.as_deref(), Some("benchmarks"));
    assert_eq!(
        group.spec.priority_class_name.as_deref(),
        Some("bench-high")
    );
    for pod in &rendered.pods {
        let spec = spec_of(pod);
        assert_eq!(spec.priority_class_name.as_deref(), Some("bench-high"));
        assert_eq!(spec.active_deadline_seconds, Some(90 + 60));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("registry.example/iperf:dev")
        );
        assert_eq!(
            spec.containers[0].image_pull_policy.as_deref(),
            Some("Always")
        );
    }
}

#[test]
fn replicas_and_gang_size_follow_the_plan() {
    let spec = json!({});
    let mut plan = iperf_plan(&spec);
    plan.roles[1].replicas = 3;
    let rendered = render(&benchmark(), &spec, &plan).expect("renders");
    check_everywhere(&rendered, &plan);
    let group = rendered.pod_group.as_ref().expect("PodGroup");
    assert_eq!(group.spec.min_member, Some(4));
    assert_eq!(
        group.spec.min_task_member.as_ref().map(|m| m["client"]),
        Some(3)
    );
    let names: Vec<_> = rendered
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "bench-server-0",
            "bench-client-0",
            "bench-client-1",
            "bench-client-2"
        ]
    );
}

#[test]
fn what_cannot_be_rendered_is_an_error() {
    let spec = json!({});
    let plan = iperf_plan(&spec);
    let with = |edit: fn(&mut BenchmarkRef)| {
        let mut benchmark = benchmark();
        edit(&mut benchmark);
        render(&benchmark, &spec, &plan)
    };
    assert!(matches!(
        with(|b| b.kind = "Nope".into()),
        Err(RenderError::Unsupported(_))
    ));
    assert!(matches!(
        with(|b| b.kind = "Fio".into()),
        Err(RenderError::Invalid { .. })
    ));
    for name in ["1bench", "Bench", "a.b", &"b".repeat(64)] {
        let mut benchmark = benchmark();
        benchmark.name = name.to_owned();
        assert!(
            matches!(
                render(&benchmark, &spec, &plan),
                Err(RenderError::Invalid { .. })
            ),
            "{name}"
        );
    }
    // Combinations the CRD refuses are refused here too, not half-applied.
    for bad in [
        json!({"hostNetwork": true, "networkName": "n"}),
        json!({"hostNetwork": true, "mtu": 9000}),
        json!({"queue": "Not_A_Queue"}),
        json!({"resources": {"claims": [{"name": "gpu"}]}}),
    ] {
        assert!(
            matches!(
                render(&benchmark(), &bad, &plan),
                Err(RenderError::Invalid { .. })
            ),
            "{bad}"
        );
    }
}

/// The promise of `tests/compat.rs`, for rendering: every child of the kube-perftest
/// examples whose kind has a plan renders into objects Volcano and Kubernetes accept.
#[test]
fn kube_perftest_examples_render() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kube-perftest");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("kube-perftest examples")
        .filter_map(Result::ok)
        .flat_map(|dir| {
            std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
        })
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let (mut rendered_children, mut samples) = (0, Vec::new());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        let raw = yaml::documents(&text).expect("YAML").remove(0);
        let Checked::Set { cases, .. } = document::check(raw).expect("valid").checked else {
            continue;
        };
        let expansion = cases.into_expansion();
        for child in &expansion.children {
            let spec = Value::Object((*child.spec).clone());
            let plan = match expansion.kind.plan(&spec) {
                Ok(plan) => plan,
                // Kinds whose plan is not written yet have nothing to render.
                Err(perfsweep_benchmarks::execution::plan::PlanError::NotImplemented {
                    ..
                }) => break,
                Err(e) => panic!("{}: {e}", file.display()),
            };
            let benchmark = BenchmarkRef {
                kind: expansion.kind.kind.to_owned(),
                name: child.name.clone(),
                namespace: NAMESPACE.into(),
                uid: UID.into(),
            };
            let rendered = render(&benchmark, &spec, &plan)
                .unwrap_or_else(|e| panic!("{} {}: {e}", file.display(), child.name));
            round_trips(&rendered);
            let group = rendered.pod_group.as_ref().expect("Volcano by default");
            let errors = volcano_schema().check_object_root(&to_value(group));
            assert!(errors.is_empty(), "{}: {errors:?}", file.display());
            if rendered_children == 0 || child.permutation_index == 0 && child.repetition == 0 {
                samples.push(to_value(&rendered.service));
                samples.extend(rendered.pods.iter().map(to_value));
            }
            rendered_children += 1;
        }
    }
    assert!(rendered_children > 0, "the IPerf examples render");
    eprintln!("rendered {rendered_children} children of the kube-perftest examples");
    if let Some(Err(message)) = kubernetes_validate("compat", &samples) {
        panic!("kube-perftest children fail the Kubernetes schemas: {message}");
    }
}

/// The requests of the agent container of each pod, by pod name.
fn requests_of(rendered: &Rendered) -> Vec<(String, Value)> {
    rendered
        .pods
        .iter()
        .map(|pod| {
            let pod = to_value(pod);
            (
                pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                pod["spec"]["containers"][0]["resources"]["requests"].clone(),
            )
        })
        .collect()
}

/// Issue 23: pods without requests are BestEffort, and the real Volcano placed an IPerf
/// server alone while its client stayed Pending. Every pod requests a little, and the
/// PodGroup's `minResources` is the gang's sum, which Volcano's own schema accepts.
#[test]
fn pods_request_a_little_and_the_pod_group_the_gangs_sum() {
    let (rendered, _) = render_iperf(json!({}));
    for (pod, requests) in requests_of(&rendered) {
        assert_eq!(requests, json!({"cpu": "100m", "memory": "64Mi"}), "{pod}");
    }
    let group = to_value(rendered.pod_group.as_ref().expect("a PodGroup"));
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "200m", "memory": "128Mi"})
    );
    assert_eq!(volcano_schema().check_object_root(&group), Vec::new());
    let mut broken = group.clone();
    broken["spec"]["minResources"]["cpu"] = json!("a lot");
    assert!(
        !volcano_schema().check_object_root(&broken).is_empty(),
        "Volcano's schema checks minResources"
    );

    // A spec's own requests and limits win; a limit alone is what the pod requests.
    let (rendered, _) = render_iperf(json!({"resources": {
        "requests": {"memory": "1Gi"},
        "limits": {"cpu": "2"},
    }}));
    for (pod, requests) in requests_of(&rendered) {
        assert_eq!(requests, json!({"memory": "1Gi"}), "{pod}");
    }
    let group = to_value(rendered.pod_group.as_ref().expect("a PodGroup"));
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "4", "memory": "2Gi"})
    );
    assert_eq!(volcano_schema().check_object_root(&group), Vec::new());

    // Explicit zeros turn the defaults off.
    let (rendered, _) =
        render_iperf(json!({"resources": {"requests": {"cpu": "0", "memory": "0"}}}));
    let group = to_value(rendered.pod_group.as_ref().expect("a PodGroup"));
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "0", "memory": "0"})
    );
}

#[test]
fn a_quantity_that_is_none_is_a_clear_error() {
    let plan = iperf_plan(&json!({}));
    let spec = json!({"resources": {"requests": {"cpu": "lots"}}});
    let error = render(&benchmark(), &spec, &plan).expect_err("not a quantity");
    assert!(
        error
            .to_string()
            .contains("\"lots\" is not a Kubernetes quantity"),
        "{error}"
    );
}
