//! Container resources per role: the spec's resources for roles that use devices; only
//! compute resources for the others.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::plan::Role;

use super::{RenderError, invalid};

/// What a role that does not use devices keeps of the spec's resources. Everything else
/// (SR-IOV VFs, RDMA shares, GPUs, hugepages) is a scarce per-node device: an MPI
/// launcher holding one would take it from a rank, or make the gang unschedulable.
pub const COMPUTE_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// The resources of the container of `role`.
pub fn for_role(
    resources: Option<&ResourceRequirements>,
    role: &Role,
) -> Result<Option<ResourceRequirements>, RenderError> {
    let Some(resources) = resources else {
        return Ok(None);
    };
    if resources.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        // Claims name the pod's resourceClaims, which perfsweep does not create.
        return Err(invalid(
            "spec.resources.claims",
            "dynamic resource claims are not supported; request devices as extended resources",
        ));
    }
    if role.uses_devices {
        return Ok(Some(resources.clone()));
    }
    let compute = |map: &Option<BTreeMap<String, Quantity>>| {
        map.as_ref()
            .map(|m| {
                m.iter()
                    .filter(|(name, _)| COMPUTE_RESOURCES.contains(&name.as_str()))
                    .map(|(name, quantity)| (name.clone(), quantity.clone()))
                    .collect::<BTreeMap<_, _>>()
            })
            .filter(|m| !m.is_empty())
    };
    let kept = ResourceRequirements {
        limits: compute(&resources.limits),
        requests: compute(&resources.requests),
        claims: None,
    };
    Ok((kept.limits.is_some() || kept.requests.is_some()).then_some(kept))
}
