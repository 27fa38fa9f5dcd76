//! What a benchmark's pods (and PodGroup) say about it: pure functions from observed
//! objects and the clock to a [`Assessment`], and from a verdict to status conditions.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use perfsweep_benchmarks::api::status::{condition, condition_status};
use perfsweep_benchmarks::api::volcano::PodGroup;

/// Waiting reasons that mean the image will not arrive by waiting longer.
const IMAGE_PULL_FAILURES: &[&str] = &["ErrImagePull", "ImagePullBackOff", "InvalidImageName"];

/// Why a benchmark failed: the one failure type of both backends.
pub use perfsweep_benchmarks::outcome::{Failure, Reason};

/// Everything the assessment looks at.
pub struct Observed<'a> {
    /// The pods the benchmark should have, by name, in plan order.
    pub expected: &'a [String],
    /// The pod whose log carries the result.
    pub result_pod: &'a str,
    /// The other replicas of the result role (distributed load generators), whose
    /// results merge with the result pod's: the result is read once all succeeded.
    pub result_siblings: &'a [String],
    /// The benchmark's pods as they are (any order; extra pods are ignored).
    pub pods: &'a [Pod],
    /// Whether the benchmark is gang-scheduled through a PodGroup.
    pub gang: bool,
    pub pod_group: Option<&'a PodGroup>,
    /// Whether every pod was seen running before (`status.startedAt` is set): from then
    /// on, a missing pod was deleted, not yet to be created.
    pub ran: bool,
    pub created: Timestamp,
    pub timeout: Duration,
    pub now: Timestamp,
}

/// Where the pods stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub total: usize,
    pub scheduled: usize,
    /// Pods that run or ran (phase Running or Succeeded).
    pub started: usize,
    /// Expected pods that do not exist.
    pub missing: Vec<String>,
    /// The earliest time a pod or the PodGroup was reported unschedulable, and why.
    pub unschedulable: Option<(Timestamp, String)>,
}

impl Progress {
    pub fn all_started(&self) -> bool {
        self.total > 0 && self.started == self.total
    }

    pub fn all_scheduled(&self) -> bool {
        self.total > 0 && self.scheduled == self.total
    }
}

/// What to do about a benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// Not all pods run yet; look again by `recheck_in` at the latest (a deadline).
    Waiting { recheck_in: Duration },
    /// Every pod runs or ran; the result is not in yet.
    Running { recheck_in: Duration },
    /// The result pod finished successfully: read its log.
    ReadResult,
    /// The benchmark failed; `pod` is the pod that failed, if one did.
    Failed {
        failure: Failure,
        pod: Option<String>,
    },
}

/// Looks at the pods and the clock.
pub fn assess(observed: &Observed<'_>) -> (Assessment, Progress) {
    let progress = progress(observed);
    (verdict(observed, &progress), progress)
}

