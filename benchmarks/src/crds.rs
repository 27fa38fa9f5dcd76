//! The CustomResourceDefinitions perfsweep installs, derived from the Rust types.
//!
//! Rules shared by every kind are injected here, once, rather than repeated on each
//! kind's type: the checked-in `crds/` YAML is exactly what [`all`] returns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use crate::registry;

/// The longest benchmark name: pods are named `<name>-<role>-<index>` and a pod's
/// hostname (used for peer discovery by DNS) is limited to 63 characters.
pub const MAX_BENCHMARK_NAME_LEN: usize = 50;

/// CEL rules on the `spec` of every benchmark kind: (rule, field path, message).
const COMMON_SPEC_RULES: &[(&str, &str, &str)] = &[
    (
        "!(self.hostNetwork && has(self.networkName))",
        ".networkName",
        "networkName attaches a Multus network inside the pod's own network namespace and cannot be combined with hostNetwork",
    ),
    (
        "!has(self.networkInterface) || has(self.networkName)",
        ".networkInterface",
        "networkInterface names the interface of networkName's attachment; set networkName",
    ),
    (
        "!self.defaultNetwork || has(self.networkName)",
        ".defaultNetwork",
        "defaultNetwork replaces the pod network with networkName's attachment; set networkName",
    ),
    (
        "!(has(self.queue) && has(self.scheduler) && self.scheduler == 'default')",
        ".queue",
        "queue is a Volcano queue and has no effect with scheduler: default",
    ),
    (
        "!(has(self.mtu) && self.hostNetwork)",
        ".mtu",
        "mtu is applied inside the pod and never to the host's interface: it cannot be combined with hostNetwork",
    ),
];

/// Adds the rules every kind shares: the name limit at the root, the common spec rules,
/// and that `placement` only names this kind's roles.
pub fn finalize(mut crd: CustomResourceDefinition, roles: &[&str]) -> CustomResourceDefinition {
    let Some(schema) = crd
        .spec
        .versions
        .first_mut()
        .and_then(|v| v.schema.as_mut())
        .and_then(|s| s.open_api_v3_schema.as_mut())
    else {
        return crd;
    };
    let name_rule = format!("size(self.metadata.name) <= {MAX_BENCHMARK_NAME_LEN}");
    let name_message = format!(
        "metadata.name must be at most {MAX_BENCHMARK_NAME_LEN} characters: pods are named <name>-<role>-<index> and pod hostnames are limited to 63"
    );
    push_rule(
        &mut schema.x_kubernetes_validations,
        &name_rule,
        None,
        &name_message,
    );
    push_rule(
        &mut schema.x_kubernetes_validations,
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        None,
        "metadata.name must be a DNS label starting with a letter: it names the benchmark's Service",
    );
    if let Some(spec) = schema.properties.as_mut().and_then(|p| p.get_mut("spec")) {
        for (rule, field_path, message) in COMMON_SPEC_RULES {
            push_rule(
                &mut spec.x_kubernetes_validations,
                rule,
                Some(field_path),
                message,
            );
        }
        let quoted: Vec<String> = roles.iter().map(|r| format!("'{r}'")).collect();
        let placement_rule = format!(
            "!has(self.placement) || self.placement.all(role, role in [{}])",
            quoted.join(", ")
        );
        let placement_message = format!(
            "placement keys must be roles of this kind: {}",
            roles.join(", ")
        );
        push_rule(
            &mut spec.x_kubernetes_validations,
            &placement_rule,
            Some(".placement"),
            &placement_message,
        );
    }
    crd
}

fn push_rule(
    rules: &mut Option<
        Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule>,
    >,
    rule: &str,
    field_path: Option<&str>,
    message: &str,
) {
    rules.get_or_insert_with(Vec::new).push(
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule {
            rule: rule.to_owned(),
            message: Some(message.to_owned()),
            field_path: field_path.map(str::to_owned),
            ..Default::default()
        },
    );
}

/// The `openAPIV3Schema` of the CRD's first version, as JSON.
pub fn open_api_schema(crd: &CustomResourceDefinition) -> Value {
    crd.spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_else(|| json!({}))
}

/// Every perfsweep CRD: BenchmarkSet first, then the benchmark kinds.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![crate::set::crd()];
    crds.extend(registry::kinds().iter().map(|k| k.crd.clone()));
    crds
}

/// The file name under `crds/` for a CRD, e.g. `iperfs.perfsweep.io.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// A CRD as the YAML document checked in under `crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, crate::yaml::YamlError> {
    crate::yaml::to_string(crd)
}
