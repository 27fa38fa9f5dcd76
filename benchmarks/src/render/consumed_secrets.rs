//! The Secrets of the namespace a benchmark's pods would mount: the operator creates the
//! pods with its own rights, so a Secret named in a spec (an LLM's `apiKeySecretRef` or
//! `requestHeaderSecrets`, a `podOverride.env` key) would reach a pod whoever wrote the
//! spec, even someone who may not read that Secret. Read from the rendered pods, not
//! from the spec fields, so that every way a Secret gets in is seen; the benchmark's own
//! launch Secret, which the operator makes, is not among them, nor the one key of its
//! set's batch of tokens its token is (any other key of that batch is).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::Rendered;
use super::launch::TokenSource;

/// A Secret may be mounted into benchmark pods only when its owner labelled it so:
/// `perfsweep.io/consumable: "true"`.
pub const CONSUMABLE_LABEL: &str = "perfsweep.io/consumable";

/// The names of the Secrets the rendered pods refer to, besides the benchmark's own.
pub fn consumed_secrets(rendered: &Rendered) -> BTreeSet<String> {
    let own: BTreeSet<&str> = rendered
        .secrets
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    let mut names = BTreeSet::new();
    for spec in rendered
        .pods
        .iter()
        .filter_map(|pod: &Pod| pod.spec.as_ref())
    {
        referenced_by(spec, rendered.token_source.as_ref(), &mut names);
    }
    names.retain(|name| !own.contains(name.as_str()));
    names
}

fn referenced_by(spec: &PodSpec, token: Option<&TokenSource>, names: &mut BTreeSet<String>) {
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for container in containers {
        from_container(container, token, names);
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            names.insert(name);
        }
        let projected = volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
            .filter_map(|source| source.secret.as_ref().map(|s| s.name.clone()));
        names.extend(projected);
    }
    names.extend(
        spec.image_pull_secrets
            .iter()
            .flatten()
            .map(|r| r.name.clone()),
    );
}

fn from_container(
    container: &Container,
    token: Option<&TokenSource>,
    names: &mut BTreeSet<String>,
) {
    let env = container
        .env
        .iter()
        .flatten()
        .filter_map(|var| var.value_from.as_ref())
        .filter_map(|from| from.secret_key_ref.as_ref())
        .filter(|key| {
            token.is_none_or(|token| (&key.name, &key.key) != (&token.secret, &token.key))
        })
        .map(|key| key.name.clone());
    names.extend(env);
    let env_from = container
        .env_from
        .iter()
        .flatten()
        .filter_map(|source| source.secret_ref.as_ref())
        .map(|secret| secret.name.clone());
    names.extend(env_from);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{BenchmarkRef, render};
    use serde_json::json;

    fn rendered(kind: &str, spec: serde_json::Value) -> Rendered {
        let info = crate::kinds::registry::lookup(kind).expect("kind");
        let plan = info.plan(&spec).expect("plan");
        let reference = BenchmarkRef {
            kind: kind.into(),
            name: "b".into(),
            namespace: "team".into(),
            uid: "00000000-0000-0000-0000-000000000001".into(),
        };
        render(&reference, &spec, &plan).expect("renders")
    }

    #[test]
    fn every_secret_a_spec_names_is_found_in_the_pods_and_the_launch_secret_is_not() {
        let llm = rendered(
            "LLMInference",
            json!({
                "endpoint": {"url": "http://vllm:8000", "modelName": "m",
                             "apiKeySecretRef": {"name": "api-key", "key": "k"}},
                "trafficScenarios": ["D(10,10)"], "numConcurrency": [1],
                "requestHeaderSecrets": {"x-token": {"name": "header-token", "key": "t"}},
                "podOverride": {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "x"}}}]},
            }),
        );
        assert_eq!(
            consumed_secrets(&llm).into_iter().collect::<Vec<_>>(),
            ["api-key", "env-secret", "header-token"]
        );
        let iperf = rendered("IPerf", json!({"duration": 3}));
        assert!(
            consumed_secrets(&iperf).is_empty(),
            "the launch Secret is the benchmark's own"
        );
    }

    #[test]
    fn only_its_own_key_of_a_batch_of_tokens_is_passed_over() {
        let source = crate::render::launch::batch_source("set-launch-0a1b2c3d", "b");
        // A podOverride reading another child's key of the same batch.
        let spec = json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "m"},
            "trafficScenarios": ["D(10,10)"], "numConcurrency": [1],
            "podOverride": {"env": [{"name": "STOLEN", "valueFrom": {"secretKeyRef":
                {"name": "set-launch-0a1b2c3d", "key": "other"}}}]},
        });
        let batched = rendered("IPerf", json!({"duration": 3})).with_token_source(&source);
        assert!(
            consumed_secrets(&batched).is_empty(),
            "its own key is the operator's"
        );
        let greedy = rendered("LLMInference", spec).with_token_source(&source);
        assert_eq!(
            consumed_secrets(&greedy).into_iter().collect::<Vec<_>>(),
            ["set-launch-0a1b2c3d"],
            "another child's key must be consented to"
        );
    }
}
