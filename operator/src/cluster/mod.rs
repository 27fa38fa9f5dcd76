//! `perfsweep run FILE` against a cluster: apply, follow, download results and evidence,
//! print the table, clean up (also on Ctrl-C).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::api::status::Phase;
use perfsweep_benchmarks::input::document::Checked;
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::results::record::{RecordOutcome, ResultRecord};
use perfsweep_benchmarks::set::BenchmarkSet;
use serde_json::{Map, Value, json};

use crate::controller::benchmarkset::api_resource;
use crate::local::table;
use crate::output_dir::write_atomic;
use crate::records::{Kept, cluster_record};
use crate::verdict::{Acceptance, Ended, Stop, Tally};

/// Where the cluster is and how to use it.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    /// Keep what was created instead of deleting it at the end.
    pub keep: bool,
    /// How often progress is polled.
    pub poll: Duration,
}

/// Builds a client for `target`: its kubeconfig and context, or the defaults kubectl uses.
pub async fn client(target: &Target) -> anyhow::Result<(Client, String)> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..Default::default()
    };
    let config = match &target.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        None if target.context.is_some() => Config::from_kubeconfig(&options)
            .await
            .context("loading the kubeconfig")?,
        None => Config::infer()
            .await
            .context("no kubeconfig or in-cluster configuration found")?,
    };
    let namespace = target
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok((client, namespace))
}

/// The cluster's nodes matching `selector` (`k=v,...`; empty for all), with their labels.
pub async fn nodes(
    target: &Target,
    selector: &str,
) -> anyhow::Result<Vec<(String, std::collections::BTreeMap<String, String>)>> {
    let (client, _) = client(target).await?;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let list = nodes
        .list(&ListParams::default().labels(selector))
        .await
        .with_context(|| {
            format!("listing the nodes matching {selector:?} for a node-pair or each-node set")
        })?;
    Ok(list
        .items
        .iter()
        .map(|node| (node.name_any(), node.labels().clone()))
        .collect())
}

/// What was applied, to follow and clean up.
enum Applied {
    Set {
        name: String,
        kind: &'static KindInfo,
    },
    Benchmark {
        name: String,
        kind: &'static KindInfo,
    },
}

/// Runs the checked documents on the cluster and writes results under `artifacts`
/// (prepared by the caller). Interrupted (`interrupt` resolves first), it writes the
/// records of the benchmarks that had finished before it cleans up, and says so.
pub async fn run(
    documents: Vec<Checked>,
    target: &Target,
    artifacts: &Path,
    run_id: &str,
    interrupt: impl std::future::Future<Output = Stop>,
) -> anyhow::Result<Ended> {
    let (client, namespace) = client(target).await?;
    let created_namespace = ensure_namespace(&client, &namespace).await?;
    let mut applied = Vec::new();
    let outcome = async {
        tokio::pin!(interrupt);
        let applying = async {
            for document in documents {
                applied.push(apply(&client, &namespace, document).await?);
            }
            follow(&client, &namespace, &applied, target.poll).await
        };
        let stopped = tokio::select! {
            result = applying => { result?; None }
            stop = &mut interrupt => Some(stop),
        };
        let Some(stop) = stopped else {
            let tally = download(&client, &namespace, &applied, artifacts, run_id, false).await?;
            return Ok(Ended {
                tally,
                stopped: None,
            });
        };
        eprintln!(
            "interrupted by {}: keeping the records of finished benchmarks, then cleaning up",
            stop.name()
        );
        let tally = download(&client, &namespace, &applied, artifacts, run_id, true).await?;
        eprintln!(
            "interrupted: kept the records of {} finished benchmark(s) in {}; unfinished ones were not recorded",
            tally.succeeded + tally.failed,
            artifacts.display()
        );
        Ok(Ended {
            tally,
            stopped: Some(stop),
        })
    }
    .await;
    if target.keep {
        eprintln!("keeping the benchmarks in namespace {namespace} (--keep)");
    } else {
        cleanup(&client, &namespace, &applied, created_namespace).await;
    }
    outcome
}

async fn ensure_namespace(client: &Client, namespace: &str) -> anyhow::Result<bool> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(namespace)
        .await
        .context("checking the namespace")?
        .is_some()
    {
        return Ok(false);
    }
    let object = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                labels::MANAGED_BY.to_owned(),
                labels::MANAGER.to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating namespace {namespace}"))?;
    eprintln!("created namespace {namespace}; it is removed when the run ends");
    Ok(true)
}

async fn apply(client: &Client, namespace: &str, document: Checked) -> anyhow::Result<Applied> {
    match document {
        Checked::Set {
            name, set, cases, ..
        } => {
            let sets: Api<BenchmarkSet> = Api::namespaced(client.clone(), namespace);
            let mut object = *set;
            object.metadata.namespace = Some(namespace.to_owned());
            object.metadata.resource_version = None;
            sets.create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("creating BenchmarkSet {namespace}/{name}"))?;
            eprintln!(
                "created BenchmarkSet {name}: {} {} benchmarks",
                cases.child_count(),
                cases.kind.kind
            );
            Ok(Applied::Set {
                name,
                kind: cases.kind,
            })
        }
        Checked::Benchmark {
            name,
            kind,
            mut object,
        } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
            object["metadata"]["namespace"] = json!(namespace);
            let object: DynamicObject = serde_json::from_value(object)?;
            api.create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("creating {} {namespace}/{name}", kind.kind))?;
            eprintln!("created {} {name}", kind.kind);
            Ok(Applied::Benchmark { name, kind })
        }
    }
}

