//! `outputLocation`: where the operator exports a benchmark's result record and raw
//! evidence when it finishes, in the shape of OME's BenchmarkJob (`storageUri` and
//! `parameters`), on every kind (through [`crate::kinds::common::CommonSpec`]) and on a
//! BenchmarkSet (its children inherit it).
//!
//! Not part of the workload: where results go does not change what was measured, so the
//! field is left out of the spec digest (see [`strip`]).

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::validation::FieldError;

/// The spec field.
pub const FIELD: &str = "outputLocation";

/// The credentials of an export scheme, by the names each cloud's own tools read from
/// the environment and an operator Secret holds them under: the required ones, then the
/// optional ones (any of which may stand in for the required ones, e.g. an Azure SAS
/// token for the account key). `None` for a scheme without credentials.
pub fn credential_names(
    scheme: &str,
) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match scheme {
        // OCI Object Storage through its S3-compatible API: a Customer Secret Key.
        "s3" | "oci" => Some((
            &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
            &["AWS_SESSION_TOKEN"],
        )),
        "gs" => Some((&["GOOGLE_SERVICE_ACCOUNT_KEY"], &[])),
        "az" => Some((
            &["AZURE_STORAGE_ACCOUNT_KEY"],
            &[
                "AZURE_STORAGE_ACCOUNT_NAME",
                "AZURE_STORAGE_CONNECTION_STRING",
                "AZURE_STORAGE_SAS_TOKEN",
            ],
        )),
        "github" => Some((&["GITHUB_TOKEN"], &[])),
        _ => None,
    }
}

/// The parameters an `outputLocation` takes (besides OME's credential parameters, which
/// [`move_inline_credentials`] takes out into a Secret).
pub const PARAMETERS: &[&str] = &["endpoint", "region", "account", "secretName"];

