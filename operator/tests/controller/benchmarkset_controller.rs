//! The BenchmarkSet controller against the API double: the test creates sets as a user
//! would and plays the benchmark controller by patching the children's status.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::set::BenchmarkSet;
use perfsweep_testkit::{ApiDouble, RequestMatcher};
use serde_json::{Value, json};
use support::*;

/// Marks every child of `set` that has not finished as Succeeded, again and again as the
/// operator creates more, until the set reaches a final phase; returns its status.
async fn succeed_all_until_done(double: &ApiDouble, set: &str) -> Value {
    wait_until(WAIT, format_args!("BenchmarkSet {set} to finish"), || {
        for child in children(double, set) {
            let phase = child["status"]["phase"].as_str().unwrap_or("Pending");
            if phase != "Succeeded" && phase != "Failed" {
                set_phase(double, name_of(&child), "Succeeded");
            }
        }
        let status = set_status(double, set);
        match status["phase"].as_str() {
            Some("Succeeded" | "Failed") => Ok(status),
            _ => Err(format!("status {status}")),
        }
    })
    .await
}

/// Requests that created any perfsweep benchmark (anything of the group but sets).
fn benchmark_creates(double: &ApiDouble) -> Vec<String> {
    double
        .requests()
        .into_iter()
        .filter(|r| {
            r.verb == "create"
                && r.group == perfsweep_benchmarks::GROUP
                && r.resource != "benchmarksets"
        })
        .map(|r| format!("{} {}", r.verb, r.path))
        .collect()
}

