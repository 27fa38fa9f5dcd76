//! The Multus network a benchmark names, checked before anything is created: a
//! `networkName` with no NetworkAttachmentDefinition would otherwise leave every pod in
//! ContainerCreating (Multus refuses the sandbox, which only the pods' events say) until
//! the benchmark's timeout.

use kube::api::{Api, ApiResource, DynamicObject};
use perfsweep_benchmarks::kinds::common::CommonSpec;
use perfsweep_benchmarks::outcome::{Failure, Reason};
use serde_json::Value;

/// Multus's namespace, where a plain `networkName` that replaces the pod network
/// (`defaultNetwork`) is looked up, as Multus does.
const MULTUS_NAMESPACE: &str = "kube-system";

/// Pure: the NetworkAttachmentDefinition the spec names, as (namespace, name); `None`
/// without a `networkName`. A plain name is in the benchmark's namespace, or Multus's
/// for `defaultNetwork`; `namespace/name` names it exactly.
pub(super) fn attachment_of(spec: &Value, namespace: &str) -> Option<(String, String)> {
    let common: CommonSpec = serde_json::from_value(spec.clone()).ok()?;
    let network = common.network_name?;
    Some(match network.split_once('/') {
        Some((namespace, name)) => (namespace.to_owned(), name.to_owned()),
        None if common.default_network => (MULTUS_NAMESPACE.to_owned(), network),
        None => (namespace.to_owned(), network),
    })
}

fn definitions() -> ApiResource {
    ApiResource {
        group: "k8s.cni.cncf.io".into(),
        version: "v1".into(),
        api_version: "k8s.cni.cncf.io/v1".into(),
        kind: "NetworkAttachmentDefinition".into(),
        plural: "network-attachment-definitions".into(),
    }
}

/// Fails when the NetworkAttachmentDefinition the spec names does not exist. One GET,
/// only for benchmarks with a `networkName`. Anything else than "it is not there"
/// (another namespace the operator may not read, the API server busy) leaves the
/// judgement to Multus: the check only makes the common mistake fail at once.
pub(super) async fn check_attachment(
    client: &kube::Client,
    spec: &Value,
    namespace: &str,
) -> Result<(), Failure> {
    let Some((nad_namespace, name)) = attachment_of(spec, namespace) else {
        return Ok(());
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &nad_namespace, &definitions());
    match api.get_opt(&name).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Failure::new(
            Reason::NetworkUnavailable,
            format!(
                "spec.networkName: NetworkAttachmentDefinition {nad_namespace}/{name} does not exist (or Multus's CRD is not installed): create it, or name one that `kubectl get network-attachment-definitions -n {nad_namespace}` lists"
            ),
        )),
        Err(error) => {
            tracing::debug!(%error, network = %format!("{nad_namespace}/{name}"), "cannot check the network; Multus will");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_attachment_is_in_the_benchmarks_namespace_unless_named_or_replacing_the_pod_network() {
        assert_eq!(attachment_of(&json!({}), "team"), None);
        assert_eq!(
            attachment_of(&json!({"networkName": "fast"}), "team"),
            Some(("team".into(), "fast".into()))
        );
        assert_eq!(
            attachment_of(&json!({"networkName": "infra/fast"}), "team"),
            Some(("infra".into(), "fast".into()))
        );
        assert_eq!(
            attachment_of(
                &json!({"networkName": "fast", "defaultNetwork": true}),
                "team"
            ),
            Some(("kube-system".into(), "fast".into()))
        );
    }
}