/// OME's credential parameters and the Secret key each is kept under: the name the
/// cloud's own tools read it from the environment by.
pub const INLINE_CREDENTIALS: &[(&str, &str)] = &[
    ("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
    ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
    ("aws_profile", "AWS_PROFILE"),
    ("azure_account_key", "AZURE_STORAGE_ACCOUNT_KEY"),
    ("azure_connection_string", "AZURE_STORAGE_CONNECTION_STRING"),
    ("azure_sas_token", "AZURE_STORAGE_SAS_TOKEN"),
    ("gcp_credentials_path", "GOOGLE_APPLICATION_CREDENTIALS"),
    ("github_token", "GITHUB_TOKEN"),
    // OCI's own authentication settings: kept with the credentials, though writing
    // through OCI's S3-compatible API takes a Customer Secret Key.
    ("auth", "OCI_AUTH"),
    ("config_file", "OCI_CONFIG_FILE"),
    ("profile", "OCI_PROFILE"),
    ("security_token", "OCI_SECURITY_TOKEN"),
];

/// OME's setting parameters and the perfsweep parameter each becomes (`None`: not
/// needed, dropped with a note).
pub const RENAMED_PARAMETERS: &[(&str, Option<&str>)] = &[
    ("aws_region", Some("region")),
    ("azure_account_name", Some("account")),
    ("gcp_project_id", None),
];

/// What [`move_inline_credentials`] did.
#[derive(Debug, Default, PartialEq)]
pub struct MovedCredentials {
    /// The Secret to create (a `v1/Secret` with `stringData`), when credentials moved.
    pub secret: Option<Value>,
    /// Warnings for the user: which parameters moved where.
    pub warnings: Vec<String>,
    /// What else was changed (renamed or dropped parameters).
    pub notes: Vec<String>,
}

/// The name of the Secret that inline credentials of benchmark `name` move into.
pub fn credentials_secret_name(name: &str) -> String {
    format!("{name}-output-credentials")
}

/// Takes OME's inline credential parameters out of `spec.outputLocation` of `document`
/// into a Secret in the document's namespace, and names it in `secretName`; renames
/// OME's setting parameters to perfsweep's. Credentials in a spec are readable by anyone
/// who can read the benchmark (and end up in status and records); in a Secret they are
/// not. Pure: the Secret is returned, not created.
pub fn move_inline_credentials(document: &mut Value) -> Result<MovedCredentials, String> {
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("benchmark")
        .to_owned();
    let namespace = document
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut moved = MovedCredentials::default();
    let Some(location) = document
        .pointer_mut("/spec/outputLocation")
        .and_then(Value::as_object_mut)
    else {
        return Ok(moved);
    };
    let Some(parameters) = location
        .get_mut("parameters")
        .and_then(Value::as_object_mut)
    else {
        return Ok(moved);
    };
    let mut data = serde_json::Map::new();
    for (parameter, key) in INLINE_CREDENTIALS {
        if let Some(value) = parameters.remove(*parameter) {
            data.insert((*key).to_owned(), value);
            moved.warnings.push(format!(
                "spec.outputLocation.parameters.{parameter} is a credential: moved into Secret \
                 {} (key {key}); apply that Secret with the benchmark, and keep credentials \
                 out of specs",
                credentials_secret_name(&name)
            ));
        }
    }
    for (parameter, renamed) in RENAMED_PARAMETERS {
        let Some(value) = parameters.remove(*parameter) else {
            continue;
        };
        match renamed {
            Some(renamed) if !parameters.contains_key(*renamed) => {
                parameters.insert((*renamed).to_owned(), value);
                moved.notes.push(format!(
                    "spec.outputLocation.parameters.{parameter} became parameters.{renamed}"
                ));
            }
            Some(renamed) => moved.notes.push(format!(
                "spec.outputLocation.parameters.{parameter} dropped: parameters.{renamed} is set"
            )),
            None => moved.notes.push(format!(
                "spec.outputLocation.parameters.{parameter} dropped: not needed to write objects"
            )),
        }
    }
    if data.is_empty() {
        return Ok(moved);
    }
    let named = location
        .get("secretName")
        .or_else(|| location.get("parameters").and_then(|p| p.get("secretName")))
        .and_then(Value::as_str);
    if let Some(named) = named {
        return Err(format!(
            "inline credentials and Secret {named} both given: keep the credentials in \
             the Secret only"
        ));
    }
    let secret_name = credentials_secret_name(&name);
    location.insert("secretName".into(), Value::String(secret_name.clone()));
    let mut metadata = serde_json::json!({"name": secret_name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = Value::String(namespace);
    }
    moved.secret = Some(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": metadata,
        "type": "Opaque", "stringData": data,
    }));
    Ok(moved)
}

