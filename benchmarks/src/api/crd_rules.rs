//! Schema rules every perfsweep CRD shares, injected into the derived schemas once rather
//! than repeated on each kind's type: the name limits, the common spec rules, placement
//! roles, and integer formats Kubernetes knows. Used by the registry (each kind's CRD) and
//! by BenchmarkSet's CRD; [`crate::crds`] assembles them all.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, ValidationRule,
};
use serde_json::{Value, json};

use crate::api::names::MAX_BENCHMARK_NAME_LEN;

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

/// Integer formats Kubernetes knows: schemars writes Rust's unsigned types as
/// `uint16`/`uint32`/`uint64`/`uint`, which the API server warns about on every apply
/// (`unrecognized format "uint32"`). Each becomes a format Kubernetes knows, wide enough
/// for every value of the Rust type, with the type's range kept as minimum and maximum
/// (a tighter bound the schema already has wins): (format, Kubernetes format, maximum).
const UNSIGNED_FORMATS: &[(&str, &str, Option<f64>)] = &[
    ("uint8", "int32", Some(u8::MAX as f64)),
    ("uint16", "int32", Some(u16::MAX as f64)),
    ("uint32", "int64", Some(u32::MAX as f64)),
    // u64 and usize values beyond i64::MAX do not fit a Kubernetes integer anyway.
    ("uint64", "int64", None),
    ("uint", "int64", None),
];

/// Rewrites every unsigned integer format in a CRD's schemas (see [`UNSIGNED_FORMATS`])
/// and every reference to a recursive type (see [`unreferenced`]).
pub fn kubernetes_formats(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            continue;
        };
        rewrite_formats(&mut value);
        unreferenced(&mut value);
        if let Ok(rewritten) = serde_json::from_value(value) {
            *schema = rewritten;
        }
    }
}

fn rewrite_formats(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let unsigned = map
                .get("format")
                .and_then(Value::as_str)
                .and_then(|format| UNSIGNED_FORMATS.iter().find(|(f, ..)| *f == format));
            if let Some((_, format, maximum)) = unsigned {
                let minimum = map.get("minimum").and_then(Value::as_f64).unwrap_or(0.0);
                map.insert("minimum".into(), json!(minimum.max(0.0)));
                let bound = match (map.get("maximum").and_then(Value::as_f64), maximum) {
                    (Some(own), Some(max)) => Some(own.min(*max)),
                    (own, max) => own.or(*max),
                };
                if let Some(bound) = bound {
                    map.insert("maximum".into(), json!(bound));
                }
                // The narrowest format that holds every allowed value.
                let format = match bound {
                    Some(bound) if bound <= f64::from(i32::MAX) => "int32",
                    _ => format,
                };
                map.insert("format".into(), json!(format));
            }
            for child in map.values_mut() {
                rewrite_formats(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_formats),
        _ => {}
    }
}

/// Replaces each `$ref` with an object whose fields the API server keeps unchecked.
///
/// schemars inlines every type but a recursive one, which it can only refer to (an LLM
/// iteration's `perModel` holds iterations), and the API server refuses `$ref` (and any
/// schema without a `type`): `helm install` failed on it (issue 23). A structural schema
/// cannot describe recursion, so the inner level is preserved as written; the operator
/// writes it from the same Rust type, so it is still what the outer level describes.
fn unreferenced(node: &mut Value) {
    match node {
        Value::Object(map) if map.contains_key("$ref") => {
            *map = serde_json::Map::from_iter([
                ("type".to_owned(), json!("object")),
                (
                    "x-kubernetes-preserve-unknown-fields".to_owned(),
                    json!(true),
                ),
            ]);
        }
        Value::Object(map) => map.values_mut().for_each(unreferenced),
        Value::Array(items) => items.iter_mut().for_each(unreferenced),
        _ => {}
    }
}

/// The root schema of the CRD's (one) served version, where the rules go.
pub fn served_schema(crd: &mut CustomResourceDefinition) -> Option<&mut JSONSchemaProps> {
    crd.spec
        .versions
        .first_mut()
        .and_then(|v| v.schema.as_mut())
        .and_then(|s| s.open_api_v3_schema.as_mut())
}