#[tokio::test]
async fn runs_children_max_parallel_at_a_time_until_all_succeed() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("sweep", json!({"streams": [1, 2, 3]}), 2, 2, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    assert_eq!(expected.len(), 6, "3 permutations × 2 repetitions");

    // maxParallel 2: the first two in expansion order, nothing else.
    let status = wait_for_children_string(&double, "sweep", "PP----").await;
    assert_eq!(child_names(&double, "sweep"), sorted(&expected[..2]));
    assert_eq!(iperf_creates(&double, 201), 2);
    assert_eq!(status["phase"], "Running");
    assert_eq!(
        (status["total"].as_u64(), status["pending"].as_u64()),
        (Some(6), Some(6))
    );

    // Running children still count against maxParallel.
    set_phase(&double, &expected[0], "Running");
    set_phase(&double, &expected[1], "Running");
    let status = wait_for_children_string(&double, "sweep", "RR----").await;
    assert_eq!(status["running"], 2);
    assert_eq!(child_names(&double, "sweep"), sorted(&expected[..2]));

    // Finishing them makes room for the next two.
    set_phase(&double, &expected[0], "Succeeded");
    set_phase(&double, &expected[1], "Succeeded");
    wait_for_children_string(&double, "sweep", "SSPP--").await;
    assert_eq!(child_names(&double, "sweep"), sorted(&expected[..4]));

    // One finishing frees exactly one slot.
    set_phase(&double, &expected[2], "Succeeded");
    wait_for_children_string(&double, "sweep", "SSSPP-").await;
    assert_eq!(child_names(&double, "sweep"), sorted(&expected[..5]));

    let status = succeed_all_until_done(&double, "sweep").await;
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert_eq!(status["total"], 6);
    assert_eq!(status["succeeded"], 6);
    assert_eq!(status["failed"], 0);
    assert_eq!(status["pending"], 0);
    assert_eq!(status["children"], "SSSSSS");
    assert_eq!(status["permutationCount"], 3);
    assert_eq!(status["observedGeneration"], 1);
    assert!(
        status["startedAt"].is_string() && status["finishedAt"].is_string(),
        "{status}"
    );
    assert_eq!(condition(&status, "Valid")["status"], "True", "{status}");
    assert_eq!(condition(&status, "Complete")["status"], "True", "{status}");
    assert_eq!(condition(&status, "Complete")["reason"], "AllSucceeded");
    assert_eq!(condition(&status, "Progressing")["status"], "False");

    let children = children(&double, "sweep");
    assert_eq!(child_names(&double, "sweep"), sorted(&expected));
    assert_eq!(iperf_creates(&double, 201), 6, "each child created once");
    let set_uid = set
        .metadata
        .uid
        .as_deref()
        .expect("the created set has a uid");
    let mut streams_seen = BTreeMap::new();
    for child in &children {
        let name = name_of(child);
        let owners = child["metadata"]["ownerReferences"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no ownerReferences"));
        assert_eq!(owners.len(), 1, "{name}: {owners:?}");
        assert_eq!(owners[0]["kind"], "BenchmarkSet", "{name}");
        assert_eq!(owners[0]["name"], "sweep", "{name}");
        assert_eq!(owners[0]["uid"], set_uid, "{name}");
        assert_eq!(owners[0]["controller"], true, "{name}");
        assert_eq!(child["metadata"]["labels"][labels::SET], "sweep", "{name}");
        assert_eq!(child["spec"]["duration"], 5, "{name}: the template is kept");
        *streams_seen
            .entry(child["spec"]["streams"].to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        streams_seen,
        BTreeMap::from([("1".into(), 2), ("2".into(), 2), ("3".into(), 2)]),
        "each permutation runs twice"
    );
    let reasons: BTreeSet<String> = events_about(&double, "sweep")
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.contains("Created") && reasons.contains("Succeeded"),
        "events: {reasons:?}"
    );
}

#[tokio::test]
async fn stop_policy_creates_nothing_after_a_failure() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("stop", json!({"streams": [1, 2, 3]}), 2, 2, "Stop"),
    )
    .await;
    let expected = expected_names(&set);
    wait_for_children_string(&double, "stop", "PP----").await;

    fail(&double, &expected[0], "iperf3 client exited with code 1");
    // The operator has seen the failure, and with a free slot still created nothing.
    let status = wait_for_children_string(&double, "stop", "FP----").await;
    assert_eq!(
        status["phase"], "Running",
        "the second child is still active: {status}"
    );
    assert_eq!(child_names(&double, "stop"), sorted(&expected[..2]));

    set_phase(&double, &expected[1], "Succeeded");
    let status = wait_for_status(&double, "stop", "phase Failed", |s| s["phase"] == "Failed").await;
    assert_eq!(status["children"], "FS----");
    assert_eq!(
        (status["failed"].as_u64(), status["succeeded"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(status["total"], 6);
    assert_eq!(
        status["failures"],
        json!([{"name": expected[0], "message": "iperf3 client exited with code 1"}])
    );
    assert_eq!(condition(&status, "Complete")["status"], "True");
    assert_eq!(condition(&status, "Complete")["reason"], "ChildrenFailed");
    assert_eq!(child_names(&double, "stop"), sorted(&expected[..2]));
    assert_eq!(
        iperf_creates(&double, 201),
        2,
        "no child created after the failure"
    );
}

#[tokio::test]
async fn continue_policy_runs_the_rest_after_a_failure() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("cont", json!({"streams": [1, 2, 3]}), 2, 2, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    wait_for_children_string(&double, "cont", "PP----").await;

    fail(&double, &expected[0], "no route to host");
    wait_for_children_string(&double, "cont", "FPP---").await;
    assert_eq!(child_names(&double, "cont"), sorted(&expected[..3]));

    let status = succeed_all_until_done(&double, "cont").await;
    assert_eq!(status["phase"], "Failed", "one child failed: {status}");
    assert_eq!(status["children"], "FSSSSS");
    assert_eq!(
        (status["failed"].as_u64(), status["succeeded"].as_u64()),
        (Some(1), Some(5))
    );
    assert_eq!(
        status["failures"],
        json!([{"name": expected[0], "message": "no route to host"}])
    );
    assert_eq!(child_names(&double, "cont"), sorted(&expected));
    assert_eq!(iperf_creates(&double, 201), 6);
}

/// Creates `object`, waits for the operator to reject it, and checks the status and
/// event name `field_path` and that no benchmark of any kind was created.
async fn assert_rejected(object: Value, field_path: &str) {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let name = object["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    create_set(&double, object).await;

    let status =
        wait_for_status(&double, &name, "phase Invalid", |s| s["phase"] == "Invalid").await;
    let valid = condition(&status, "Valid");
    assert_eq!(valid["status"], "False", "{status}");
    assert_eq!(valid["reason"], "InvalidSpec", "{status}");
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(field_path),
        "the Valid condition should name {field_path}: {message:?}"
    );
    assert_eq!(status["total"], 0, "{status}");
    assert!(status.get("children").is_none(), "{status}");

    let event = wait_until(WAIT, "an InvalidSpec event", || {
        let events = events_about(&double, &name);
        events
            .iter()
            .find(|e| e["reason"] == "InvalidSpec")
            .cloned()
            .ok_or_else(|| format!("events: {events:?}"))
    })
    .await;
    assert_eq!(event["type"], "Warning");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(field_path),
        "the event should name {field_path}: {note:?}"
    );

    assert_eq!(
        benchmark_creates(&double),
        Vec::<String>::new(),
        "nothing is created"
    );
    for kind in registry::kinds() {
        let gvr = perfsweep_testkit::Gvr::new(
            perfsweep_benchmarks::GROUP,
            perfsweep_benchmarks::VERSION,
            kind.plural().to_owned(),
        );
        assert!(
            double.list(&gvr, None).is_empty(),
            "no {} exists",
            kind.kind
        );
    }
}

#[tokio::test]
async fn invalid_permutation_value_is_rejected_with_its_path() {
    // IPerf streams are 1..=128; the double does not check schemas, the operator must.
    assert_rejected(
        iperf_set("bad-streams", json!({"streams": [1, 0]}), 1, 2, "Continue"),
        "spec.permutations.product[streams][1]",
    )
    .await;
}

#[tokio::test]
async fn unknown_template_kind_is_rejected() {
    let mut object = iperf_set("bad-kind", json!({"streams": [1]}), 1, 1, "Continue");
    object["spec"]["template"]["kind"] = json!("IPerf3");
    assert_rejected(object, "spec.template.kind").await;
}

#[tokio::test]
async fn too_long_set_name_is_rejected() {
    let name = "a-benchmark-set-name-too-long-for-its-children";
    assert!(name.len() > perfsweep_benchmarks::set::MAX_SET_NAME_LEN);
    assert_rejected(
        iperf_set(name, json!({"streams": [1]}), 1, 1, "Continue"),
        "metadata.name",
    )
    .await;
}

#[tokio::test]
async fn restart_mid_sweep_neither_loses_nor_duplicates_children() {
    let double = double_with_crds().await;
    let first = Operator::start(&double, "test-1");
    let set = create_set(
        &double,
        iperf_set(
            "restart",
            json!({"streams": [1, 2, 3, 4]}),
            2,
            3,
            "Continue",
        ),
    )
    .await;
    let expected = expected_names(&set);
    assert_eq!(expected.len(), 8);
    wait_for_children_string(&double, "restart", "PPP-----").await;

    // Raise maxParallel to 8 with every create failing: each reconcile stops at its
    // first create, with an error, however often a slow machine lets it retry before the
    // operator is stopped.
    double.fail_next(
        RequestMatcher::new("create", "iperfs").times(usize::MAX),
        500,
        "InternalError",
    );
    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    sets.patch(
        "restart",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"maxParallel": 8}})),
    )
    .await
    .expect("raising maxParallel");
    wait_until(
        WAIT,
        "the injected create failure",
        || match iperf_creates(&double, 500) {
            0 => Err("no failed create yet".into()),
            n => Ok(n),
        },
    )
    .await;
    first.stop().await;
    double.clear_failures();
    assert_eq!(
        child_names(&double, "restart"),
        sorted(&expected[..3]),
        "the failed reconcile created nothing after the injected error"
    );
    assert_eq!(
        set_status(&double, "restart")["children"],
        "PPP-----",
        "the failed reconcile did not update status"
    );

    // Two children finish while no operator runs.
    set_phase(&double, &expected[0], "Succeeded");
    set_phase(&double, &expected[1], "Succeeded");

    let _second = Operator::start(&double, "test-2");
    wait_for_children_string(&double, "restart", "SSPPPPPP").await;
    assert_eq!(child_names(&double, "restart"), sorted(&expected));
    assert_eq!(
        iperf_creates(&double, 201),
        8,
        "each child created exactly once over both runs"
    );
    assert_eq!(
        iperf_creates(&double, 409),
        0,
        "the restarted operator found the existing children"
    );
    assert!(iperf_creates(&double, 500) >= 1);

    let status = succeed_all_until_done(&double, "restart").await;
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert_eq!(status["children"], "SSSSSSSS");
    assert_eq!(status["total"], 8);
    assert_eq!(iperf_creates(&double, 201), 8);
}