/// Where results are exported (as OME's BenchmarkJob `outputLocation`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('file://')").message("the operator's own filesystem is not kept: export to a claim with pvc://claim/path, or to object storage").field_path(".storageUri"))]
#[x_kube(validation = Rule::new("!has(self.parameters) || self.parameters.all(k, k in ['endpoint', 'region', 'account', 'secretName'])").message("unknown parameter: the parameters are endpoint, region, account and secretName (OME's credential parameters belong in a Secret: perfsweep render moves them there)").field_path(".parameters"))]
#[x_kube(validation = Rule::new("!has(self.secretName) || !has(self.parameters) || !('secretName' in self.parameters)").message("name the credentials' Secret once: secretName or parameters.secretName").field_path(".secretName"))]
// The parts that become a host name the operator sends credentials to (issue 34): each
// rule is `host_part_errors` in CEL, so admission, `perfsweep validate` and the operator
// refuse the same values.
#[x_kube(validation = Rule::new("!has(self.parameters) || !('account' in self.parameters) || self.parameters['account'].matches('^[a-z0-9]{3,24}$')").message("account: an Azure storage account name is 3 to 24 lowercase letters and digits (it becomes the host ACCOUNT.blob.core.windows.net)").field_path(".parameters"))]
#[x_kube(validation = Rule::new("!has(self.parameters) || !('region' in self.parameters) || self.parameters['region'].matches('^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$')").message("region: a region is lowercase letters, digits and hyphens, like us-east-1 (it becomes part of the host)").field_path(".parameters"))]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('s3://') || self.storageUri.matches('^s3://[A-Za-z0-9._-]+(@[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?(/.*)?$')").message("expected s3://BUCKET[@REGION]/prefix, the bucket letters, digits, dots, hyphens and underscores, the region lowercase letters, digits and hyphens").field_path(".storageUri"))]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('gs://') || self.storageUri.matches('^gs://[A-Za-z0-9._-]+(/.*)?$')").message("expected gs://BUCKET/prefix, the bucket letters, digits, dots, hyphens and underscores").field_path(".storageUri"))]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('az://') || (has(self.parameters) && 'account' in self.parameters ? self.storageUri.matches('^az://[a-z0-9-]+(/.*)?$') : self.storageUri.matches('^az://[a-z0-9]{3,24}([.]blob[.]core[.]windows[.]net)?/[a-z0-9-]+(/.*)?$'))").message("expected az://ACCOUNT/CONTAINER/prefix (az://CONTAINER/prefix with parameters.account), the account 3 to 24 lowercase letters and digits, the container lowercase letters, digits and hyphens").field_path(".storageUri"))]
#[x_kube(validation = Rule::new("!self.storageUri.startsWith('oci://') || self.storageUri.matches('^oci://n/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/b/[A-Za-z0-9._-]+(/o(/.*)?)?$')").message("expected oci://n/NAMESPACE/b/BUCKET/o/prefix, the namespace lowercase letters, digits and hyphens (it becomes part of the host)").field_path(".storageUri"))]
pub struct OutputLocation {
    /// OME's formats: `s3://bucket[@region]/prefix`, `gs://bucket/prefix`,
    /// `az://account/container/prefix` (`az://container/prefix` with the parameter
    /// `account`), `oci://n/{namespace}/b/{bucket}/o/{prefix}` (through OCI's
    /// S3-compatible API), `github://owner/repo[@tag]` (release assets) and
    /// `pvc://[namespace:]claim/path` (written by the benchmark's own pod into the
    /// claim); `file:///dir` for the command line only.
    #[schemars(
        regex(pattern = r"^(s3|gs|az|oci|github|file|pvc)://.+$"),
        length(max = 2048)
    )]
    pub storage_uri: String,

    /// Sink settings: `endpoint` (an S3-compatible server or an emulator,
    /// `http(s)://host[:port]`), `region` (S3), `account` (the Azure storage account),
    /// and OME's `secretName` (the same as the field secretName).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "parameters_schema")]
    pub parameters: BTreeMap<String, String>,

    /// The Secret in the benchmark's namespace holding the credentials, under the keys
    /// the clouds' own tools use: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// (optional `AWS_SESSION_TOKEN`) for s3 and oci (an OCI Customer Secret Key);
    /// `GOOGLE_SERVICE_ACCOUNT_KEY` (the key's JSON) for gs; `AZURE_STORAGE_ACCOUNT_KEY`,
    /// `AZURE_STORAGE_CONNECTION_STRING` or `AZURE_STORAGE_SAS_TOKEN` (optional
    /// `AZURE_STORAGE_ACCOUNT_NAME`) for az; `GITHUB_TOKEN` for github.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
}

/// Bounded, so that the CEL rules on the values stay within the API server's cost
/// budget.
fn parameters_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 8,
        "additionalProperties": {"type": "string", "maxLength": 2048}
    })
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