/// Adds the rules every kind shares: the name limit at the root, the common spec rules,
/// and that `placement` only names this kind's roles; and gives integers formats
/// Kubernetes knows.
pub fn finalize(mut crd: CustomResourceDefinition, roles: &[&str]) -> CustomResourceDefinition {
    kubernetes_formats(&mut crd);
    let Some(schema) = served_schema(&mut crd) else {
        return crd;
    };
    name_rules(
        schema,
        MAX_BENCHMARK_NAME_LEN,
        "pods are named <name>-<role>-<index> and pod hostnames are limited to 63",
        "it names the benchmark's Service",
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

/// The rules on `metadata.name` (at most `max` characters, a DNS label starting with a
/// letter), at the root where CEL sees `metadata`, reported at the field they are about:
/// `metadata.name: Invalid value: …` rather than the root's `<nil>: Invalid value: …`.
/// A `fieldPath` must name a field of the schema, so the root declares `metadata.name`
/// (Kubernetes allows exactly `name` and `generateName` under the root's `metadata`).
pub fn name_rules(root: &mut JSONSchemaProps, max: usize, why_short: &str, why_label: &str) {
    let metadata = root
        .properties
        .get_or_insert_with(Default::default)
        .entry("metadata".to_owned())
        .or_insert_with(|| JSONSchemaProps {
            type_: Some("object".to_owned()),
            ..Default::default()
        });
    metadata
        .properties
        .get_or_insert_with(Default::default)
        .entry("name".to_owned())
        .or_insert_with(|| JSONSchemaProps {
            type_: Some("string".to_owned()),
            ..Default::default()
        });
    for (rule, message) in [
        (
            format!("size(self.metadata.name) <= {max}"),
            format!("metadata.name must be at most {max} characters: {why_short}"),
        ),
        (
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')".to_owned(),
            format!("metadata.name must be a DNS label starting with a letter: {why_label}"),
        ),
    ] {
        root.x_kubernetes_validations
            .get_or_insert_with(Vec::new)
            .push(ValidationRule {
                rule,
                message: Some(message),
                field_path: Some(NAME_FIELD_PATH.to_owned()),
                reason: Some(NAME_RULE_REASON.to_owned()),
                ..Default::default()
            });
    }
}

/// Where the name rules report: the field, relative to the root they sit at.
pub const NAME_FIELD_PATH: &str = ".metadata.name";
/// The name rules' `reason` (a `metav1.CauseType`): an invalid value, not a missing
/// field or a duplicate.
pub const NAME_RULE_REASON: &str = "FieldValueInvalid";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_integers_keep_their_range() {
        let mut schema = json!({"properties": {
            "port": {"type": "integer", "format": "uint16", "minimum": 1.0},
            "count": {"type": "integer", "format": "uint32", "maximum": 100.0},
            "bytes": {"type": "array", "items": {"type": "integer", "format": "uint64"}},
            "total": {"type": "integer", "format": "uint32"},
            "format": {"type": "string", "format": "date-time"},
        }});
        rewrite_formats(&mut schema);
        assert_eq!(
            schema["properties"]["port"],
            json!({"type": "integer", "format": "int32", "minimum": 1.0, "maximum": 65535.0})
        );
        assert_eq!(
            schema["properties"]["count"],
            json!({"type": "integer", "format": "int32", "minimum": 0.0, "maximum": 100.0})
        );
        assert_eq!(
            schema["properties"]["bytes"]["items"],
            json!({"type": "integer", "format": "int64", "minimum": 0.0})
        );
        assert_eq!(
            schema["properties"]["total"],
            json!({"type": "integer", "format": "int64", "minimum": 0.0, "maximum": 4294967295.0})
        );
        assert_eq!(schema["properties"]["format"]["format"], "date-time");
    }

    #[test]
    fn a_reference_becomes_a_preserved_object() {
        let mut schema = json!({"properties": {"perModel": {
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/Iteration"},
        }}});
        unreferenced(&mut schema);
        assert_eq!(
            schema["properties"]["perModel"]["additionalProperties"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
    }
}