#[tokio::test]
async fn deleting_the_set_deletes_its_children() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("doomed", json!({"streams": [1, 2, 3]}), 1, 3, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    wait_for_children_string(&double, "doomed", "PPP").await;
    set_phase(&double, &expected[0], "Running");

    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    sets.delete("doomed", &DeleteParams::default())
        .await
        .expect("deleting the set");
    wait_until(
        WAIT,
        "the children to be garbage collected",
        || match child_names(&double, "doomed") {
            names if names.is_empty() => Ok(()),
            names => Err(format!("children {names:?}")),
        },
    )
    .await;

    // The operator reacts to the deletions; once it has reconciled a later set, it has
    // had every chance to (wrongly) recreate the first set's children.
    create_set(
        &double,
        iperf_set("after", json!({"streams": [1]}), 1, 1, "Continue"),
    )
    .await;
    wait_for_children_string(&double, "after", "P").await;
    assert_eq!(child_names(&double, "doomed"), Vec::<String>::new());
    assert_eq!(
        iperf_creates(&double, 201),
        4,
        "3 children of doomed, 1 of after"
    );
}

#[tokio::test]
async fn spec_edit_replaces_only_the_changed_children() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("edit", json!({"streams": [1, 2, 3]}), 1, 3, "Continue"),
    )
    .await;
    let before = expected_names(&set);
    wait_for_children_string(&double, "edit", "PPP").await;
    set_phase(&double, &before[0], "Succeeded");
    set_phase(&double, &before[1], "Succeeded");
    set_phase(&double, &before[2], "Running");
    wait_for_children_string(&double, "edit", "SSR").await;
    let uid = |name: &str| {
        double
            .get(&IPERFS, Some(NS), name)
            .map_or(Value::Null, |c| c["metadata"]["uid"].clone())
    };
    let kept_uids = [uid(&before[0]), uid(&before[1])];

    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    let edited = sets
        .patch(
            "edit",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"permutations": {"product": {"streams": [1, 2, 4]}}}})),
        )
        .await
        .expect("editing the set");
    let after = expected_names(&edited);
    assert_eq!(
        after[..2],
        before[..2],
        "unchanged permutations keep their names"
    );
    assert_ne!(after[2], before[2]);

    let status = wait_for_status(
        &double,
        "edit",
        "observedGeneration 2 and status SSP",
        |s| s["observedGeneration"] == 2 && s["children"] == "SSP",
    )
    .await;
    assert_eq!(child_names(&double, "edit"), sorted(&after));
    assert_eq!(
        double.get(&IPERFS, Some(NS), &before[2]),
        None,
        "the child for streams 3 is deleted"
    );
    assert_eq!(
        [uid(&after[0]), uid(&after[1])],
        kept_uids,
        "1 and 2 are the same objects"
    );
    for kept in &after[..2] {
        let child = double.get(&IPERFS, Some(NS), kept).expect("kept child");
        assert_eq!(
            child["status"]["phase"], "Succeeded",
            "{kept} keeps its status"
        );
    }
    let new = double
        .get(&IPERFS, Some(NS), &after[2])
        .expect("child for streams 4");
    assert_eq!(new["spec"]["streams"], 4);
    assert_eq!(
        (status["total"].as_u64(), status["succeeded"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        requests(&double, "delete", "iperfs")
            .iter()
            .map(|r| r.name.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        [before[2].clone()]
    );
    assert!(
        events_about(&double, "edit")
            .iter()
            .any(|e| e["reason"] == "Pruned"),
        "a Pruned event"
    );
}

#[tokio::test]
async fn kube_perftest_set_runs_through_the_operator() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/testdata/kube-perftest/cni/iperf-set.yaml"
    ))
    .expect("reading the kube-perftest example");
    let mut object: Value =
        perfsweep_benchmarks::formats::yaml::from_str(&text).expect("the example is YAML");
    assert_eq!(object["apiVersion"], "perftest.stackhpc.com/v1alpha1");
    // The set itself must be ours; its template keeps kube-perftest's group.
    object["apiVersion"] = json!("perfsweep.io/v1alpha1");
    object["spec"]["maxParallel"] = json!(40);

    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(&double, object).await;
    let expected = expected_names(&set);
    assert_eq!(expected.len(), 40, "8 stream counts × 5 repetitions");

    let status = wait_for_children_string(&double, "iperf-cni", &"P".repeat(40)).await;
    assert_eq!(status["total"], 40);
    assert_eq!(status["permutationCount"], 8);
    let valid = condition(&status, "Valid");
    assert_eq!(valid["status"], "True");
    assert!(
        valid["message"]
            .as_str()
            .unwrap_or_default()
            .contains("perftest.stackhpc.com/v1alpha1"),
        "the Valid condition reports the conversion: {valid}"
    );
    assert_eq!(child_names(&double, "iperf-cni"), sorted(&expected));
    assert_eq!(iperf_creates(&double, 201), 40);
    for child in children(&double, "iperf-cni") {
        assert_eq!(child["apiVersion"], "perfsweep.io/v1alpha1");
        assert_eq!(child["spec"]["duration"], 30);
        assert_eq!(child["spec"]["imagePullPolicy"], "Always");
    }
}

