//! Observe: the benchmark's pods and PodGroup from the caches (no request), and what
//! only the API server can tell: the result pods' logs and the nodes the pods ran on.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, LogParams};
use perfsweep_benchmarks::api::volcano::PodGroup;
use perfsweep_benchmarks::outcome::{Failure, Reason};
use serde::de::DeserializeOwned;

use super::outcome::{self, Success};
use super::prepare::Prepared;
use super::step::{Halt, Stage, Step, Stuck};
use super::target::Target;
use super::{AGENT_CONTAINER, Engine};
use crate::controller::{Error, caches};

/// Log lines read for the latest progress line.
pub(super) const PROGRESS_TAIL_LINES: i64 = 40;
/// The benchmark's objects as they are.
pub(super) struct Observation {
    pub(super) pods: Vec<Pod>,
    pub(super) pod_group: Option<PodGroup>,
}

/// The benchmark's pods and PodGroup, from the caches (no request). A gang's pods are
/// owned by its PodGroup (see [`super::apply::create_missing`]); others by the benchmark.
pub(super) fn observe(engine: &Engine, target: &Target, prepared: &Prepared) -> Observation {
    let owned = &engine.owned;
    let mut pod_group = match (&prepared.rendered.pod_group, &owned.pod_groups) {
        (Some(group), Some(groups)) => {
            let name = group.name_any();
            caches::owned_by(groups, &target.namespace, &target.uid)
                .into_iter()
                .find(|group| group.name_any() == name)
                .map(|group| (*group).clone())
        }
        _ => None,
    };
    // What this operator created a moment ago is there, even if the caches do not show
    // it yet (as created: not yet scheduled).
    let cached_group = pod_group.is_some();
    let cached_pods = pods_of(owned, target, pod_group.as_ref());
    engine.recent.forget(&target.uid, |change| match change {
        caches::Change::Created(pod) => cached_pods.iter().any(|p| p.name_any() == pod.name_any()),
        caches::Change::CreatedGroup(_) => cached_group,
        caches::Change::Deleted(_) => false,
    });
    let changes = engine.recent.of(&target.uid);
    let mut pods = cached_pods;
    if pod_group.is_none()
        && let Some(group) = changes.iter().find_map(|change| match change {
            caches::Change::CreatedGroup(group) => Some(group),
            _ => None,
        })
    {
        // Its members, if the pod cache is ahead of the PodGroup cache.
        pods = pods_of(owned, target, Some(group));
        pod_group = Some((**group).clone());
    }
    for change in changes {
        if let caches::Change::Created(pod) = change
            && !pods.iter().any(|p| p.name_any() == pod.name_any())
        {
            pods.push(*pod);
        }
    }
    Observation { pods, pod_group }
}

/// The pods the benchmark owns, and those its PodGroup owns.
fn pods_of(owned: &caches::Owned, target: &Target, pod_group: Option<&PodGroup>) -> Vec<Pod> {
    let mut pods = caches::owned_by(&owned.pods, &target.namespace, &target.uid);
    if let Some(uid) = pod_group.and_then(|group| group.metadata.uid.as_deref()) {
        pods.extend(caches::owned_by(&owned.pods, &target.namespace, uid));
    }
    pods.into_iter().map(|pod| (*pod).clone()).collect()
}

/// Reads the result pod's log and what the agent reported in it; with several replicas
/// of the result role, every replica's report, merged by the kind.
///
/// One log at a time, kept only as long as it takes to find its report, and at most
/// [`RESULT_BUDGET_BYTES`] for all of a benchmark's logs together; at most
/// [`RESULT_READS_AT_ONCE`] benchmarks read at a time (issue 34: 256 load generators
/// with large logs read at once took the operator past its memory limit).
pub(super) async fn read_result<R: DeserializeOwned>(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
) -> Step<Success<R>> {
    let _turn = engine.result_reads.acquire().await.ok();
    let expected = perfsweep_benchmarks::outcome::Expected {
        kind: target.info,
        role: &prepared.result_role,
        spec: &prepared.spec,
    };
    let pods: Vec<&String> = std::iter::once(&prepared.result_pod)
        .chain(&prepared.result_siblings)
        .collect();
    let mut names = Vec::with_capacity(pods.len());
    let mut reports = Vec::with_capacity(pods.len());
    let mut read = 0usize;
    for (index, pod) in (0u32..).zip(&pods) {
        let left = RESULT_BUDGET_BYTES.saturating_sub(read);
        let log = read_log_within(engine, target, pod, left.min(REPORT_LIMIT_BYTES)).await;
        let log = match log {
            Err(Halt::Fails(failure)) if left < REPORT_LIMIT_BYTES => {
                return Err(Halt::Fails(over_budget(&pods, index, read, &failure)));
            }
            other => other?,
        };
        read += log.len();
        let name = format!("pod {pod}");
        let output = perfsweep_benchmarks::outcome::ProcessOutput {
            name: &name,
            output: &log,
            note: None,
        };
        reports.push(perfsweep_benchmarks::outcome::replica_report(
            &expected, &output, index,
        )?);
        names.push(name);
    }
    Ok(outcome::evaluate_reports(
        target.info,
        &prepared.result_role,
        &prepared.spec,
        &names,
        reports,
    )
    .0?)
}

/// The failure of a result whose replicas' logs together outgrew the budget.
fn over_budget(pods: &[&String], index: u32, read: usize, cause: &Failure) -> Failure {
    Failure::new(
        Reason::ResultUnreadable,
        format!(
            "the result role's {} pods logged more than the {} MiB the operator reads for one \
             benchmark: {} MiB read before pod {} ({})",
            pods.len(),
            RESULT_BUDGET_BYTES / (1024 * 1024),
            read / (1024 * 1024),
            pods.get(index as usize).map_or("?", |p| p.as_str()),
            cause.message
        ),
    )
}

