//! `endpoint.tls`: how the load generator verifies an `https://` endpoint.
//!
//! Without it an `https://` URL is verified against the system's roots. A CA bundle
//! comes from a ConfigMap or Secret key (mounted as a volume of the loadgen role) or,
//! where the file already is on the machine (the local backend), a path.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::KeyRef;
use crate::execution::plan::{RoleVolume, VolumeSource};

/// TLS settings of the endpoint: at most one CA source, and no CA with
/// `insecureSkipVerify`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.caConfigMapRef), has(self.caSecretRef), has(self.caFile)].filter(x, x).size() <= 1").message("set at most one of caConfigMapRef, caSecretRef and caFile"))]
#[x_kube(validation = Rule::new("!(has(self.insecureSkipVerify) && self.insecureSkipVerify) || !(has(self.caConfigMapRef) || has(self.caSecretRef) || has(self.caFile))").message("insecureSkipVerify verifies nothing: drop the CA or the flag").field_path(".insecureSkipVerify"))]
#[serde(rename_all = "camelCase")]
pub struct EndpointTls {
    /// Accept any server certificate (handshake signatures are still checked). For
    /// testing only: the endpoint's identity is not verified.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
    /// A PEM CA bundle in a ConfigMap of the benchmark's namespace, trusted in addition
    /// to the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_config_map_ref: Option<KeyRef>,
    /// A PEM CA bundle in a Secret of the benchmark's namespace, trusted in addition to
    /// the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<KeyRef>,
    /// A PEM CA bundle at this path where the load generator runs: for
    /// `perfsweep run --local` (on Kubernetes it is a path inside the agent's image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub ca_file: Option<String>,
}

/// The volume a CA bundle from a ConfigMap or Secret is mounted as.
pub const CA_VOLUME: &str = "ca";