#[tokio::test]
async fn spec_edit_clears_status_fields_that_no_longer_apply() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("stale", json!({"streams": [1, 2]}), 1, 2, "Continue"),
    )
    .await;
    let before = expected_names(&set);
    wait_for_children_string(&double, "stale", "PP").await;
    set_phase(&double, &before[0], "Succeeded");
    fail(&double, &before[1], "server pod evicted");
    let status =
        wait_for_status(&double, "stale", "phase Failed", |s| s["phase"] == "Failed").await;
    assert_eq!(
        status["failures"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert!(status["finishedAt"].is_string(), "{status}");

    // Replace the failed permutation: the set runs again, without the old failure.
    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    sets.patch(
        "stale",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"permutations": {"product": {"streams": [1, 3]}}}})),
    )
    .await
    .expect("editing the set");
    let status = wait_for_status(&double, "stale", "generation 2 running", |s| {
        s["observedGeneration"] == 2 && s["children"] == "SP"
    })
    .await;
    assert_eq!(status["phase"], "Running", "{status}");
    assert_eq!(status["failed"], 0, "{status}");
    assert_eq!(
        status.get("failures"),
        None,
        "the deleted child's failure is gone: {status}"
    );
    assert_eq!(
        status.get("finishedAt"),
        None,
        "the set is no longer finished: {status}"
    );
    assert!(status["startedAt"].is_string(), "{status}");

    // Now make it invalid: nothing of the valid expansion's summary may remain.
    sets.patch(
        "stale",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"permutations": {"product": {"streams": [1, 0]}}}})),
    )
    .await
    .expect("editing the set");
    let status = wait_for_status(&double, "stale", "phase Invalid", |s| {
        s["phase"] == "Invalid"
    })
    .await;
    assert_eq!(status["observedGeneration"], 3, "{status}");
    for stale in ["children", "permutationCount", "failures", "finishedAt"] {
        assert_eq!(status.get(stale), None, "{stale} is cleared: {status}");
    }
    assert_eq!(status["total"], 0, "{status}");
}

