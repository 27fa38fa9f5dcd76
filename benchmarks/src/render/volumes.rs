//! The plan's volumes as pod volumes, and the PersistentVolumeClaims a benchmark creates
//! for them. Generic: any kind that puts [`RoleVolume`]s in its plan gets them.
//!
//! - [`VolumeSource::Scratch`]: an `emptyDir`.
//! - [`VolumeSource::NewClaim`] with [`ClaimScope::PerReplica`]: one claim per process,
//!   `<benchmark>-<role>-<index>-<volume>`; with [`ClaimScope::Shared`]: one claim,
//!   `<benchmark>-<volume>`, mounted by every process that names the volume. Claims are
//!   labelled and owned like every other object of the benchmark; the engine creates
//!   them before the pods and deletes them at the end (a gang's with its PodGroup).
//! - [`VolumeSource::ExistingClaim`]: mounted by name, never listed in
//!   [`super::Rendered::claims`], so never created nor deleted.
//! - [`VolumeSource::ConfigMap`]: an existing ConfigMap's keys as files, read-only.
//! - [`VolumeSource::Secret`]: an existing Secret's keys as files, read-only.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EmptyDirVolumeSource, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, SecretVolumeSource, Volume, VolumeMount,
};

use crate::api::labels;
use crate::execution::plan::{ClaimScope, Role, RoleVolume, VolumeSource};

use super::{Context, RenderError, invalid, is_dns1123_label};

/// The agent's working directory, an emptyDir (the root filesystem is read-only).
pub const WORKDIR: &str = "/work";
/// Scratch space for the tools (iperf3 creates its send buffer file in `TMPDIR`); also
/// `HOME`, since the non-root user has no home directory in the image.
pub const TMPDIR: &str = "/tmp";

/// Pod volume names of plan volumes get this prefix, so they cannot collide with the
/// agent's own volumes (`work`, `tmp`, `podinfo`).
pub const POD_VOLUME_PREFIX: &str = "vol-";

/// The claim a process of `role` mounts for `volume`, when the benchmark creates it.
pub fn claim_name(benchmark: &str, role: &str, index: u32, volume: &RoleVolume) -> Option<String> {
    match &volume.source {
        VolumeSource::NewClaim {
            scope: ClaimScope::PerReplica,
            ..
        } => Some(format!("{benchmark}-{role}-{index}-{}", volume.name)),
        VolumeSource::NewClaim {
            scope: ClaimScope::Shared,
            ..
        } => Some(format!("{benchmark}-{}", volume.name)),
        _ => None,
    }
}

