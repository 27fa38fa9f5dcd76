//! The benchmark's token: its agents accept control requests (status, stop, barriers)
//! only from holders of it, and a plan that launches remotely ([`Plan::remote_launch`]:
//! an MPI launcher starts its ranks' daemons through `perfsweep rsh`) runs commands only
//! for them.
//!
//! [`Plan::remote_launch`]: crate::execution::plan::Plan::remote_launch
//!
//! Rendering stays pure: it renders the Secret without its token, and every pod reads
//! the token from that Secret by name. The controller fills the token with fresh random
//! bytes ([`with_token`]) when it creates the Secret, once, before the pods; later
//! reconciles find it existing and never change it. The Secret is owned by the
//! benchmark and labelled with it, and deleted by name when the benchmark ends.
//!
//! A set's controller may instead write its children's tokens in batches: one Secret per
//! batch of children it creates at once ([`batch_secret`]), one key per child, each
//! child's own random token. Its children's pods then read their key of it
//! ([`TokenSource`], [`super::Rendered::with_token_source`]): one create per batch
//! instead of one per child. Sharing the object shares no token: a pod reads only the key
//! the operator names, the child's own.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, Pod, Secret, SecretKeySelector};

use super::Context;
use crate::execution::agent_env::{LAUNCH_SECRET_KEY, LAUNCH_TOKEN, launch_secret_name};

/// The Secret for the token, without the token.
pub(crate) fn secret(context: &Context) -> Secret {
    Secret {
        metadata: context.metadata(launch_secret_name(&context.benchmark.name)),
        type_: Some("Opaque".to_owned()),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// Whether `secret` is a launch-token Secret still without its token.
pub fn needs_token(secret: &Secret) -> bool {
    let benchmark = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(crate::api::labels::BENCHMARK));
    benchmark.is_some_and(|b| secret.metadata.name.as_deref() == Some(&launch_secret_name(b)))
        && secret.string_data.is_none()
        && secret.data.is_none()
}

/// `secret` with `token` (random, from the caller) as its data.
pub fn with_token(secret: &Secret, token: &str) -> Secret {
    let mut secret = secret.clone();
    secret.string_data = Some(BTreeMap::from([(
        LAUNCH_SECRET_KEY.to_owned(),
        token.to_owned(),
    )]));
    secret
}

/// The pods' variable holding the token, read from the benchmark's own Secret.
pub(crate) fn token_env(benchmark: &str) -> EnvVar {
    env_from(&TokenSource {
        secret: launch_secret_name(benchmark),
        key: LAUNCH_SECRET_KEY.to_owned(),
    })
}

fn env_from(source: &TokenSource) -> EnvVar {
    EnvVar {
        name: LAUNCH_TOKEN.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: source.secret.clone(),
                key: source.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// Where a benchmark's pods read their launch token: a Secret, and the key in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSource {
    pub secret: String,
    pub key: String,
}

/// The most tokens one batch Secret holds: a key and a token take about 130 bytes, so a
/// full batch stays far under the 1 MiB the API server allows a Secret.
pub const MAX_BATCH_TOKENS: usize = 1000;

/// The name of a batch of a set's launch tokens, `<set>-launch-<suffix>` (the caller's
/// random suffix: batches never reuse a name, so a create never meets an old batch). A
/// child's own Secret is `<set>-<case>-<repetition>-launch`: the two never meet.
pub fn batch_secret_name(set_name: &str, suffix: &str) -> String {
    format!("{set_name}-launch-{suffix}")
}

/// A batch of launch tokens (`tokens`: child name → its token, from the caller's random
/// source), owned by the set; immutable, as a benchmark's own Secret is.
pub fn batch_secret(
    name: String,
    set_name: &str,
    namespace: &str,
    set_uid: &str,
    tokens: BTreeMap<String, String>,
) -> Secret {
    Secret {
        metadata: super::network_policy::set_owned(name, set_name, namespace, set_uid),
        type_: Some("Opaque".to_owned()),
        immutable: Some(true),
        string_data: Some(tokens),
        ..Secret::default()
    }
}

/// Where a child of a batch reads its token: its own key, named after it.
pub fn batch_source(secret: &str, child: &str) -> TokenSource {
    TokenSource {
        secret: secret.to_owned(),
        key: child.to_owned(),
    }
}

/// Where `pod`'s agent reads its token, if it does: the token every pod of a benchmark
/// must share, so a pod made later reads it where the first ones did.
pub fn token_source_of(pod: &Pod) -> Option<TokenSource> {
    let spec = pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .flat_map(|container| container.env.iter().flatten())
        .find(|env| env.name == LAUNCH_TOKEN)
        .and_then(|env| env.value_from.as_ref()?.secret_key_ref.as_ref())
        .map(|selector| TokenSource {
            secret: selector.name.clone(),
            key: selector.key.clone(),
        })
}

/// `pod` reading its token from `source` wherever it read it before.
pub(crate) fn read_token_from(pod: &mut Pod, source: &TokenSource) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    for container in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        for env in container.env.iter_mut().flatten() {
            if env.name == LAUNCH_TOKEN {
                *env = env_from(source);
            }
        }
    }
}
