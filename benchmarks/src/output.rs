//! `outputLocation`: where the operator exports a benchmark's result record and raw
//! evidence when it finishes, in the shape of OME's BenchmarkJob (`storageUri` and
//! `parameters`), on every kind (through [`crate::common::CommonSpec`]) and on a
//! BenchmarkSet (its children inherit it).
//!
//! Not part of the workload: where results go does not change what was measured, so the
//! field is left out of the spec digest (see [`strip`]).

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The spec field.
pub const FIELD: &str = "outputLocation";

/// The credentials of an object storage scheme (`s3`, `gs`, `az`), by the names each
/// cloud's own tools read from the environment and an operator Secret holds them under:
/// the required ones, then the optional ones. `None` for another scheme.
pub fn credential_names(
    scheme: &str,
) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match scheme {
        "s3" => Some((
            &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
            &["AWS_SESSION_TOKEN"],
        )),
        "gs" => Some((&["GOOGLE_SERVICE_ACCOUNT_KEY"], &[])),
        "az" => Some((
            &["AZURE_STORAGE_ACCOUNT_KEY"],
            &["AZURE_STORAGE_ACCOUNT_NAME"],
        )),
        _ => None,
    }
}

/// Where results are exported (as OME's BenchmarkJob `outputLocation`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('pvc://') && !self.storageUri.startsWith('file://')").message("the operator exports to object storage only (s3://, gs://, az://): it mounts no claim and its own filesystem is not kept; for a cluster without object storage run an S3-compatible server (e.g. MinIO) and set parameters.endpoint, or export from the command line with perfsweep run --export file:///dir").field_path(".storageUri"))]
#[x_kube(validation = Rule::new("!has(self.parameters) || self.parameters.all(k, k in ['endpoint', 'region', 'account', 'secretName'])").message("unknown parameter: the parameters are endpoint, region, account and secretName").field_path(".parameters"))]
#[x_kube(validation = Rule::new("!has(self.secretName) || !has(self.parameters) || !('secretName' in self.parameters)").message("name the credentials' Secret once: secretName or parameters.secretName").field_path(".secretName"))]
pub struct OutputLocation {
    /// `s3://bucket/prefix`, `gs://bucket/prefix` or `az://container/prefix` (`file://`
    /// and `pvc://` are for the command line's `--export`; the operator refuses them).
    #[schemars(regex(pattern = r"^(s3|gs|az|file|pvc)://.+$"))]
    pub storage_uri: String,

    /// Sink settings: `endpoint` (an S3-compatible server or an emulator,
    /// `http(s)://host[:port]`), `region` (S3), `account` (the Azure storage account),
    /// and OME's `secretName` (the same as the field secretName).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,

    /// The Secret in the benchmark's namespace holding the credentials, under the keys
    /// the clouds' own tools use: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// (optional `AWS_SESSION_TOKEN`) for s3; `GOOGLE_SERVICE_ACCOUNT_KEY` (the key's
    /// JSON) for gs; `AZURE_STORAGE_ACCOUNT_KEY` (optional `AZURE_STORAGE_ACCOUNT_NAME`)
    /// for az.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
}

impl OutputLocation {
    /// The Secret with the credentials, however it was named.
    pub fn secret(&self) -> Option<&str> {
        self.secret_name
            .as_deref()
            .or(self.parameters.get("secretName").map(String::as_str))
    }

    /// The parameters as the export sink takes them, `secretName` included.
    pub fn sink_parameters(&self) -> BTreeMap<String, String> {
        let mut parameters = self.parameters.clone();
        if let Some(secret) = self.secret() {
            parameters.insert("secretName".into(), secret.to_owned());
        }
        parameters
    }
}

/// `spec` without its output location: the workload, for digests.
pub fn strip(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove(FIELD);
    }
    spec
}

/// Sets `location` on a child spec that names none of its own (the template's wins).
pub fn inherit(child: &mut serde_json::Map<String, Value>, location: Option<&OutputLocation>) {
    let Some(location) = location else {
        return;
    };
    if child.get(FIELD).is_none_or(Value::is_null)
        && let Ok(value) = serde_json::to_value(location)
    {
        child.insert(FIELD.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_secret_may_be_named_either_way_and_is_not_part_of_the_workload() {
        let ome: OutputLocation = serde_json::from_value(json!({
            "storageUri": "s3://b/p", "parameters": {"secretName": "creds", "region": "eu"}
        }))
        .expect("a valid location");
        assert_eq!(ome.secret(), Some("creds"));
        let typed: OutputLocation =
            serde_json::from_value(json!({"storageUri": "s3://b/p", "secretName": "c2"}))
                .expect("a valid location");
        assert_eq!(typed.sink_parameters()["secretName"], "c2");
        let spec = json!({"streams": 2, "outputLocation": {"storageUri": "s3://b"}});
        assert_eq!(strip(&spec), json!({"streams": 2}));
    }

    #[test]
    fn claims_directories_and_unknown_parameters_are_refused_with_what_to_use_instead() {
        let iperf = crate::registry::lookup("IPerf").expect("IPerf is registered");
        let errors = |location: Value| -> String {
            let object = json!({
                "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                "metadata": {"name": "x", "namespace": "ns"},
                "spec": {"outputLocation": location},
            });
            iperf
                .validate(&object)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let claim = errors(json!({"storageUri": "pvc://results/x"}));
        assert!(claim.contains("spec.outputLocation"), "{claim}");
        assert!(
            claim.contains("object storage only") && claim.contains("MinIO"),
            "{claim}"
        );
        assert!(errors(json!({"storageUri": "file:///tmp"})).contains("object storage only"));
        let typo = errors(json!({"storageUri": "s3://b", "parameters": {"endpont": "x"}}));
        assert!(typo.contains("unknown parameter"), "{typo}");
        let twice = errors(json!({"storageUri": "s3://b", "secretName": "a",
                                  "parameters": {"secretName": "b"}}));
        assert!(twice.contains("once"), "{twice}");
        assert_eq!(
            errors(json!({"storageUri": "s3://b/p", "secretName": "creds",
                          "parameters": {"endpoint": "http://minio:9000"}})),
            ""
        );
    }

    #[test]
    fn a_child_inherits_the_sets_location_unless_it_has_its_own() {
        let set: OutputLocation =
            serde_json::from_value(json!({"storageUri": "s3://set/x"})).expect("a valid location");
        let mut plain = serde_json::Map::new();
        inherit(&mut plain, Some(&set));
        assert_eq!(plain[FIELD]["storageUri"], "s3://set/x");
        let mut own = json!({FIELD: {"storageUri": "gs://own"}})
            .as_object()
            .cloned()
            .expect("an object");
        inherit(&mut own, Some(&set));
        assert_eq!(own[FIELD]["storageUri"], "gs://own");
    }
}