fn verdict(observed: &Observed<'_>, progress: &Progress) -> Assessment {
    let pod = |name: &str| observed.pods.iter().find(|p| p.name_any() == name);
    let succeeded = |name: &str| pod(name).is_some_and(completed);
    // The operator deletes its pods only once a benchmark has ended: one being deleted
    // before is someone else's doing (a user, an eviction, a drain). What it measured was
    // cut short, even if it finished within its grace period (issue 23: such a pod's
    // result was recorded as a success). A pod that never started is made again instead.
    if let Some(name) = observed.expected.iter().find(|name| {
        pod(name).is_some_and(|p| {
            p.metadata.deletion_timestamp.is_some() && (observed.ran || phase_of(p) != "Pending")
        })
    }) {
        return Assessment::Failed {
            failure: Failure::new(
                Reason::PodDeleted,
                format!("pod {name} was deleted while the benchmark ran"),
            ),
            pod: Some(name.clone()),
        };
    }
    if succeeded(observed.result_pod) && observed.result_siblings.iter().all(|n| succeeded(n)) {
        return Assessment::ReadResult;
    }
    for name in observed.expected {
        let Some(pod) = pod(name) else { continue };
        if phase_of(pod) == "Failed" {
            return Assessment::Failed {
                failure: Failure::new(Reason::PodFailed, pod_failure_message(pod)),
                pod: Some(name.clone()),
            };
        }
        if let Some(message) = image_pull_failure(pod) {
            return Assessment::Failed {
                failure: Failure::new(Reason::ImagePullFailure, message),
                pod: Some(name.clone()),
            };
        }
    }
    if observed.ran
        && let Some(name) = progress.missing.first()
    {
        return Assessment::Failed {
            failure: Failure::new(
                Reason::PodDeleted,
                format!("pod {name} was deleted while the benchmark ran"),
            ),
            pod: Some(name.clone()),
        };
    }
    let passed = |at: Timestamp| at <= observed.now;
    let lost = result_node_lost(observed);
    if let Some((since, failure)) = &lost
        && passed(later(*since, NODE_LOST_GRACE))
    {
        return Assessment::Failed {
            failure: failure.clone(),
            pod: None,
        };
    }
    let unplaceable = never_placeable(observed);
    if let Some((since, failure)) = &unplaceable
        && passed(later(*since, PLACEMENT_GRACE))
    {
        return Assessment::Failed {
            failure: failure.clone(),
            pod: None,
        };
    }
    let timeout = observed.timeout;
    let deadline = later(observed.created, timeout);
    let unschedulable_deadline = progress
        .unschedulable
        .as_ref()
        .map(|(since, _)| later(*since, timeout));
    if let Some((_, why)) = &progress.unschedulable
        && (passed(deadline) || unschedulable_deadline.is_some_and(passed))
    {
        return Assessment::Failed {
            failure: Failure::new(
                Reason::Unschedulable,
                format!(
                    "pods could not be scheduled within the timeout of {}: {why}",
                    perfsweep_benchmarks::formats::duration::format(timeout)
                ),
            ),
            pod: None,
        };
    }
    if passed(deadline) {
        let waiting_for = if progress.all_started() {
            format!("the result of pod {}", observed.result_pod)
        } else {
            format!(
                "its pods: {} of {} running",
                progress.started, progress.total
            )
        };
        return Assessment::Failed {
            failure: Failure::new(
                Reason::TimedOut,
                format!(
                    "the benchmark did not finish within its timeout of {} (waiting for {waiting_for})",
                    perfsweep_benchmarks::formats::duration::format(timeout)
                ),
            ),
            pod: None,
        };
    }
    let placement_deadline = unplaceable.map(|(since, _)| later(since, PLACEMENT_GRACE));
    let lost_deadline = lost.map(|(since, _)| later(since, NODE_LOST_GRACE));
    let next = [
        Some(deadline),
        unschedulable_deadline,
        placement_deadline,
        lost_deadline,
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(deadline);
    let recheck_in = observed
        .now
        .duration_until(next)
        .unsigned_abs()
        // Just past the deadline, so that the next look sees it passed.
        .saturating_add(Duration::from_millis(50));
    if progress.all_started() {
        Assessment::Running { recheck_in }
    } else {
        Assessment::Waiting { recheck_in }
    }
}

/// How long a pod may be blocked only by the anti-affinity before the benchmark fails.
/// The scheduler counts schedulable nodes only: a node that is briefly NotReady (a kubelet
/// restart) or cordoned leaves too few for seconds. On the real cluster a benchmark
/// created just after a kubelet restart failed at once although the node came back
/// moments later; a cluster that has too few nodes still fails in seconds, not after the
/// timeout.
const PLACEMENT_GRACE: Duration = Duration::from_secs(30);

/// How long the node of a pod whose result is needed may stay silent before the
/// benchmark fails. The node lifecycle controller marks the node's pods not ready only
/// after its own grace (40 s by default), so the node has then been silent for a while
/// already; a kubelet restarting comes back well within this.
const NODE_LOST_GRACE: Duration = Duration::from_secs(30);

/// A pod whose result the benchmark needs (the result pod and its siblings), still
/// `Running` by the last word of its kubelet, whose containers all say running, yet not
/// ready: the node lifecycle controller's mark of a node that stopped reporting (a
/// kubelet stopped, a node powered off). Its log cannot be read (the kubelet serves
/// logs), so waiting out the timeout only delays the failure (issue 33: a stopped
/// kubelet's benchmark ended `TimedOut` after its whole timeout). Returns since when the
/// pod has been marked, and the failure.
fn result_node_lost(observed: &Observed<'_>) -> Option<(Timestamp, Failure)> {
    std::iter::once(observed.result_pod)
        .chain(observed.result_siblings.iter().map(String::as_str))
        .find_map(|name| {
            let pod = observed.pods.iter().find(|p| p.name_any() == name)?;
            if phase_of(pod) != "Running" {
                return None;
            }
            let status = pod.status.as_ref()?;
            let containers = status.container_statuses.as_ref()?;
            let all_running = !containers.is_empty()
                && containers
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
            let not_ready = pod_conditions(pod)
                .find(|c| c.type_ == "Ready" && c.status == "False")?;
            if !all_running {
                return None;
            }
            let since = not_ready
                .last_transition_time
                .as_ref()
                .map_or(observed.now, |time| time.0);
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_else(|| "its node".into());
            let failure = Failure::new(
                Reason::ResultUnreadable,
                format!(
                    "node {node} of pod {name} stopped reporting: the pod is marked not ready while its containers last said running (the node is NotReady: its kubelet stopped, or the node is down), and its result cannot be read without the kubelet; failed {} after the mark rather than at the timeout",
                    perfsweep_benchmarks::formats::duration::format(NODE_LOST_GRACE)
                ),
            );
            Some((since, failure))
        })
}

/// A pod the scheduler can place on no node because every node already runs a pod of
/// this benchmark it must not share a node with (the default anti-affinity between the
/// measured roles), or because `placement` pins it to a node that no schedulable node is:
/// waiting beyond [`PLACEMENT_GRACE`] does not help, so the benchmark fails then and says
/// what to change (issue 23: on a one-node cluster the client waited out the 30-minute
/// timeout; issue 33: a misspelt node did too, and the message named the gang, not the
/// node). Returns since when the pod has been blocked, and the failure.
fn never_placeable(observed: &Observed<'_>) -> Option<(Timestamp, Failure)> {
    observed.expected.iter().find_map(|name| {
        let pod = observed.pods.iter().find(|p| p.name_any() == *name)?;
        let (since, why) = pod_unschedulable(pod, observed.now)?;
        if let Some(nodes) = blocked_by(&why, ANTI_AFFINITY) {
            let failure = Failure::new(
                Reason::Unschedulable,
                format!(
                    "pod {name} cannot be placed: the benchmark keeps its roles on different nodes (anti-affinity), and all {nodes} schedulable node(s) already run one of them ({why}). With fewer nodes than that, name the nodes of each role with `placement` (one node may serve several roles), e.g. placement: {{server: {{nodes: [NODE]}}, client: {{nodes: [NODE]}}}}"
                ),
            );
            return Some((since, failure));
        }
        // Pinned to a node (`placement`) that no schedulable node is: a misspelt or
        // removed node, which waiting does not bring (beyond the grace, as above).
        let pinned = pinned_nodes(pod);
        if !pinned.is_empty()
            && let Some(nodes) = blocked_by(&why, NODE_AFFINITY)
        {
            let failure = Failure::new(
                Reason::Unschedulable,
                format!(
                    "pod {name} cannot be placed: `placement` pins it to node {}, and none of the {nodes} schedulable node(s) is that node or matches its node selector ({why}). Check the node names (kubectl get nodes) and the role's nodeSelector",
                    pinned.join(", ")
                ),
            );
            return Some((since, failure));
        }
        None
    })
}

/// Scheduler reasons meaning a node fails the benchmark's own anti-affinity.
const ANTI_AFFINITY: &[&str] = &[
    "didn't match pod anti-affinity rules",
    "didn't satisfy existing pods anti-affinity rules",
];

/// Scheduler reasons meaning a node fails the pod's node affinity or node selector.
const NODE_AFFINITY: &[&str] = &[
    "didn't match Pod's node affinity/selector",
    "didn't match node selector",
];

/// The node names a pod's required node affinity pins it to (`metadata.name In [...]`,
/// what `placement.<role>.nodes` renders).
fn pinned_nodes(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.affinity.as_ref())
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node| {
            node.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|required| {
            required
                .node_selector_terms
                .iter()
                .flat_map(|term| term.match_fields.iter().flatten())
                .filter(|field| {
                    field.key == perfsweep_benchmarks::render::placement::NODE_NAME_FIELD
                        && field.operator == "In"
                })
                .flat_map(|field| field.values.iter().flatten().cloned())
                .collect::<std::collections::BTreeSet<String>>()
                .into_iter()
                .collect()
        })
        .unwrap_or_default()
}

