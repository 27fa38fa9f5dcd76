//! Container resources per role: the spec's resources for roles that use devices; only
//! compute resources for the others.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::execution::plan::Role;

use super::{RenderError, invalid};

/// What a role that does not use devices keeps of the spec's resources. Everything else
/// (SR-IOV VFs, RDMA shares, GPUs, hugepages) is a scarce per-node device: an MPI
/// launcher holding one would take it from a rank, or make the gang unschedulable.
pub const COMPUTE_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// What a container requests of a compute resource its spec says nothing about (neither
/// request nor limit): (resource, quantity).
///
/// A pod without requests is BestEffort, and Volcano, which admits a gang by the
/// resources its members request, then places members one by one (issue 23: the server
/// ran alone and the client stayed Pending). Small requests make every pod count, so
/// the gang is placed together or not at all; `resources` (or a role's `podOverride`)
/// overrides them, `requests: {cpu: "0", memory: "0"}` included.
pub const DEFAULT_REQUESTS: &[(&str, &str)] = &[("cpu", "100m"), ("memory", "64Mi")];

/// The resources of the container of `role`: the spec's (see [`COMPUTE_RESOURCES`]),
/// with [`DEFAULT_REQUESTS`] for what it leaves unset.
pub fn for_role(
    resources: Option<&ResourceRequirements>,
    role: &Role,
) -> Result<ResourceRequirements, RenderError> {
    let mut kept = from_spec(resources, role)?.unwrap_or_default();
    for (name, quantity) in DEFAULT_REQUESTS {
        let set = |map: &Option<BTreeMap<String, Quantity>>| {
            map.as_ref().is_some_and(|m| m.contains_key(*name))
        };
        if !set(&kept.requests) && !set(&kept.limits) {
            kept.requests
                .get_or_insert_with(BTreeMap::new)
                .insert((*name).to_owned(), Quantity((*quantity).to_owned()));
        }
    }
    Ok(kept)
}

/// What a container requests: its requests, and its limits where it sets no request
/// (the API server defaults a missing request to the limit).
pub fn effective_requests(resources: &ResourceRequirements) -> BTreeMap<String, Quantity> {
    let mut requests = resources.requests.clone().unwrap_or_default();
    for (name, limit) in resources.limits.iter().flatten() {
        requests
            .entry(name.clone())
            .or_insert_with(|| limit.clone());
    }
    requests
}

fn from_spec(
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