/// What is wrong with the parts of an output location that become a host name (an
/// Azure account, a region, an OCI namespace) or sit beside it (a bucket): a value such
/// as `evil.example?` or `x@10.0.0.1:80/` would send the credentials to a host of the
/// author's choosing. Paths are relative to `outputLocation`. The CEL rules on
/// [`OutputLocation`] say the same, for admission.
pub fn host_part_errors(
    storage_uri: &str,
    parameters: &BTreeMap<String, String>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(account) = parameters.get("account")
        && !is_azure_account(account)
    {
        errors.push(FieldError::new(
            "parameters.account",
            format!(
                "{account:?} is not an Azure storage account name (3 to 24 lowercase letters \
                 and digits; it becomes the host ACCOUNT.blob.core.windows.net)"
            ),
        ));
    }
    if let Some(region) = parameters.get("region")
        && !is_dns_label(region)
    {
        errors.push(FieldError::new(
            "parameters.region",
            format!(
                "{region:?} is not a region (lowercase letters, digits and hyphens, like \
                 us-east-1; it becomes part of the host)"
            ),
        ));
    }
    let Some((scheme, rest)) = storage_uri.split_once("://") else {
        return errors;
    };
    let (first, after) = rest.split_once('/').unwrap_or((rest, ""));
    let refused = match scheme {
        "s3" => {
            let (bucket, region) = first.split_once('@').unwrap_or((first, "us-east-1"));
            (!is_bucket(bucket) || !is_dns_label(region)).then_some(
                "expected s3://BUCKET[@REGION]/prefix, the bucket letters, digits, dots, \
                 hyphens and underscores, the region lowercase letters, digits and hyphens",
            )
        }
        "gs" => (!is_bucket(first)).then_some(
            "expected gs://BUCKET/prefix, the bucket letters, digits, dots, hyphens and \
             underscores",
        ),
        "az" => {
            let container = if parameters.contains_key("account") {
                first
            } else {
                let account = first
                    .strip_suffix(".blob.core.windows.net")
                    .unwrap_or(first);
                let container = after.split('/').next().unwrap_or_default();
                if is_azure_account(account) {
                    container
                } else {
                    ""
                }
            };
            (!is_container(container)).then_some(
                "expected az://ACCOUNT/CONTAINER/prefix (az://CONTAINER/prefix with \
                 parameters.account), the account 3 to 24 lowercase letters and digits, the \
                 container lowercase letters, digits and hyphens",
            )
        }
        "oci" => {
            let parts: Vec<&str> = rest.splitn(5, '/').collect();
            let fits = matches!(parts.as_slice(),
                ["n", namespace, "b", bucket, ..] if is_dns_label(namespace) && is_bucket(bucket));
            (!fits).then_some(
                "expected oci://n/NAMESPACE/b/BUCKET/o/prefix, the namespace lowercase letters, \
                 digits and hyphens (it becomes part of the host)",
            )
        }
        _ => None,
    };
    if let Some(message) = refused {
        errors.push(FieldError::new(
            "storageUri",
            format!("{storage_uri:?}: {message}"),
        ));
    }
    errors
}