/// Checks the plan's volumes: names, paths, and that one name means one volume.
pub(crate) fn check(context: &Context) -> Result<(), RenderError> {
    let mut seen: BTreeMap<&str, &RoleVolume> = BTreeMap::new();
    for role in &context.plan.roles {
        let path = format!("plan.roles[{}].volumes", role.name);
        let mut mounts = Vec::new();
        for volume in &role.volumes {
            if !is_dns1123_label(&format!("{POD_VOLUME_PREFIX}{}", volume.name)) {
                return Err(invalid(
                    &path,
                    format!(
                        "volume name {:?} must be a DNS label of at most {} characters",
                        volume.name,
                        63 - POD_VOLUME_PREFIX.len()
                    ),
                ));
            }
            if !volume.mount_path.starts_with('/') || volume.mount_path.contains(':') {
                return Err(invalid(
                    &path,
                    format!(
                        "volume {:?}: mount path {:?} must be absolute",
                        volume.name, volume.mount_path
                    ),
                ));
            }
            if [WORKDIR, TMPDIR].contains(&volume.mount_path.as_str())
                || mounts.contains(&volume.mount_path.as_str())
            {
                return Err(invalid(
                    &path,
                    format!(
                        "volume {:?}: mount path {} is already in use",
                        volume.name, volume.mount_path
                    ),
                ));
            }
            mounts.push(&volume.mount_path);
            if let VolumeSource::ExistingClaim { claim_name } = &volume.source
                && !is_dns_subdomain(claim_name)
            {
                return Err(invalid(
                    &path,
                    format!(
                        "volume {:?}: {claim_name:?} is not a claim name",
                        volume.name
                    ),
                ));
            }
            if let VolumeSource::ConfigMap { name } = &volume.source
                && !is_dns_subdomain(name)
            {
                return Err(invalid(
                    &path,
                    format!("volume {:?}: {name:?} is not a ConfigMap name", volume.name),
                ));
            }
            if let VolumeSource::Secret { name } = &volume.source
                && !is_dns_subdomain(name)
            {
                return Err(invalid(
                    &path,
                    format!("volume {:?}: {name:?} is not a Secret name", volume.name),
                ));
            }
            match seen.insert(&volume.name, volume) {
                Some(other) if other.source != volume.source => {
                    return Err(invalid(
                        &path,
                        format!(
                            "volume {:?} is defined twice with different sources",
                            volume.name
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The claims the benchmark creates, each once, in plan order.
pub(crate) fn claims(context: &Context) -> Result<Vec<PersistentVolumeClaim>, RenderError> {
    let benchmark = &context.benchmark.name;
    let mut claims: Vec<PersistentVolumeClaim> = Vec::new();
    for (role, index) in context.plan.processes() {
        for volume in &role.volumes {
            let VolumeSource::NewClaim { spec, scope } = &volume.source else {
                continue;
            };
            let Some(name) = claim_name(benchmark, &role.name, index, volume) else {
                continue;
            };
            if claims
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(&name))
            {
                continue;
            }
            if !is_dns_subdomain(&name) {
                return Err(invalid(
                    format!("plan.roles[{}].volumes", role.name),
                    format!("claim name {name:?} is longer than 253 characters"),
                ));
            }
            let mut metadata = context.metadata(name);
            if *scope == ClaimScope::PerReplica {
                metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(labels::ROLE.to_owned(), role.name.clone());
            }
            claims.push(PersistentVolumeClaim {
                metadata,
                spec: Some(spec.as_ref().clone()),
                status: None,
            });
        }
    }
    Ok(claims)
}

/// The pod volumes of replica `index` of `role`.
pub(crate) fn pod_volumes(context: &Context, role: &Role, index: u32) -> Vec<Volume> {
    role.volumes
        .iter()
        .map(|volume| {
            let name = format!("{POD_VOLUME_PREFIX}{}", volume.name);
            let claim = |claim_name: String| Volume {
                name: name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name,
                    read_only: None,
                }),
                ..Volume::default()
            };
            match &volume.source {
                VolumeSource::Scratch => Volume {
                    name: name.clone(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                },
                VolumeSource::ExistingClaim { claim_name } => claim(claim_name.clone()),
                VolumeSource::ConfigMap { name: config_map } => Volume {
                    name: name.clone(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: config_map.clone(),
                        ..ConfigMapVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                VolumeSource::Secret { name: secret } => Volume {
                    name: name.clone(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(secret.clone()),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                VolumeSource::NewClaim { .. } => claim(
                    claim_name(&context.benchmark.name, &role.name, index, volume)
                        .unwrap_or_default(),
                ),
            }
        })
        .collect()
}

/// The container's mounts of the role's volumes.
pub(crate) fn mounts(role: &Role) -> Vec<VolumeMount> {
    role.volumes
        .iter()
        .map(|volume| VolumeMount {
            name: format!("{POD_VOLUME_PREFIX}{}", volume.name),
            mount_path: volume.mount_path.clone(),
            read_only: matches!(
                volume.source,
                VolumeSource::ConfigMap { .. } | VolumeSource::Secret { .. }
            )
            .then_some(true),
            ..VolumeMount::default()
        })
        .collect()
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns1123_label)
}