/// The number of nodes, when a scheduler's message says that every node fails for one of
/// `reasons`: kube-scheduler's `0/N nodes are available: N node(s) <reason>` (several
/// reasons summing to N), and Volcano's `0/N nodes are unavailable: …` in the same words.
fn blocked_by(message: &str, reasons: &[&str]) -> Option<u64> {
    let start = message.find("0/")? + 2;
    let rest = &message[start..];
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let total: u64 = rest[..digits].parse().ok()?;
    // kube-scheduler appends what preemption found, in the same form: not counted.
    let rest = rest[digits..]
        .split(" preemption:")
        .next()
        .unwrap_or_default();
    if total == 0
        || !(rest.starts_with(" nodes are available") || rest.starts_with(" nodes are unavailable"))
    {
        return None;
    }
    let blocked: u64 = rest
        .split([':', ','])
        .map(str::trim)
        .filter(|reason| reasons.iter().any(|r| reason.contains(r)))
        .filter_map(|reason| reason.split_whitespace().next()?.parse::<u64>().ok())
        // Each node is counted under one reason.
        .sum();
    (blocked >= total).then_some(total)
}

fn progress(observed: &Observed<'_>) -> Progress {
    let mut progress = Progress {
        total: observed.expected.len(),
        scheduled: 0,
        started: 0,
        missing: Vec::new(),
        unschedulable: None,
    };
    let mut unschedulable: Vec<(Timestamp, String)> = Vec::new();
    for name in observed.expected {
        let Some(pod) = observed.pods.iter().find(|p| p.name_any() == *name) else {
            progress.missing.push(name.clone());
            continue;
        };
        if is_scheduled(pod) {
            progress.scheduled += 1;
        }
        if matches!(phase_of(pod), "Running" | "Succeeded") {
            progress.started += 1;
        }
        if let Some((since, message)) = pod_unschedulable(pod, observed.now) {
            unschedulable.push((since, format!("pod {name}: {message}")));
        }
    }
    if observed.gang
        && let Some((since, message)) = observed
            .pod_group
            .and_then(|group| pod_group_unschedulable(group, observed.now))
    {
        unschedulable.push((since, format!("PodGroup: {message}")));
    }
    progress.unschedulable = unschedulable.into_iter().min_by_key(|(since, _)| *since);
    progress
}

