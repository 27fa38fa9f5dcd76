//! The stand-in scheduler and kubelet of the controller tests. The API double runs no
//! pods, so a test moves each pod through its life by patching its status as the kubelet
//! would, gives the result pod's agent a log (real tool output from
//! `benchmarks/testdata`), and waits for the controller's verdict. One copy for every
//! controller test, so that what "a pod ran" means cannot drift between them.

use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};

use super::{NS, WAIT, wait_until};

/// The container every benchmark pod runs: perfsweep's agent.
pub const AGENT: &str = "agent";

/// Now, as the kubelet writes timestamps.
pub fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// The agent container's state while it runs.
pub fn running() -> Value {
    json!({"running": {"startedAt": now()}})
}

/// A pod's `status` as the kubelet reports it: scheduled, in `phase`, with the agent
/// container in `state`.
pub fn pod_status(phase: &str, state: Value) -> Value {
    json!({
        "phase": phase,
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
        "containerStatuses": [{
            "name": AGENT, "image": "ghcr.io/perfsweep/test:stand-in", "imageID": "",
            "ready": true, "restartCount": 0, "state": state,
        }],
    })
}

/// Replaces the status of pod `pod` (in [`NS`]) with `status`.
pub fn patch_pod_status(double: &ApiDouble, pod: &str, status: Value) {
    double
        .patch_status(&Gvr::PODS, Some(NS), pod, json!({ "status": status }))
        .unwrap_or_else(|e| panic!("patching the status of pod {pod}: {e}"));
}

/// The scheduler binds the pod to `node`.
pub fn bind(double: &ApiDouble, pod: &str, node: &str) {
    double
        .patch(
            &Gvr::PODS,
            Some(NS),
            pod,
            json!({"spec": {"nodeName": node}}),
        )
        .unwrap_or_else(|e| panic!("binding pod {pod}: {e}"));
}

/// The scheduler binds the pod and the kubelet starts it.
pub fn run_pod(double: &ApiDouble, pod: &str) {
    patch_pod_status(double, pod, pod_status("Running", running()));
}

/// The pod's agent exits with `exit_code` and this termination message (none when empty).
pub fn finish_pod(double: &ApiDouble, pod: &str, exit_code: i32, message: &str) {
    let (phase, reason) = if exit_code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let mut state = json!({"terminated": {
        "exitCode": exit_code, "reason": reason, "startedAt": now(), "finishedAt": now(),
    }});
    if !message.is_empty() {
        state["terminated"]["message"] = message.into();
    }
    patch_pod_status(double, pod, pod_status(phase, state));
}

/// Real tool output and what perfsweep parses from it.
pub struct Fixture {
    pub raw: String,
    pub result: Value,
    pub summary: String,
}

/// The output of `kind`'s tool kept at `path` under `benchmarks/testdata`, parsed.
pub fn fixture(kind: &str, path: &str) -> Fixture {
    let path = format!(
        "{}/../benchmarks/testdata/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let parsed = registry::lookup(kind)
        .unwrap_or_else(|| panic!("{kind} is not registered"))
        .parse(&raw)
        .unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    Fixture {
        raw,
        result: parsed.result,
        summary: parsed.summary,
    }
}

/// The `status` of the benchmark `name` (a `resource` in [`NS`]); null before it has one.
pub fn status_of(double: &ApiDouble, resource: &Gvr, name: &str) -> Value {
    double
        .get(resource, Some(NS), name)
        .and_then(|object| object.get("status").cloned())
        .unwrap_or(Value::Null)
}

/// Waits until the benchmark `name` is in `phase`; returns its status.
pub async fn wait_for_phase(double: &ApiDouble, resource: &Gvr, name: &str, phase: &str) -> Value {
    wait_until(WAIT, format_args!("{name}: phase {phase}"), || {
        let status = status_of(double, resource, name);
        if status["phase"] == phase {
            Ok(status)
        } else {
            Err(format!("status {status}"))
        }
    })
    .await
}

/// Objects of a type that belong to the benchmark `kind`/`name`: those it controls, and
/// those its gang (the PodGroup it controls) controls, as the operator makes a gang's
/// members.
pub fn owned_by(double: &ApiDouble, resource: &Gvr, kind: &str, name: &str) -> Vec<Value> {
    let controlled_by = |object: &Value, kind: &str, name: &str| {
        object["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["kind"] == kind && o["name"] == name && o["controller"] == true)
    };
    let gangs: Vec<Value> = double
        .list(&Gvr::PODGROUPS, Some(NS))
        .into_iter()
        .filter(|group| controlled_by(group, kind, name))
        .collect();
    double
        .list(resource, Some(NS))
        .into_iter()
        .filter(|object| {
            controlled_by(object, kind, name)
                || gangs.iter().any(|group| {
                    let uid = &group["metadata"]["uid"];
                    object["metadata"]["ownerReferences"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|o| o["uid"] == *uid && o["controller"] == true)
                })
        })
        .collect()
}

/// Waits until nothing the benchmark `kind`/`name` ran with is left (its pods, Service,
/// PodGroup, claims and Secrets, directly or through its PodGroup); its evidence
/// ConfigMap stays with it.
pub async fn wait_for_cleanup(double: &ApiDouble, kind: &str, name: &str) {
    wait_until(
        WAIT,
        format_args!("the objects of {name} to be deleted"),
        || {
            let left: Vec<String> = [
                Gvr::PODS,
                Gvr::SERVICES,
                Gvr::PODGROUPS,
                Gvr::PERSISTENT_VOLUME_CLAIMS,
                Gvr::SECRETS,
            ]
            .iter()
            .flat_map(|gvr| owned_by(double, gvr, kind, name))
            .map(|o| format!("{} {}", o["kind"], o["metadata"]["name"]))
            .collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(left.join(", "))
            }
        },
    )
    .await;
}