#[tokio::test]
async fn changing_the_template_kind_deletes_the_old_kinds_children() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("kinds", json!({"streams": [1, 2]}), 1, 2, "Continue"),
    )
    .await;
    let iperf_children = expected_names(&set);
    wait_for_children_string(&double, "kinds", "PP").await;

    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    // A merge patch: null removes the IPerf-only fields.
    let fio_template = json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "Fio",
        "spec": {"duration": null, "size": "16M"}});
    let edited = sets
        .patch(
            "kinds",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": fio_template,
                "permutations": {"product": {"streams": null, "bs": ["4k", "64k"]}}}})),
        )
        .await
        .expect("editing the set");
    let fio_children = expected_names(&edited);
    let fios = perfsweep_testkit::Gvr::from_static("perfsweep.io", "v1alpha1", "fios");
    wait_until(
        WAIT,
        "the Fio children exist and the IPerf children are gone",
        || {
            let iperfs_left: Vec<&String> = iperf_children
                .iter()
                .filter(|name| double.get(&IPERFS, Some(NS), name).is_some())
                .collect();
            let fios_made = fio_children
                .iter()
                .filter(|name| double.get(&fios, Some(NS), name).is_some())
                .count();
            if iperfs_left.is_empty() && fios_made == 2 {
                Ok(())
            } else {
                Err(format!(
                    "IPerf children left: {iperfs_left:?}, Fio children: {fios_made}"
                ))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn node_pairs_expand_over_the_labelled_nodes() {
    let double = double_with_crds().await;
    for node in ["node-c", "node-a", "node-b"] {
        create_node(&double, node, json!({"bench": "yes"}));
    }
    create_node(&double, "control-plane", json!({"bench": "no"}));
    let _operator = Operator::start(&double, "test");
    create_set(&double, node_pair_set("pairs", 3)).await;

    let status = wait_for_status(&double, "pairs", "three children", |s| s["total"] == 3).await;
    assert_eq!(status["permutationCount"], 3, "{status}");
    assert_eq!(
        status["nodes"],
        json!(["node-a", "node-b", "node-c"]),
        "{status}"
    );
    // Three nodes: three rounds of one pair (one node sits out), one round at a time
    // whatever maxParallel says.
    let first = wait_until(WAIT, "the first round's child", || {
        match children(&double, "pairs") {
            c if c.len() == 1 => Ok(c),
            c => Err(format!("{} children", c.len())),
        }
    })
    .await;
    assert_eq!(first[0]["metadata"]["labels"]["perfsweep.io/round"], "0");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        children(&double, "pairs").len(),
        1,
        "round 1 waits for round 0"
    );

    // A node labelled mid-sweep does not change this generation's pairs.
    create_node(&double, "node-d", json!({"bench": "yes"}));
    let status = succeed_all_until_done(&double, "pairs").await;
    assert_eq!(status["total"], 3, "{status}");
    assert_eq!(
        status["rounds"],
        json!({"total": 3, "current": 3}),
        "{status}"
    );
    let mut pairs: Vec<(String, String)> = children(&double, "pairs")
        .iter()
        .map(|child| {
            let node = |role: &str| {
                child["spec"]["placement"][role]["nodes"][0]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            };
            (node("server"), node("client"))
        })
        .collect();
    pairs.sort();
    let expected: Vec<(String, String)> = [
        ("node-a", "node-b"),
        ("node-a", "node-c"),
        ("node-b", "node-c"),
    ]
    .iter()
    .map(|(s, c)| ((*s).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(pairs, expected, "the unlabelled node is in no pair");
    assert!(
        double
            .requests()
            .iter()
            .any(|r| r.resource == "nodes" && r.verb == "list"),
        "the operator lists the nodes"
    );
}

#[tokio::test]
async fn a_node_pair_set_selecting_fewer_than_two_nodes_is_invalid() {
    // The double has no nodes at all.
    assert_rejected(
        node_pair_set("lonely", 1),
        "spec.permutations.nodePairs.selector",
    )
    .await;
}

/// Issue 23: the set's `Created` events for different children merged into one series
/// ("x2"), and the second child's note was lost. Each child's creation is its own event.
#[tokio::test]
async fn each_created_child_has_its_own_event() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        iperf_set("events", json!({"streams": [1, 2]}), 1, 1, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    wait_for_children_string(&double, "events", "P-").await;
    set_phase(&double, &expected[0], "Succeeded");
    wait_for_children_string(&double, "events", "SP").await;
    let notes = wait_until(WAIT, "a Created event per child", || {
        let notes: Vec<String> = events_about(&double, "events")
            .iter()
            .filter(|e| e["reason"] == "Created")
            .map(|e| e["note"].as_str().unwrap_or_default().to_owned())
            .collect();
        if notes.len() == 2 {
            Ok(notes)
        } else {
            Err(format!("{notes:?}"))
        }
    })
    .await;
    for child in &expected {
        assert!(
            notes.iter().any(|n| n == &format!("Created {child}")),
            "{child} not in {notes:?}"
        );
    }
    let related: Vec<Value> = events_about(&double, "events")
        .iter()
        .filter(|e| e["reason"] == "Created")
        .map(|e| e["related"]["name"].clone())
        .collect();
    assert_eq!(related.len(), 2, "{related:?}");
}

/// Issue 26: a set that does not deserialize (here `repetitions` a string, as a hand edit
/// past validation or another perfsweep version might leave it) is reported, naming the
/// field, and the other sets go on: before the guard it failed the list of every set.
#[tokio::test]
async fn a_malformed_set_is_reported_and_does_not_stop_the_others() {
    let double = double_with_crds().await;
    let mut malformed = iperf_set("malformed", json!({"streams": [1]}), 1, 1, "Continue");
    malformed["spec"]["repetitions"] = json!("three");
    double
        .create(&SETS, malformed)
        .expect("the double stores the malformed set, as etcd would");
    let _operator = Operator::start(&double, "test");
    create_set(
        &double,
        iperf_set("healthy", json!({"streams": [1, 2]}), 1, 2, "Continue"),
    )
    .await;

    wait_until(WAIT, "the healthy set's two children", || {
        let names = child_names(&double, "healthy");
        if names.len() == 2 {
            Ok(())
        } else {
            Err(format!("children {names:?}"))
        }
    })
    .await;
    let reported = wait_until(
        WAIT,
        "an InvalidObject event about the malformed set",
        || {
            let found: Vec<String> = events_about(&double, "malformed")
                .iter()
                .filter(|e| e["reason"] == "InvalidObject")
                .filter_map(|e| e["note"].as_str().map(str::to_owned))
                .collect();
            if found.is_empty() {
                Err(format!("events: {:?}", events_about(&double, "malformed")))
            } else {
                Ok(found)
            }
        },
    )
    .await;
    assert!(
        reported[0].contains("spec.repetitions: invalid type: string"),
        "the event names the field and why: {reported:?}"
    );
    assert!(
        child_names(&double, "malformed").is_empty(),
        "nothing is created for a set that cannot be read"
    );
    assert!(
        set_status(&double, "malformed").is_null(),
        "its status is left alone: {}",
        set_status(&double, "malformed")
    );
}