/// Polls until everything applied has finished, printing progress as it changes.
async fn follow(
    client: &Client,
    namespace: &str,
    applied: &[Applied],
    poll: Duration,
) -> anyhow::Result<()> {
    let mut last = String::new();
    loop {
        let mut done = true;
        let mut lines = Vec::new();
        for item in applied {
            let (line, finished) = progress(client, namespace, item).await?;
            done &= finished;
            lines.push(line);
        }
        let now = lines.join("; ");
        if now != last {
            eprintln!("{now}");
            last = now;
        }
        if done {
            return Ok(());
        }
        tokio::time::sleep(poll).await;
    }
}

async fn progress(
    client: &Client,
    namespace: &str,
    item: &Applied,
) -> anyhow::Result<(String, bool)> {
    match item {
        Applied::Set { name, .. } => {
            let sets: Api<BenchmarkSet> = Api::namespaced(client.clone(), namespace);
            let set = sets
                .get(name)
                .await
                .with_context(|| format!("reading BenchmarkSet {name}"))?;
            let status = set.status.unwrap_or_default();
            let phase = status
                .phase
                .map_or_else(|| "Pending".into(), |p| format!("{p:?}"));
            let finished = matches!(phase.as_str(), "Succeeded" | "Failed" | "Invalid");
            let mut line = format!(
                "{name}: {phase}, {}/{} finished ({} succeeded, {} failed, {} running)",
                status.succeeded + status.failed,
                status.total,
                status.succeeded,
                status.failed,
                status.running
            );
            if phase == "Invalid" {
                let reason = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Valid")
                    .map(|c| c.message.clone());
                line.push_str(&format!(": {}", reason.unwrap_or_default()));
            }
            Ok((line, finished))
        }
        Applied::Benchmark { name, kind } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
            let object = api
                .get(name)
                .await
                .with_context(|| format!("reading {} {name}", kind.kind))?;
            let phase = phase_of(&object);
            let finished = phase.is_some_and(Phase::is_finished);
            let phase = phase.map_or("Pending", Phase::as_str);
            Ok((format!("{name}: {phase}"), finished))
        }
    }
}

fn phase_of(object: &DynamicObject) -> Option<Phase> {
    object
        .data
        .pointer("/status/phase")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
}

