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

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, Secret, SecretKeySelector};

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

/// The pods' variable holding the token, read from the Secret.
pub(crate) fn token_env(benchmark: &str) -> EnvVar {
    EnvVar {
        name: LAUNCH_TOKEN.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: launch_secret_name(benchmark),
                key: LAUNCH_SECRET_KEY.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}