/// A DNS label: what may stand between two dots of a host name.
fn is_dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_azure_account(text: &str) -> bool {
    (3..=24).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn is_container(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A bucket name of any of the services: nothing that could end a host or start a path,
/// a query, a port or credentials.
fn is_bucket(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The plan volume a `pvc://` output location's claim is mounted as.
pub const EXPORT_VOLUME: &str = "export";

/// A `pvc://[namespace:]claim/path` output location: `(namespace, claim, path)`.
pub fn claim_location(storage_uri: &str) -> Option<(Option<&str>, &str, &str)> {
    let rest = storage_uri.strip_prefix("pvc://")?;
    let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (namespace, claim) = match claim.split_once(':') {
        Some((namespace, claim)) => (Some(namespace), claim),
        None => (None, claim),
    };
    Some((namespace, claim, path.trim_matches('/')))
}

/// A `pvc://` output location is written by the benchmark's own pods: the result role
/// mounts the claim (volume [`EXPORT_VOLUME`]) and its agent writes its report and the
/// raw evidence under `<path>/<run>/` (see [`crate::execution::agent_env::EXPORT_DIR`]).
/// The operator mounts no claim, and an air-gapped cluster needs no object storage.
pub fn export_into_claim(spec: &Value, plan: &mut crate::execution::plan::Plan) {
    let Some(uri) = spec
        .pointer("/outputLocation/storageUri")
        .and_then(Value::as_str)
    else {
        return;
    };
    let Some((_, claim, path)) = claim_location(uri) else {
        return;
    };
    let result_role = plan.result_role.clone();
    let Some(role) = plan.roles.iter_mut().find(|r| r.name == result_role) else {
        return;
    };
    role.volumes.push(crate::execution::plan::RoleVolume {
        name: EXPORT_VOLUME.into(),
        mount_path: format!("/perfsweep/{EXPORT_VOLUME}"),
        source: crate::execution::plan::VolumeSource::ExistingClaim {
            claim_name: claim.to_owned(),
        },
    });
    let dir = if path.is_empty() {
        format!("{{volume:{EXPORT_VOLUME}}}")
    } else {
        format!("{{volume:{EXPORT_VOLUME}}}/{path}")
    };
    role.env
        .insert(crate::execution::agent_env::EXPORT_DIR.into(), dir);
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

    fn parameters(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Issue 34, finding 1: an Azure account or a region is part of the host; one that
    /// could carry another host (`evil.example?`, `x@10.0.0.1:80/`) is refused, naming
    /// the parameter.
    #[test]
    fn a_host_part_that_could_name_another_host_is_refused_naming_it() {
        for (uri, pairs, field) in [
            (
                "az://c/p",
                vec![("account", "evil.example?")],
                "parameters.account",
            ),
            (
                "az://c/p",
                vec![("account", "10.77.0.1:9000/x")],
                "parameters.account",
            ),
            (
                "s3://b/p",
                vec![("region", "x@10.77.0.1:9000/")],
                "parameters.region",
            ),
            (
                "s3://b/p",
                vec![("region", "evil.example")],
                "parameters.region",
            ),
            (
                "oci://n/ns/b/b/o/p",
                vec![("region", "a/b")],
                "parameters.region",
            ),
            ("az://evil.example?/c/p", vec![], "storageUri"),
            ("az://10.77.0.1:9000/c/p", vec![], "storageUri"),
            ("s3://b@x.evil.example/p", vec![], "storageUri"),
            ("s3://b@10.0.0.1:80/p", vec![], "storageUri"),
            ("s3://b:80@x/p", vec![], "storageUri"),
            ("gs://evil.example:80@b/p", vec![], "storageUri"),
            (
                "oci://n/evil.example?/b/b/o/p",
                vec![("region", "eu-1")],
                "storageUri",
            ),
        ] {
            let errors = host_part_errors(uri, &parameters(&pairs));
            assert!(
                errors.iter().any(|e| e.path == field),
                "{uri} {pairs:?}: {errors:?}"
            );
        }
    }

    /// The CRD's CEL rules (which admission runs) refuse what [`host_part_errors`]
    /// refuses, and admit what it admits.
    #[test]
    fn admission_judges_host_parts_as_the_operator_does() {
        let kind = crate::kinds::registry::lookup("IPerf").expect("IPerf");
        let cases = [
            ("az://c/p", vec![("account", "evil.example?")], false),
            ("s3://b/p", vec![("region", "x@10.77.0.1:9000/")], false),
            ("az://evil.example?/c/p", vec![], false),
            ("s3://b@10.0.0.1:80/p", vec![], false),
            ("gs://evil.example:80@b/p", vec![], false),
            (
                "oci://n/evil.example?/b/b/o/p",
                vec![("region", "eu-1")],
                false,
            ),
            ("az://myaccount/container/p", vec![], true),
            (
                "az://myaccount.blob.core.windows.net/container/p",
                vec![],
                true,
            ),
            ("az://container/p", vec![("account", "myaccount")], true),
            (
                "s3://bucket@eu-west-3/p/q",
                vec![("endpoint", "https://s3.example")],
                true,
            ),
            (
                "oci://n/axaxnpcrorw5/b/bucket/o/p",
                vec![("region", "us-phoenix-1")],
                true,
            ),
        ];
        for (uri, pairs, fine) in cases {
            let object = json!({
                "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                "metadata": {"name": "x"},
                "spec": {"outputLocation": {"storageUri": uri, "parameters": parameters(&pairs)}},
            });
            let errors: Vec<_> = kind
                .validate(&object)
                .into_iter()
                .filter(|e| e.path.starts_with("spec.outputLocation"))
                .collect();
            assert_eq!(errors.is_empty(), fine, "{uri} {pairs:?}: {errors:?}");
            assert_eq!(
                host_part_errors(uri, &parameters(&pairs)).is_empty(),
                fine,
                "{uri} {pairs:?}"
            );
        }
    }

    #[test]
    fn real_host_parts_pass() {
        for (uri, pairs) in [
            ("az://myaccount/container/p", vec![]),
            ("az://myaccount.blob.core.windows.net/container/p", vec![]),
            ("az://container/p", vec![("account", "myaccount")]),
            ("s3://my.bucket_1/p", vec![("region", "us-east-1")]),
            ("s3://bucket@eu-west-3/p/q", vec![]),
            ("gs://bucket/p", vec![]),
            (
                "oci://n/axaxnpcrorw5/b/bucket/o/p",
                vec![("region", "us-phoenix-1")],
            ),
            ("github://o/r@v1", vec![]),
            ("pvc://claim/p", vec![]),
        ] {
            assert_eq!(host_part_errors(uri, &parameters(&pairs)), vec![], "{uri}");
        }
    }

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
    fn directories_and_unknown_parameters_are_refused_with_what_to_use_instead() {
        let iperf = crate::kinds::registry::lookup("IPerf").expect("IPerf is registered");
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
        assert_eq!(errors(json!({"storageUri": "pvc://results/x"})), "");
        let local = errors(json!({"storageUri": "file:///tmp"}));
        assert!(local.contains("spec.outputLocation"), "{local}");
        assert!(local.contains("pvc://claim/path"), "{local}");
        let inline =
            errors(json!({"storageUri": "s3://b", "parameters": {"aws_secret_access_key": "x"}}));
        assert!(inline.contains("belong in a Secret"), "{inline}");
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

    #[test]
    fn inline_credentials_move_into_a_secret_and_settings_are_renamed() {
        let mut document = json!({
            "metadata": {"name": "bench", "namespace": "ns"},
            "spec": {"outputLocation": {"storageUri": "s3://b@us-east-1/p", "parameters": {
                "aws_access_key_id": "AKID", "aws_secret_access_key": "very-secret",
                "aws_region": "eu-west-1", "gcp_project_id": "p"}}}
        });
        let moved = move_inline_credentials(&mut document).expect("moved");
        let location = &document["spec"]["outputLocation"];
        assert_eq!(location["secretName"], "bench-output-credentials");
        assert_eq!(location["parameters"], json!({"region": "eu-west-1"}));
        assert!(!document.to_string().contains("very-secret"));
        let secret = moved.secret.expect("a Secret");
        assert_eq!(
            secret["metadata"],
            json!({"name": "bench-output-credentials", "namespace": "ns"})
        );
        assert_eq!(secret["stringData"]["AWS_SECRET_ACCESS_KEY"], "very-secret");
        assert_eq!(secret["stringData"]["AWS_ACCESS_KEY_ID"], "AKID");
        assert_eq!(moved.warnings.len(), 2, "{:?}", moved.warnings);
        assert!(moved.warnings.iter().all(|w| !w.contains("very-secret")));
        assert_eq!(moved.notes.len(), 2, "{:?}", moved.notes);

        let mut both = json!({"metadata": {"name": "b"}, "spec": {"outputLocation": {
            "storageUri": "s3://b", "secretName": "s", "parameters": {"github_token": "t"}}}});
        assert!(
            move_inline_credentials(&mut both)
                .expect_err("both")
                .contains("both given")
        );
        let mut none = json!({"metadata": {"name": "b"}, "spec": {"outputLocation": {"storageUri": "pvc://c/p"}}});
        assert_eq!(
            move_inline_credentials(&mut none),
            Ok(MovedCredentials::default())
        );
    }
}