/// Writes one record per benchmark (and its evidence), prints the table and the
/// verdict, and returns the counts. With `finished_only` (an interrupted run), benchmarks
/// still running are left out.
async fn download(
    client: &Client,
    namespace: &str,
    applied: &[Applied],
    artifacts: &Path,
    run_id: &str,
    finished_only: bool,
) -> anyhow::Result<Tally> {
    let mut rows = Vec::new();
    let mut tally = Tally::default();
    for item in applied {
        let (kind, objects, set) = match item {
            Applied::Set { name, kind } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
                let children = api
                    .list(&ListParams::default().labels(&format!("{}={name}", labels::SET)))
                    .await
                    .with_context(|| format!("listing the children of {name}"))?;
                (*kind, children.items, Some(name.clone()))
            }
            Applied::Benchmark { name, kind } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
                (*kind, vec![api.get(name).await?], None)
            }
        };
        for object in objects {
            if finished_only && !phase_of(&object).is_some_and(Phase::is_finished) {
                continue;
            }
            let kept = kept(client, namespace, &object.name_any()).await;
            let record = cluster_record(
                kind,
                &serde_json::to_value(&object)?,
                set.clone(),
                &kept,
                run_id,
            );
            if let (Some(raw), Some(evidence)) = (
                kept.report.as_ref().and_then(|r| r.raw_output.as_ref()),
                &record.evidence,
            ) {
                let path = artifacts.join(&evidence.path);
                write_atomic(&path, raw.as_bytes())
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            let (result, outcome) = match &record.outcome {
                RecordOutcome::Succeeded {
                    summary, result, ..
                } => (summary.clone(), Some(result)),
                RecordOutcome::Failed { reason, .. } => (format!("FAILED ({reason})"), None),
            };
            if let Some(line) = failure_line(&record) {
                eprintln!("{line}");
            }
            let verdict = Acceptance::of(kind, &record.spec, outcome);
            tally.add(outcome.is_some(), &verdict);
            if let Acceptance::Rejected(why) = &verdict {
                eprintln!("{} REJECTED: {why}", record.benchmark.name);
            }
            rows.push(table::Row {
                name: record.benchmark.name.clone(),
                permutation: describe(&record.benchmark.permutation),
                repetition: record
                    .benchmark
                    .repetition
                    .map_or_else(|| "-".into(), |r| r.to_string()),
                result,
                verdict: verdict.cell().to_owned(),
                seconds: seconds_between(&record.started_at, &record.finished_at),
            });
            let path = artifacts.join(format!("{}.json", record.benchmark.name));
            write_atomic(&path, serde_json::to_string_pretty(&record)?.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    print!("{}", table::render(&rows));
    for item in applied {
        if let Applied::Set { name, .. } = item {
            fleet_of_set(client, namespace, name, &mut tally).await;
        }
    }
    eprintln!("results and evidence written to {}", artifacts.display());
    eprintln!("{} succeeded, {} failed", tally.succeeded, tally.failed);
    if let Some(line) = tally.verdict_line() {
        eprintln!("{line}");
    }
    Ok(tally)
}

/// A node-pair set's fleet verdict, as the controller wrote it into the set's status:
/// printed, and counted into the run's verdict when it is why the set is not accepted.
async fn fleet_of_set(client: &Client, namespace: &str, name: &str, tally: &mut Tally) {
    let sets: Api<BenchmarkSet> = Api::namespaced(client.clone(), namespace);
    let status = match sets.get(name).await {
        Ok(set) => set.status.unwrap_or_default(),
        Err(error) => {
            eprintln!("warning: cannot read BenchmarkSet {name} for its fleet verdict: {error}");
            return;
        }
    };
    if let Some(fleet) = &status.fleet {
        println!("\n{name}: {}", fleet.headline());
    }
    if let Some(nodes) = &status.per_node {
        println!("\n{name}: {}", nodes.headline());
    }
    let fleet_rejected = status.conditions.iter().any(|c| {
        c.type_ == perfsweep_benchmarks::judging::acceptance::CONDITION
            && perfsweep_benchmarks::judging::acceptance::is_fleet_reason(&c.reason)
    });
    if fleet_rejected {
        tally.fleets_not_accepted += 1;
    }
}

/// What the operator kept of a benchmark: the agent report with the raw evidence, and
/// the environment it observed.
async fn kept(client: &Client, namespace: &str, benchmark: &str) -> Kept {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match maps.get_opt(&labels::evidence_config_map(benchmark)).await {
        Ok(Some(map)) => Kept::from_config_map(&map),
        _ => Kept::default(),
    }
}

/// What a failed benchmark's record says about its failure, for the terminal: the table
/// has room for the reason only (issue 23: `FAILED (PodFailed)` was all a user saw of
/// `ToolMissing: IMB-MPI1 not found`).
fn failure_line(record: &ResultRecord) -> Option<String> {
    match &record.outcome {
        RecordOutcome::Failed { reason, message } => Some(format!(
            "{} FAILED {reason}: {message}",
            record.benchmark.name
        )),
        RecordOutcome::Succeeded { .. } => None,
    }
}

fn describe(permutation: &Map<String, Value>) -> String {
    if permutation.is_empty() {
        return "-".into();
    }
    permutation
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn seconds_between(start: &str, end: &str) -> f64 {
    match (
        start.parse::<jiff::Timestamp>(),
        end.parse::<jiff::Timestamp>(),
    ) {
        (Ok(start), Ok(end)) => end.duration_since(start).as_secs_f64().max(0.0),
        _ => 0.0,
    }
}

/// Deletes what the run created; failures are reported, not fatal.
async fn cleanup(client: &Client, namespace: &str, applied: &[Applied], created_namespace: bool) {
    for item in applied {
        let (name, resource) = match item {
            Applied::Set { name, .. } => (name, kube::api::ApiResource::erase::<BenchmarkSet>(&())),
            Applied::Benchmark { name, kind } => (name, api_resource(kind)),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => eprintln!("deleted {} {name}", resource.kind),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => eprintln!(
                "warning: could not delete {} {name}: {error}",
                resource.kind
            ),
        }
    }
    if created_namespace {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        match namespaces
            .delete(namespace, &DeleteParams::background())
            .await
        {
            Ok(_) => eprintln!("deleted namespace {namespace}"),
            Err(error) => eprintln!("warning: could not delete namespace {namespace}: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_printed_with_its_reason_and_message() {
        let kind =
            perfsweep_benchmarks::kinds::registry::lookup("MPIPingPong").expect("registered");
        let object = json!({
            "metadata": {"name": "pp", "namespace": "ns"},
            "spec": {},
            "status": {"phase": "Failed", "conditions": [{
                "type": "Failed", "status": "True", "reason": "ToolMissing",
                "message": "IMB-MPI1 is not installed",
            }]},
        });
        let record = cluster_record(kind, &object, None, &Kept::default(), "run");
        assert_eq!(
            failure_line(&record).as_deref(),
            Some("pp FAILED ToolMissing: IMB-MPI1 is not installed")
        );
        let succeeded = json!({"metadata": {"name": "ok"}, "status": {"phase": "Succeeded"}});
        let record = cluster_record(kind, &succeeded, None, &Kept::default(), "run");
        assert_eq!(failure_line(&record), None);
    }
}