impl EndpointTls {
    /// The load generator's TLS arguments, and the volume the CA bundle is on: a
    /// ConfigMap or Secret key is `--ca-file {volume:ca}/KEY`, a `caFile` is passed as is.
    pub fn plan(&self) -> (Vec<String>, Option<RoleVolume>) {
        let mut args = Vec::new();
        if self.insecure_skip_verify {
            args.push("--insecure-skip-verify".into());
        }
        let volume = |key: &KeyRef, source: VolumeSource| {
            (
                format!("{{volume:{CA_VOLUME}}}/{}", key.key),
                Some(RoleVolume {
                    name: CA_VOLUME.into(),
                    mount_path: format!("/perfsweep/{CA_VOLUME}"),
                    source,
                }),
            )
        };
        let (ca_file, ca_volume) = if let Some(key) = &self.ca_config_map_ref {
            volume(
                key,
                VolumeSource::ConfigMap {
                    name: key.name.clone(),
                },
            )
        } else if let Some(key) = &self.ca_secret_ref {
            volume(
                key,
                VolumeSource::Secret {
                    name: key.name.clone(),
                },
            )
        } else if let Some(path) = &self.ca_file {
            (path.clone(), None)
        } else {
            return (args, None);
        };
        args.extend(["--ca-file".into(), ca_file]);
        (args, ca_volume)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{LLMInferenceSpec, plan::plan};
    use crate::execution::plan::{PeerAddresses, Plan, VolumeSource, resolve_args, volume_key};

    fn planned(endpoint: Value) -> Plan {
        let spec: LLMInferenceSpec =
            serde_json::from_value(json!({"endpoint": endpoint})).expect("valid spec");
        plan(&spec).expect("plan")
    }

    fn loadgen_args(plan: &Plan) -> String {
        let mut peers = PeerAddresses::new();
        peers.extend(plan.volume_paths(None));
        resolve_args(&plan.role("loadgen").expect("loadgen").command.args, &peers)
            .expect("resolvable")
            .join(" ")
    }

    fn errors(endpoint: Value) -> Vec<String> {
        let info = crate::kinds::registry::lookup("LLMInference").expect("registered");
        let object = json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
            "metadata": {"name": "t", "namespace": "default"}, "spec": {"endpoint": endpoint},
        });
        info.validate(&object)
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    }

    #[test]
    fn a_ca_from_a_secret_is_a_read_only_volume_named_by_the_ca_file_argument() {
        let plan = planned(json!({
            "url": "https://vllm:8443", "modelName": "m",
            "tls": {"caSecretRef": {"name": "vllm-ca", "key": "ca.crt"}},
        }));
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert_eq!(loadgen.volumes.len(), 1);
        assert_eq!(loadgen.volumes[0].name, "ca");
        assert_eq!(loadgen.volumes[0].mount_path, "/perfsweep/ca");
        assert_eq!(
            loadgen.volumes[0].source,
            VolumeSource::Secret {
                name: "vllm-ca".into()
            }
        );
        let args = loadgen_args(&plan);
        assert!(
            args.contains("--url https://vllm:8443 "),
            "the url is kept: {args}"
        );
        assert!(args.contains("--ca-file /perfsweep/ca/ca.crt"), "{args}");
        assert!(!args.contains("--insecure-skip-verify"), "{args}");
        // The local backend resolves the same placeholder to its volume directory.
        let local = plan.volume_paths(Some(std::path::Path::new("/scratch/volumes")));
        assert_eq!(local[&volume_key("ca")], ["/scratch/volumes/ca"]);
    }

    #[test]
    fn a_ca_from_a_config_map_mounts_the_config_map() {
        let plan = planned(json!({
            "service": {"name": "vllm", "port": 8443},
            "modelName": "m",
            "tls": {"caConfigMapRef": {"name": "trust", "key": "bundle.pem"}},
        }));
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert_eq!(
            loadgen.volumes[0].source,
            VolumeSource::ConfigMap {
                name: "trust".into()
            }
        );
        let args = loadgen_args(&plan);
        assert!(
            args.contains("--url https://vllm:8443 "),
            "a service with tls is reached over https: {args}"
        );
        assert!(
            args.contains("--ca-file /perfsweep/ca/bundle.pem"),
            "{args}"
        );
    }

    #[test]
    fn a_ca_file_or_skipping_verification_needs_no_volume() {
        let plan = planned(json!({
            "url": "https://127.0.0.1:8443", "modelName": "m",
            "tls": {"caFile": "/etc/ssl/private-ca.pem"},
        }));
        assert!(plan.role("loadgen").expect("loadgen").volumes.is_empty());
        assert!(loadgen_args(&plan).contains("--ca-file /etc/ssl/private-ca.pem"));

        let plan = planned(json!({
            "url": "https://127.0.0.1:8443", "modelName": "m",
            "tls": {"insecureSkipVerify": true},
        }));
        let args = loadgen_args(&plan);
        assert!(args.contains("--insecure-skip-verify"), "{args}");
        assert!(!args.contains("--ca-file"), "{args}");

        // No tls: plain arguments, system roots for an https url.
        let plan = planned(json!({"url": "https://vllm:8443", "modelName": "m"}));
        let args = loadgen_args(&plan);
        assert!(
            !args.contains("--ca-file") && !args.contains("--insecure"),
            "{args}"
        );
        assert!(plan.role("loadgen").expect("loadgen").volumes.is_empty());
    }

    #[test]
    fn cel_accepts_one_ca_source_and_rejects_two() {
        let base = json!({"url": "https://vllm:8443", "modelName": "m"});
        let with_tls = |tls: Value| {
            let mut endpoint = base.clone();
            endpoint["tls"] = tls;
            errors(endpoint)
        };
        assert_eq!(
            with_tls(json!({"caSecretRef": {"name": "ca", "key": "ca.crt"}})),
            Vec::<String>::new()
        );
        let both = with_tls(json!({
            "caSecretRef": {"name": "ca", "key": "ca.crt"},
            "caConfigMapRef": {"name": "ca", "key": "ca.crt"},
        }));
        assert!(
            both.iter()
                .any(|e| e.contains("at most one of caConfigMapRef")),
            "{both:?}"
        );
        let file_and_ref = with_tls(json!({
            "caFile": "/ca.pem", "caConfigMapRef": {"name": "ca", "key": "ca.crt"},
        }));
        assert!(!file_and_ref.is_empty(), "caFile with a ref is refused");
        let contradiction = with_tls(json!({"insecureSkipVerify": true, "caFile": "/ca.pem"}));
        assert!(
            contradiction
                .iter()
                .any(|e| e.contains("insecureSkipVerify verifies nothing")),
            "{contradiction:?}"
        );
        let missing_key = with_tls(json!({"caSecretRef": {"name": "ca"}}));
        assert!(!missing_key.is_empty(), "a ref needs its key");
    }

    #[test]
    fn cel_refuses_tls_on_plain_http_and_on_endpoints_it_cannot_change() {
        let plain = errors(json!({
            "url": "http://vllm:8000", "modelName": "m", "tls": {"insecureSkipVerify": true},
        }));
        assert!(
            plain
                .iter()
                .any(|e| e.contains("tls needs an https:// url")),
            "{plain:?}"
        );
        let sim = errors(json!({"simulator": {}, "tls": {"insecureSkipVerify": true}}));
        assert!(
            sim.iter()
                .any(|e| e.contains("tls applies to url and service")),
            "{sim:?}"
        );
    }
}
