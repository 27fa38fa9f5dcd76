//! The Volcano PodGroup that gang-schedules a benchmark: no pod is bound until every
//! pod of the plan can be, so no role starts (and skews the measurement, or times out
//! waiting) while another is still pending.

use std::collections::BTreeMap;

use crate::volcano::{PodGroup, PodGroupSpec};

use super::{Context, RenderError, invalid};

/// The PodGroup named after the benchmark.
pub(crate) fn render(context: &Context) -> Result<PodGroup, RenderError> {
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
            min_resources: None,
            min_task_member: (!min_task_member.is_empty()).then_some(min_task_member),
            priority_class_name: context.common.priority_class_name.clone(),
            queue: context.common.queue.clone(),
        },
        status: None,
    })
}

/// Dot-separated DNS-1123 labels, at most 253 characters.
fn is_dns1123_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(super::is_dns1123_label)
}
