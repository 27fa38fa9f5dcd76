//! The CustomResourceDefinitions perfsweep installs, derived from the Rust types.
//!
//! Rules shared by every kind are injected once ([`crate::api::crd_rules`]) rather than
//! repeated on each kind's type: the checked-in `crds/` YAML is exactly what [`all`]
//! returns.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::kinds::registry;

/// The annotation on every CRD perfsweep writes: the digest of its `spec`
/// ([`schema_digest`]). The operator compares it with the digest of its own CRD to tell
/// an installed CRD older (or newer) than itself: Helm never upgrades a chart's `crds/`.
pub const SCHEMA_DIGEST_ANNOTATION: &str = "perfsweep.io/schema-digest";

/// Every perfsweep CRD: BenchmarkSet first, then the benchmark kinds, each stamped with
/// [`SCHEMA_DIGEST_ANNOTATION`].
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![crate::set::crd()];
    crds.extend(registry::kinds().iter().map(|k| k.crd.clone()));
    for crd in &mut crds {
        let digest = schema_digest(crd);
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(SCHEMA_DIGEST_ANNOTATION.to_owned(), digest);
    }
    crds
}

/// SHA-256 of the canonical JSON of a CRD's `spec` (names, versions, schema, columns):
/// what the API server enforces, and nothing of its metadata.
pub fn schema_digest(crd: &CustomResourceDefinition) -> String {
    // A CRD spec is plain data: it always serializes.
    serde_json::to_value(&crd.spec)
        .map(|spec| crate::formats::digest::sha256_hex(&spec))
        .unwrap_or_default()
}

/// The file name under `crds/` for a CRD, e.g. `iperfs.perfsweep.io.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// A CRD as the YAML document checked in under `crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, crate::formats::yaml::YamlError> {
    crate::formats::yaml::to_string(crd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::crd_rules::{NAME_FIELD_PATH, NAME_RULE_REASON, open_api_schema};
    use serde_json::{Value, json};

    /// Issue 23: the operator tells an outdated installed CRD by this annotation, so it
    /// must be on every CRD and follow the schema.
    #[test]
    fn every_crd_carries_the_digest_of_its_spec() {
        for crd in all() {
            let annotated = crd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SCHEMA_DIGEST_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            assert_eq!(annotated.len(), 64, "{}", file_name(&crd));
            assert_eq!(annotated, schema_digest(&crd), "{}", file_name(&crd));
            let mut changed = crd.clone();
            changed.spec.names.short_names = Some(vec!["changed".into()]);
            assert_ne!(schema_digest(&changed), annotated, "{}", file_name(&crd));
        }
    }

    /// Finding 5 of issue 13: `kubectl apply` warned `unrecognized format "uint32"`.
    #[test]
    fn no_crd_has_a_format_kubernetes_does_not_know() {
        for crd in all() {
            let yaml = to_yaml(&crd).expect("a CRD serializes to YAML");
            for line in yaml
                .lines()
                .filter(|l| l.trim_start().starts_with("format:"))
            {
                let format = line.trim_start().trim_start_matches("format:").trim();
                assert!(!format.starts_with("uint"), "{}: {line}", file_name(&crd));
            }
        }
    }

    /// Finding 8 of issue 13: the admission message for a too-long name read
    /// `<nil>: Invalid value: …`. Every CRD's name rules now name the field (which the
    /// schema declares, as the API server requires of a fieldPath) and a reason.
    #[test]
    fn name_rules_report_at_metadata_name() {
        for crd in all() {
            let schema = open_api_schema(&crd);
            assert_eq!(
                schema["properties"]["metadata"]["properties"]["name"]["type"],
                "string",
                "{}",
                file_name(&crd)
            );
            let rules = schema["x-kubernetes-validations"]
                .as_array()
                .expect("root rules");
            let name_rules: Vec<&Value> = rules
                .iter()
                .filter(|r| {
                    r["rule"]
                        .as_str()
                        .is_some_and(|r| r.contains("self.metadata.name"))
                })
                .collect();
            assert_eq!(name_rules.len(), 2, "{}", file_name(&crd));
            for rule in name_rules {
                assert_eq!(rule["fieldPath"], NAME_FIELD_PATH, "{rule}");
                assert_eq!(rule["reason"], NAME_RULE_REASON, "{rule}");
            }
        }
    }

    #[test]
    fn a_too_long_set_name_is_reported_at_metadata_name() {
        let object = json!({
            "apiVersion": "perfsweep.io/v1alpha1",
            "kind": "BenchmarkSet",
            "metadata": {"name": "a".repeat(crate::set::MAX_SET_NAME_LEN + 1), "namespace": "ns"},
            "spec": {"template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}}},
        });
        let errors = crate::set::parse_object(&object).expect_err("the name is too long");
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|e| e.starts_with("metadata.name") && e.contains("at most 35 characters")),
            "{text:?}"
        );
    }
}
