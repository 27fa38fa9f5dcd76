//! `status.progress` of a running LLMInference: the controller reads the latest
//! `perfsweep-progress:` line from the tail of the load generator pod's log on the
//! reconciles it makes anyway, and clears it when the benchmark ends.

use crate::support;

use kube::Api;
use kube::api::PostParams;
use perfsweep_benchmarks::kinds::llm::LLMInference;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::json;
use support::kubelet::{AGENT, finish_pod, patch_pod_status, pod_status, running};
use support::{LLMS, NS, Operator, WAIT, double_with_crds, wait_for_object_status, wait_until};

const POD: &str = "chat-loadgen-0";

/// The kubelet reports the pod running (`note` changes nothing but the object).
fn run_pod(double: &ApiDouble, note: &str) {
    let mut status = pod_status("Running", running());
    status["message"] = note.into();
    patch_pod_status(double, POD, status);
}

#[tokio::test]
async fn the_latest_progress_line_of_the_loadgen_log_is_the_status_progress() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let object: LLMInference = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "numConcurrency": [1, 8, 64],
        },
    }))
    .expect("a valid LLMInference");
    Api::<LLMInference>::namespaced(double.client(), NS)
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    wait_until(WAIT, format_args!("pod {POD}"), || {
        double
            .get(&Gvr::PODS, Some(NS), POD)
            .map(|_| ())
            .ok_or_else(|| "no pod yet".to_owned())
    })
    .await;

    double.set_pod_log(
        NS,
        POD,
        AGENT,
        "perfsweep agent: running perfsweep loadgen\n\
         perfsweep-progress: iteration 1/3: D(100,100) concurrency 1\n\
         D(100,100) concurrency 1: 100 requests, 0 errors\n\
         perfsweep-progress: iteration 2/3: D(100,100) concurrency 8\n",
    );
    run_pod(&double, "first");
    let status = wait_for_object_status(&double, &LLMS, "chat", "progress of iteration 2", |s| {
        s["progress"] == "iteration 2/3: D(100,100) concurrency 8"
    })
    .await;
    assert_eq!(status["phase"], "Running", "{status}");

    // A later reconcile (here caused by a pod change) picks up the newer line.
    double.set_pod_log(
        NS,
        POD,
        AGENT,
        "perfsweep-progress: iteration 2/3: D(100,100) concurrency 8\n\
         perfsweep-progress: iteration 3/3: D(100,100) concurrency 64: 120 requests done in 5 s (24.0/s)\n\
         a line that is not progress\n",
    );
    run_pod(&double, "second");
    wait_for_object_status(&double, &LLMS, "chat", "progress of iteration 3", |s| {
        s["progress"]
            == "iteration 3/3: D(100,100) concurrency 64: 120 requests done in 5 s (24.0/s)"
    })
    .await;
    // The controller read the log while the benchmark ran.
    let log_reads: Vec<String> = double
        .requests()
        .into_iter()
        .filter(|r| r.subresource.as_deref() == Some("log"))
        .map(|r| r.path)
        .collect();
    assert!(!log_reads.is_empty());

    // The load generator ends without a report: the benchmark fails, the progress goes.
    finish_pod(&double, POD, 1, "boom");
    let status = wait_for_object_status(&double, &LLMS, "chat", "phase Failed", |s| {
        s["phase"] == "Failed"
    })
    .await;
    assert!(status.get("progress").is_none(), "{status}");
}