/// The latest progress line in the tail of the result pod's log; best effort (a log
/// that cannot be read now leaves the last progress shown).
pub(super) async fn read_progress(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
) -> Option<String> {
    let params = LogParams {
        container: Some(AGENT_CONTAINER.to_owned()),
        tail_lines: Some(PROGRESS_TAIL_LINES),
        limit_bytes: Some(64 * 1024),
        ..LogParams::default()
    };
    match target
        .api::<Pod>(&engine.ctx)
        .logs(&prepared.result_pod, &params)
        .await
    {
        Ok(log) => perfsweep_benchmarks::execution::progress::latest(&log),
        Err(error) => {
            tracing::debug!(benchmark = %target.describe(), %error, "progress not readable");
            None
        }
    }
}

/// What the agent of a failed result pod reported, if it got to report a failure.
pub(super) async fn reported_failure(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
) -> Option<Failure> {
    let pod = &prepared.result_pod;
    let log = read_log(engine, target, pod).await.ok()?;
    outcome::reported_failure(target.info, &prepared.result_role, pod, &log)
}

/// Log entries read from the end of a result pod's log: the agent's report is its last
/// line of output, followed by at most a few lines of the agent's own logging. The
/// kubelet counts entries, and containerd writes a line longer than 16 KiB as several,
/// so a report (one line carrying the tool's raw output) of up to [`REPORT_LIMIT_BYTES`]
/// takes that many more (seen on the real cluster, issue 34: with 100, a report of more
/// than about 1.6 MiB was cut to its end and never found).
pub(super) const REPORT_TAIL_LINES: i64 = 100 + (REPORT_LIMIT_BYTES / (16 * 1024)) as i64;
/// Most bytes read of a result pod's log: a report (with the raw output it carries as
/// evidence) is far smaller, and a pod that logs gigabytes must not take the operator's
/// memory with it.
pub(super) const REPORT_LIMIT_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes read of all the result pods' logs of one benchmark together.
pub(super) const RESULT_BUDGET_BYTES: usize = 32 * 1024 * 1024;
/// How many benchmarks read their results at once (each within its budget): with the
/// chart's 256 MiB memory limit, what the operator holds besides its caches stays
/// under about 2 × 32 MiB of logs and their reports.
pub const RESULT_READS_AT_ONCE: usize = 2;

/// The end of the agent container's log, where its report is (at most
/// [`REPORT_TAIL_LINES`] lines and [`REPORT_LIMIT_BYTES`] bytes, however much the pod
/// logged); a log the API server will not give (the pod or its node is gone) is a
/// failure, other errors (the kubelet unreachable, the API server unavailable) are
/// retried until the benchmark's deadline (`on_stuck`).
pub(super) async fn read_log(engine: &Engine, target: &Target, pod: &str) -> Step<String> {
    read_log_within(engine, target, pod, REPORT_LIMIT_BYTES).await
}

/// [`read_log`] reading at most `limit` bytes.
async fn read_log_within(
    engine: &Engine,
    target: &Target,
    pod: &str,
    limit: usize,
) -> Step<String> {
    let params = LogParams {
        container: Some(AGENT_CONTAINER.to_owned()),
        tail_lines: Some(REPORT_TAIL_LINES),
        limit_bytes: Some(i64::try_from(limit.max(1)).unwrap_or(i64::MAX)),
        ..LogParams::default()
    };
    match target.api::<Pod>(&engine.ctx).logs(pod, &params).await {
        Ok(log)
            if log.len() >= limit
                && perfsweep_benchmarks::execution::agent_report::find(&log).is_err() =>
        {
            Err(Halt::Fails(Failure::new(
                Reason::ResultUnreadable,
                format!(
                    "pod {pod}: no complete report in the last {REPORT_TAIL_LINES} lines of its log within {:.1} MiB (the most the operator reads)",
                    limit as f64 / (1024.0 * 1024.0)
                ),
            )))
        }
        Ok(log) => Ok(log),
        Err(kube::Error::Api(status))
            if (400..500).contains(&status.code) && status.code != 429 =>
        {
            Err(Halt::Fails(Failure::new(
                Reason::ResultUnreadable,
                format!("pod {pod}: the log cannot be read: {}", status.message),
            )))
        }
        Err(source) => Err(Halt::Stuck(Stuck {
            stage: Stage::ReadingResult,
            error: Error::Kube {
                action: format!(
                    "reading the log of pod {}/{pod} of {}",
                    target.namespace,
                    target.describe()
                ),
                source,
            },
        })),
    }
}

/// Where the benchmark's pods ran: their nodes (and those nodes' recorded labels), the
/// image digests they ran, the Kubernetes version. Best effort: a node that cannot be
/// read leaves its labels out, and never fails the benchmark.
pub(super) async fn observe_environment(
    engine: &Engine,
    target: &Target,
    pods: &[Pod],
) -> perfsweep_benchmarks::results::record::Environment {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(engine.ctx.client.clone());
    let mut found = Vec::new();
    let hosts: std::collections::BTreeSet<&str> = pods
        .iter()
        .filter_map(|pod| pod.spec.as_ref()?.node_name.as_deref())
        .collect();
    for host in hosts {
        // Each node the pods ran on, by name: a benchmark runs on a few nodes, and
        // watching every node of a cluster for that would cost more than it saves.
        match nodes.get_opt(host).await {
            Ok(node) => found.extend(node),
            Err(error) => tracing::debug!(
                benchmark = %target.describe(), node = host, %error,
                "cannot read the node; its labels are left out of the record"
            ),
        }
    }
    crate::records::observe_environment(pods, &found, engine.kubernetes_version.as_deref())
}