/// `time` plus `duration`, or the end of time for durations beyond it.
pub fn later(time: Timestamp, duration: Duration) -> Timestamp {
    time.checked_add(duration).unwrap_or(Timestamp::MAX)
}

/// A pod whose work is done: phase Succeeded, or every container of a pod that never
/// restarts them ended with exit code 0. The kubelet reports the containers' ends about
/// a second (its next relist) before the phase; the log is complete once the container
/// runtime reports the end, so the result can be read at once.
fn completed(pod: &Pod) -> bool {
    if phase_of(pod) == "Succeeded" {
        return true;
    }
    let Some(spec) = &pod.spec else { return false };
    if !matches!(spec.restart_policy.as_deref(), Some("Never" | "OnFailure")) {
        return false;
    }
    let exited_cleanly: Vec<&str> = container_statuses(pod)
        .filter(|s| {
            s.state
                .as_ref()
                .and_then(|state| state.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0)
        })
        .map(|s| s.name.as_str())
        .collect();
    !spec.containers.is_empty()
        && spec
            .containers
            .iter()
            .all(|c| exited_cleanly.contains(&c.name.as_str()))
}

fn phase_of(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn is_scheduled(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        || pod_conditions(pod).any(|c| c.type_ == "PodScheduled" && c.status == "True")
}

fn pod_conditions(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
}

/// Since when and why the scheduler cannot place the pod.
fn pod_unschedulable(pod: &Pod, now: Timestamp) -> Option<(Timestamp, String)> {
    let condition = pod_conditions(pod).find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    let since = condition
        .last_transition_time
        .as_ref()
        .map_or(now, |time| time.0);
    let message = condition
        .message
        .clone()
        .unwrap_or_else(|| "no node fits".into());
    Some((since, message))
}

/// Since when and why Volcano cannot place the gang.
fn pod_group_unschedulable(group: &PodGroup, now: Timestamp) -> Option<(Timestamp, String)> {
    let condition = group.status.as_ref()?.conditions.iter().find(|c| {
        c.type_.as_deref() == Some("Unschedulable") && c.status.as_deref() == Some("True")
    })?;
    let since = condition
        .last_transition_time
        .as_ref()
        .map_or(now, |time| time.0);
    let message = condition
        .message
        .clone()
        .or_else(|| condition.reason.clone())
        .unwrap_or_else(|| "Volcano cannot schedule the gang".into());
    Some((since, message))
}

fn container_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    pod.status.as_ref().into_iter().flat_map(|s| {
        s.init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten())
    })
}

/// Why a pod's image cannot be pulled, if that is what it waits for.
fn image_pull_failure(pod: &Pod) -> Option<String> {
    container_statuses(pod).find_map(|status| {
        let waiting = status.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        if !IMAGE_PULL_FAILURES.contains(&reason) {
            return None;
        }
        let image = if status.image.is_empty() {
            image_in_spec(pod, &status.name).unwrap_or_default()
        } else {
            status.image.clone()
        };
        let detail = waiting.message.as_deref().unwrap_or(reason);
        Some(format!(
            "pod {}: container {} cannot pull image {image:?} ({reason}): {detail}",
            pod.name_any(),
            status.name
        ))
    })
}

fn image_in_spec(pod: &Pod, container: &str) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == container)
        .and_then(|c| c.image.clone())
}

/// What a failed pod says about its failure: the failing container's termination message
/// (what the agent writes), its exit code and reason, or the pod's own reason (eviction).
fn pod_failure_message(pod: &Pod) -> String {
    let name = pod.name_any();
    let terminated = container_statuses(pod)
        .filter_map(|s| Some((s, s.state.as_ref()?.terminated.as_ref()?)))
        .min_by_key(|(_, t)| t.exit_code == 0);
    if let Some((status, terminated)) = terminated {
        let mut message = format!(
            "pod {name} failed: container {} exited with code {}",
            status.name, terminated.exit_code
        );
        if let Some(reason) = terminated.reason.as_deref().filter(|r| !r.is_empty()) {
            message.push_str(&format!(" ({reason})"));
        }
        if let Some(text) = terminated
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
        {
            message.push_str(": ");
            message.push_str(text);
        }
        return message;
    }
    let status = pod.status.as_ref();
    let reason = status.and_then(|s| s.reason.as_deref());
    let detail = status.and_then(|s| s.message.as_deref());
    match (reason, detail) {
        (Some(reason), Some(detail)) => format!("pod {name} failed ({reason}): {detail}"),
        (Some(text), None) | (None, Some(text)) => format!("pod {name} failed: {text}"),
        (None, None) => format!("pod {name} failed without a reason"),
    }
}

