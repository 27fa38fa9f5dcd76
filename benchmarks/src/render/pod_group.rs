//! The Volcano PodGroup that gang-schedules a benchmark: no pod is bound until every
//! pod of the plan can be, so no role starts (and skews the measurement, or times out
//! waiting) while another is still pending.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::volcano::{PodGroup, PodGroupSpec};

use super::{Context, RenderError, invalid, resources};
use crate::formats::quantity::Milli;

/// The PodGroup named after the benchmark, for its `pods`.
pub(crate) fn render(context: &Context, pods: &[Pod]) -> Result<PodGroup, RenderError> {
    let count = |n: u32| {
        i32::try_from(n).map_err(|_| invalid("plan.roles", format!("{n} pods are too many")))
    };
    // One task per role with all its replicas: pods carry the role as their
    // `volcano.sh/task-spec` annotation, which is what Volcano counts them by.
    let mut min_task_member = BTreeMap::new();
    for role in context.plan.roles.iter().filter(|r| r.replicas > 0) {
        min_task_member.insert(role.name.clone(), count(role.replicas)?);
    }
    if let Some(queue) = &context.common.queue {
        // Volcano's CRD requires a DNS subdomain; fail here rather than at create time.
        if !is_dns1123_subdomain(queue) {
            return Err(invalid(
                "spec.queue",
                format!("{queue:?} must be a lowercase DNS subdomain (a Volcano queue name)"),
            ));
        }
    }
    Ok(PodGroup {
        metadata: context.metadata(context.benchmark.name.clone()),
        spec: PodGroupSpec {
            min_member: Some(count(context.plan.process_count())?),
            min_resources: Some(min_resources(pods)?),
            min_task_member: (!min_task_member.is_empty()).then_some(min_task_member),
            priority_class_name: context.common.priority_class_name.clone(),
            queue: context.common.queue.clone(),
        },
        status: None,
    })
}

/// What the whole gang requests: the sum over its pods' containers. Volcano enqueues
/// the PodGroup only when the cluster has that much free, so it never binds part of a
/// gang that cannot run whole.
fn min_resources(pods: &[Pod]) -> Result<BTreeMap<String, Quantity>, RenderError> {
    let mut total: BTreeMap<String, Milli> = BTreeMap::new();
    for container in pods
        .iter()
        .filter_map(|pod| pod.spec.as_ref())
        .flat_map(|spec| &spec.containers)
    {
        let Some(resources) = &container.resources else {
            continue;
        };
        for (name, quantity) in resources::effective_requests(resources) {
            let amount = Milli::parse(&quantity.0)
                .map_err(|e| invalid(format!("spec.resources[{name}]"), e))?;
            let sum = total.entry(name).or_default();
            sum.0 = sum.0.checked_add(amount.0).ok_or_else(|| {
                invalid(
                    "spec.resources",
                    "the gang's requests are too large to add up",
                )
            })?;
        }
    }
    Ok(total
        .into_iter()
        .map(|(name, sum)| {
            let binary = name != "cpu";
            (name, sum.to_quantity(binary))
        })
        .collect())
}

/// Dot-separated DNS-1123 labels, at most 253 characters.
fn is_dns1123_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(super::is_dns1123_label)
}