/// The `Scheduled`, `Ready` and `GangScheduled` conditions for the pods' progress.
pub fn progress_conditions(
    progress: &Progress,
    gang: bool,
    pod_group: Option<&PodGroup>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let (total, scheduled, started) = (progress.total, progress.scheduled, progress.started);
    let scheduled_condition = if progress.all_scheduled() {
        condition(
            "Scheduled",
            condition_status::TRUE,
            "AllPodsScheduled",
            format!("{scheduled} of {total} pods are scheduled"),
            generation,
            now,
        )
    } else if let Some((_, why)) = &progress.unschedulable {
        condition(
            "Scheduled",
            condition_status::FALSE,
            "Unschedulable",
            why.clone(),
            generation,
            now,
        )
    } else {
        condition(
            "Scheduled",
            condition_status::FALSE,
            "Waiting",
            format!("{scheduled} of {total} pods are scheduled"),
            generation,
            now,
        )
    };
    let ready = if progress.all_started() {
        condition(
            "Ready",
            condition_status::TRUE,
            "AllPodsRunning",
            format!("{started} of {total} pods are running"),
            generation,
            now,
        )
    } else {
        condition(
            "Ready",
            condition_status::FALSE,
            "PodsNotRunning",
            format!("{started} of {total} pods are running"),
            generation,
            now,
        )
    };
    vec![
        scheduled_condition,
        ready,
        gang_condition(progress, gang, pod_group, generation, now),
    ]
}

fn gang_condition(
    progress: &Progress,
    gang: bool,
    pod_group: Option<&PodGroup>,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    if !gang {
        return condition(
            "GangScheduled",
            condition_status::FALSE,
            "DefaultScheduler",
            "scheduler: default places each pod on its own, without a gang guarantee: the \
             benchmark's pods may start at different times",
            generation,
            now,
        );
    }
    let group_phase = pod_group
        .and_then(|g| g.status.as_ref())
        .and_then(|s| s.phase.as_deref());
    if progress.all_scheduled() || matches!(group_phase, Some("Running" | "Completed")) {
        return condition(
            "GangScheduled",
            condition_status::TRUE,
            "PodGroupScheduled",
            format!(
                "Volcano placed all {} pods of the PodGroup together",
                progress.total
            ),
            generation,
            now,
        );
    }
    if let Some((_, why)) = progress
        .unschedulable
        .as_ref()
        .filter(|(_, why)| why.starts_with("PodGroup:"))
    {
        return condition(
            "GangScheduled",
            condition_status::FALSE,
            "Unschedulable",
            why.clone(),
            generation,
            now,
        );
    }
    condition(
        "GangScheduled",
        condition_status::UNKNOWN,
        "Waiting",
        format!(
            "waiting for Volcano to schedule the PodGroup (phase {})",
            group_phase.unwrap_or("unknown")
        ),
        generation,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "agent", "image": "ghcr.io/perfsweep/iperf:1"}]},
            "status": status,
        }))
        .expect("a valid pod")
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("a valid timestamp")
    }

    /// A running pod with running containers, marked not ready at `marked` seconds: what
    /// the node lifecycle controller leaves when a node stops reporting.
    fn marked_not_ready(marked: i64) -> Value {
        json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False",
                "lastTransitionTime": format!("2027-01-15T08:00:{marked:02}Z")}],
            "containerStatuses": [{"name": "agent", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {}}}]})
    }

    /// Issue 33: a stopped kubelet's benchmark waited out its whole timeout for a result
    /// it could not read. It fails after the node-lost grace, naming the node.
    #[test]
    fn a_result_pod_whose_node_stopped_reporting_fails_after_the_grace_naming_the_node() {
        let mut case = Case::new(vec![
            pod("b-server-0", running()),
            serde_json::from_value(json!({
                "metadata": {"name": "b-client-0"},
                "spec": {"nodeName": "psw-node2", "containers": [{"name": "agent", "image": "i"}]},
                "status": marked_not_ready(5),
            }))
            .expect("a pod"),
        ]);
        case.now = at(10);
        let (Assessment::Running { recheck_in } | Assessment::Waiting { recheck_in }) =
            case.assess().0
        else {
            panic!("the node may come back: wait out the grace")
        };
        assert_eq!(
            recheck_in,
            NODE_LOST_GRACE.saturating_sub(Duration::from_secs(5)) + Duration::from_millis(50)
        );
        case.now = later(at(5), NODE_LOST_GRACE);
        let Assessment::Failed { failure, .. } = case.assess().0 else {
            panic!("expected a failure once the grace passed")
        };
        assert_eq!(failure.reason, "ResultUnreadable");
        assert!(
            failure.message.contains("node psw-node2 of pod b-client-0"),
            "{}",
            failure.message
        );
        // The server's node lost: the client still finishes and its result is read.
        let case = Case::new(vec![
            serde_json::from_value(json!({
                "metadata": {"name": "b-server-0"},
                "spec": {"nodeName": "psw-node1", "containers": [{"name": "agent", "image": "i"}]},
                "status": marked_not_ready(5),
            }))
            .expect("a pod"),
            pod("b-client-0", running()),
        ]);
        let mut late = case;
        late.now = later(at(10), NODE_LOST_GRACE);
        assert!(!matches!(late.assess().0, Assessment::Failed { .. }));
    }

    /// A pod `placement` pinned to `node`, as rendering pins it.
    fn pinned_pod(name: &str, node: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "containers": [{"name": "agent", "image": "ghcr.io/perfsweep/iperf:1"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            },
            "status": status,
        }))
        .expect("a valid pod")
    }

    /// Issue 33: a placement naming a node that does not exist waited out the timeout and
    /// named the gang. It fails after the placement grace, naming the node.
    #[test]
    fn a_pod_pinned_to_a_node_no_node_is_fails_after_the_grace_naming_the_node() {
        for message in [
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector.",
        ] {
            let mut case = Case::new(vec![
                pod("b-server-0", running()),
                pinned_pod("b-client-0", "psw-node9", unschedulable(message)),
            ]);
            case.now = at(10);
            assert!(
                matches!(case.assess().0, Assessment::Waiting { .. }),
                "{message}: a node may be coming back: wait out the grace"
            );
            case.now = later(at(5), PLACEMENT_GRACE);
            let Assessment::Failed { failure, .. } = case.assess().0 else {
                panic!("{message}: expected a failure once the grace passed")
            };
            assert_eq!(failure.reason, "Unschedulable", "{message}");
            assert!(
                failure.message.contains("pins it to node psw-node9"),
                "{}",
                failure.message
            );
        }
        // Not pinned (a nodeSelector nothing matches yet, say a node pool scaling up):
        // that may change, so it waits for the timeout as before.
        let mut case = Case::new(vec![
            pod("b-server-0", running()),
            pod(
                "b-client-0",
                unschedulable(
                    "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
                ),
            ),
        ]);
        case.now = later(at(5), PLACEMENT_GRACE);
        assert!(matches!(case.assess().0, Assessment::Waiting { .. }));
    }

    struct Case {
        expected: Vec<String>,
        pods: Vec<Pod>,
        ran: bool,
        pod_group: Option<PodGroup>,
        now: Timestamp,
    }

    impl Case {
        fn new(pods: Vec<Pod>) -> Self {
            Self {
                expected: vec!["b-server-0".into(), "b-client-0".into()],
                pods,
                ran: false,
                pod_group: None,
                now: at(10),
            }
        }

        fn assess(&self) -> (Assessment, Progress) {
            assess(&Observed {
                expected: &self.expected,
                result_pod: "b-client-0",
                result_siblings: &[],
                pods: &self.pods,
                gang: true,
                pod_group: self.pod_group.as_ref(),
                ran: self.ran,
                created: at(0),
                timeout: Duration::from_mins(1),
                now: self.now,
            })
        }
    }

    fn running() -> Value {
        json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    }

    #[test]
    fn waits_until_every_pod_runs_then_reads_the_result() {
        let case = Case::new(vec![pod("b-server-0", running())]);
        let (verdict, progress) = case.assess();
        assert_eq!(
            verdict,
            Assessment::Waiting {
                recheck_in: Duration::from_millis(50_050)
            }
        );
        assert_eq!(progress.missing, ["b-client-0"]);
        assert_eq!((progress.scheduled, progress.started), (1, 1));

        let case = Case::new(vec![
            pod("b-server-0", running()),
            pod("b-client-0", running()),
        ]);
        assert!(matches!(case.assess().0, Assessment::Running { .. }));

        let case = Case::new(vec![
            pod("b-server-0", running()),
            pod("b-client-0", json!({"phase": "Succeeded"})),
        ]);
        assert_eq!(case.assess().0, Assessment::ReadResult);
    }

    /// The result pod as the kubelet reports it a second before the phase: Running,
    /// with `agent` (and `other`, when given) ended with these exit codes.
    fn ended_containers(codes: &[(&str, i32)], restart_policy: &str) -> Pod {
        let statuses: Vec<Value> = codes
            .iter()
            .map(|(name, code)| {
                json!({"name": name, "image": "", "imageID": "", "ready": false, "restartCount": 0,
                       "state": {"terminated": {"exitCode": code}}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "b-client-0"},
            "spec": {"restartPolicy": restart_policy, "containers": [
                {"name": "agent", "image": "ghcr.io/perfsweep/iperf:1"},
                {"name": "other", "image": "ghcr.io/perfsweep/iperf:1"},
            ]},
            "status": {"phase": "Running", "containerStatuses": statuses},
        }))
        .expect("a valid pod")
    }

    #[test]
    fn the_result_is_read_once_every_container_ended_cleanly_before_the_phase_says_so() {
        let read = |result: Pod| {
            Case::new(vec![pod("b-server-0", running()), result])
                .assess()
                .0
        };
        assert_eq!(
            read(ended_containers(&[("agent", 0), ("other", 0)], "Never")),
            Assessment::ReadResult
        );
        for (codes, policy) in [
            (&[("agent", 0)][..], "Never"),
            (&[("agent", 0), ("other", 1)][..], "Never"),
            (&[("agent", 0), ("other", 0)][..], "Always"),
        ] {
            let verdict = read(ended_containers(codes, policy));
            assert!(
                matches!(verdict, Assessment::Running { .. }),
                "{codes:?} {policy}: {verdict:?}"
            );
        }
    }

    #[test]
    fn image_pull_failures_fail_at_once() {
        for reason in IMAGE_PULL_FAILURES {
            let status = json!({"phase": "Pending", "containerStatuses": [{
                "name": "agent", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": "not found"}},
            }]});
            let (verdict, _) = Case::new(vec![pod("b-client-0", status)]).assess();
            let Assessment::Failed { failure, pod } = verdict else {
                panic!("{reason}: {verdict:?}")
            };
            assert_eq!(failure.reason, "ImagePullFailure");
            assert!(
                failure.message.contains("ghcr.io/perfsweep/iperf:1")
                    && failure.message.contains("not found"),
                "{}",
                failure.message
            );
            assert_eq!(pod.as_deref(), Some("b-client-0"));
        }
    }

    #[test]
    fn a_failed_pod_fails_with_its_termination_message() {
        let status = json!({"phase": "Failed", "containerStatuses": [{
            "name": "agent", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "connection refused\n"}},
        }]});
        let (verdict, _) = Case::new(vec![pod("b-client-0", status)]).assess();
        let Assessment::Failed { failure, .. } = verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(failure.reason, "PodFailed");
        assert_eq!(
            failure.message,
            "pod b-client-0 failed: container agent exited with code 1 (Error): connection refused"
        );

        let evicted = json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"});
        let (verdict, _) = Case::new(vec![pod("b-server-0", evicted)]).assess();
        let Assessment::Failed { failure, .. } = verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(
            failure.message,
            "pod b-server-0 failed (Evicted): low on memory"
        );
    }

    #[test]
    fn unschedulable_fails_only_after_the_timeout() {
        let status = json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available", "lastTransitionTime": at(5).to_string(),
        }]});
        let mut case = Case::new(vec![
            pod("b-server-0", status.clone()),
            pod("b-client-0", status),
        ]);
        let (verdict, progress) = case.assess();
        assert!(matches!(verdict, Assessment::Waiting { .. }), "{verdict:?}");
        assert_eq!(progress.unschedulable.map(|u| u.0), Some(at(5)));

        case.now = at(60);
        let (verdict, _) = case.assess();
        let Assessment::Failed { failure, .. } = verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(failure.reason, "Unschedulable");
        assert!(
            failure.message.contains("0/3 nodes are available"),
            "{}",
            failure.message
        );
        assert!(failure.message.contains("1m"), "{}", failure.message);
    }

    #[test]
    fn pod_group_unschedulable_counts_too() {
        let group: PodGroup = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "spec": {"minMember": 2},
            "status": {"phase": "Pending", "conditions": [{
                "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                "message": "2/2 tasks in gang unschedulable", "lastTransitionTime": at(1).to_string(),
            }]},
        }))
        .expect("a valid PodGroup");
        let mut case = Case::new(Vec::new());
        case.pod_group = Some(group);
        let (verdict, progress) = case.assess();
        assert!(matches!(verdict, Assessment::Waiting { .. }));
        let conditions =
            progress_conditions(&progress, true, case.pod_group.as_ref(), None, at(10));
        let gang = conditions
            .iter()
            .find(|c| c.type_ == "GangScheduled")
            .expect("gang");
        assert_eq!(
            (gang.status.as_str(), gang.reason.as_str()),
            ("False", "Unschedulable")
        );
        case.now = at(61);
        let Assessment::Failed { failure, .. } = case.assess().0 else {
            panic!("expected a failure")
        };
        assert_eq!(failure.reason, "Unschedulable");
    }

    #[test]
    fn the_overall_timeout_fails_a_benchmark_that_waits_for_anything() {
        let mut case = Case::new(vec![
            pod("b-server-0", running()),
            pod("b-client-0", running()),
        ]);
        case.ran = true;
        case.now = at(60);
        let Assessment::Failed { failure, .. } = case.assess().0 else {
            panic!("expected a failure")
        };
        assert_eq!(failure.reason, "TimedOut");
        assert!(
            failure.message.contains("the result of pod b-client-0"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn a_pod_deleted_while_running_fails_the_benchmark() {
        let mut case = Case::new(vec![pod("b-server-0", running())]);
        case.ran = true;
        let Assessment::Failed { failure, .. } = case.assess().0 else {
            panic!("expected a failure")
        };
        assert_eq!(failure.reason, "PodDeleted");
    }

    fn unschedulable(message: &str) -> Value {
        json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": "2027-01-15T08:00:05Z",
        }]})
    }

    /// Issue 23: on one node the default anti-affinity kept the client Unschedulable for
    /// the whole timeout. When every node fails the anti-affinity, the benchmark fails
    /// once that has lasted the placement grace (not the timeout), and names `placement`.
    #[test]
    fn a_pod_no_node_can_take_for_the_anti_affinity_fails_after_the_grace_naming_placement() {
        for message in [
            "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) didn't satisfy existing pods anti-affinity rules.",
            "0/1 nodes are unavailable: 1 node(s) didn't match pod anti-affinity rules.",
        ] {
            let mut case = Case::new(vec![
                pod("b-server-0", running()),
                pod("b-client-0", unschedulable(message)),
            ]);
            // Blocked since 5 s: a node briefly NotReady may come back, so look again
            // when the grace ends, well before the timeout.
            case.now = at(10);
            let Assessment::Waiting { recheck_in } = case.assess().0 else {
                panic!("{message}: expected to wait out the grace")
            };
            assert_eq!(
                recheck_in,
                PLACEMENT_GRACE.saturating_sub(Duration::from_secs(5)) + Duration::from_millis(50),
                "{message}"
            );
            case.now = later(at(5), PLACEMENT_GRACE);
            let Assessment::Failed { failure, .. } = case.assess().0 else {
                panic!("{message}: expected a failure once the grace passed")
            };
            assert_eq!(failure.reason, "Unschedulable", "{message}");
            assert!(
                failure.message.contains("`placement`"),
                "{}",
                failure.message
            );
            assert!(failure.message.contains(message), "{}", failure.message);
        }
        // Nodes that fail for another reason too (full, tainted) may free up: wait.
        for message in [
            "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 2 Insufficient cpu.",
            "0/2 nodes are available: 2 Insufficient memory.",
            "nonsense",
        ] {
            let case = Case::new(vec![
                pod("b-server-0", running()),
                pod("b-client-0", unschedulable(message)),
            ]);
            assert!(
                matches!(case.assess().0, Assessment::Waiting { .. }),
                "{message}"
            );
        }
    }

    fn deleted(mut pod: Pod) -> Pod {
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(5)));
        pod
    }

    /// Issue 23: a client pod deleted mid-run finished within its grace period and the
    /// benchmark was recorded Succeeded. A pod being deleted ends the benchmark as
    /// PodDeleted, whatever it does in its grace period.
    #[test]
    fn a_pod_being_deleted_fails_the_benchmark_even_if_it_finishes() {
        for (client, ran) in [
            (json!({"phase": "Succeeded"}), true),
            (json!({"phase": "Succeeded"}), false),
            (running(), true),
            (json!({"phase": "Failed"}), true),
        ] {
            let mut case = Case::new(vec![
                pod("b-server-0", running()),
                deleted(pod("b-client-0", client.clone())),
            ]);
            case.ran = ran;
            let Assessment::Failed { failure, pod } = case.assess().0 else {
                panic!("{client}: expected a failure")
            };
            assert_eq!(failure.reason, "PodDeleted", "{client}");
            assert_eq!(
                failure.message,
                "pod b-client-0 was deleted while the benchmark ran"
            );
            assert_eq!(pod.as_deref(), Some("b-client-0"));
        }
        // A pod deleted before it started is made again: the benchmark waits.
        let case = Case::new(vec![
            pod("b-server-0", running()),
            deleted(pod("b-client-0", json!({"phase": "Pending"}))),
        ]);
        assert!(matches!(case.assess().0, Assessment::Waiting { .. }));
    }

    #[test]
    fn the_default_scheduler_gives_no_gang_guarantee() {
        let progress = Case::new(Vec::new()).assess().1;
        let conditions = progress_conditions(&progress, false, None, Some(3), at(0));
        let gang = conditions
            .iter()
            .find(|c| c.type_ == "GangScheduled")
            .expect("gang");
        assert_eq!(
            (gang.status.as_str(), gang.reason.as_str()),
            ("False", "DefaultScheduler")
        );
        assert!(gang.message.contains("different times"));
        assert_eq!(gang.observed_generation, Some(3));
    }
}
