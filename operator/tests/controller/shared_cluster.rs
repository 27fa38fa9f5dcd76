//! Issue 24: what one tenant of a shared cluster must not be able to do to another, or to
//! the operator: make it delete someone else's Secret, or take its memory with a huge log
//! or a set of a million children.

use crate::support;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT, finish_pod, run_pod};
use support::{IPERFS, NS, Operator, SETS, WAIT, condition, double_with_crds, wait_until};

const PINGPONGS: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "mpipingpongs");

/// The memory ceiling the chart gives the operator (values.yaml resources.limits).
const OPERATOR_LIMIT: u64 = 256 * 1024 * 1024;

/// The highest resident set size of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .expect("VmHWM in /proc/self/status")
        * 1024
}

fn create(double: &ApiDouble, gvr: &Gvr, kind: &str, name: &str, spec: Value) {
    double
        .create(
            gvr,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1",
                "kind": kind,
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            }),
        )
        .unwrap_or_else(|e| panic!("creating {kind} {name}: {e:?}"));
}

/// A Secret of someone else's in the namespace, unlabelled.
fn create_secret(double: &ApiDouble, name: &str, string_data: Value) {
    double
        .create(
            &Gvr::SECRETS,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": NS},
                "stringData": string_data,
            }),
        )
        .unwrap_or_else(|e| panic!("creating Secret {name}: {e:?}"));
}

/// Finding 3: a benchmark named `taken` whose token Secret's create met someone else's
/// `taken-launch` failed with NameConflict, then deleted that Secret by name when it
/// ended. (An MPI kind: before issue 24 only plans that launch remotely had the Secret.)
#[tokio::test]
async fn someone_elses_secret_survives_a_name_conflict() {
    let double = double_with_crds().await;
    create_secret(&double, "taken-launch", json!({"token": "someone else's"}));
    let _operator = Operator::start(&double, "test");
    create(
        &double,
        &PINGPONGS,
        "MPIPingPong",
        "taken",
        json!({"scheduler": "default"}),
    );
    let status = kubelet::wait_for_phase(&double, &PINGPONGS, "taken", "Failed").await;
    assert_eq!(
        condition(&status, "Failed")["reason"],
        "NameConflict",
        "{status}"
    );
    kubelet::wait_for_cleanup(&double, "MPIPingPong", "taken").await;
    // Long enough for the release that deleted it before.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let secret = double
        .get(&Gvr::SECRETS, Some(NS), "taken-launch")
        .expect("someone else's Secret is still there");
    assert_eq!(secret["stringData"]["token"], "someone else's", "{secret}");
}

/// The log of an IPerf client's agent: its report as the last line.
fn report_line() -> String {
    let fixture = kubelet::fixture("IPerf", "iperf/tcp-4streams.json");
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(fixture.result.clone()),
            summary: Some(fixture.summary.clone()),
        },
        command: vec!["iperf3".into(), "--client".into(), "10.0.0.7".into()],
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: "2026-11-21T10:00:10Z".into(),
        host: Some("node-b".into()),
        raw_output_sha256: Some(sha256_hex(fixture.raw.as_bytes())),
        raw_output: Some(fixture.raw),
    };
    format!("{}\n", report.to_line())
}

/// Finding 4: the result pod's log was read whole. A pod that logs 1 GiB before its
/// report leaves the operator within its memory limit, and the report is still found.
#[tokio::test]
async fn a_pod_that_logs_a_gibibyte_leaves_the_operator_within_its_limit() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let before = peak_rss();
    create(
        &double,
        &IPERFS,
        "IPerf",
        "loud",
        json!({"duration": 5, "scheduler": "default"}),
    );
    wait_until(WAIT, "the pods of loud", || {
        match double.get(&Gvr::PODS, Some(NS), "loud-client-0") {
            Some(pod) => Ok(pod),
            None => Err("no client pod".to_owned()),
        }
    })
    .await;
    run_pod(&double, "loud-server-0");
    run_pod(&double, "loud-client-0");
    kubelet::wait_for_phase(&double, &IPERFS, "loud", "Running").await;
    double.set_huge_pod_log(NS, "loud-client-0", AGENT, 1 << 30, &report_line());
    finish_pod(&double, "loud-client-0", 0, "");
    let status = kubelet::wait_for_phase(&double, &IPERFS, "loud", "Succeeded").await;
    assert!(
        status["result"].is_object(),
        "the report was found: {status}"
    );
    let grown = peak_rss().saturating_sub(before);
    println!(
        "peak resident set grew by {} MiB reading a 1 GiB log",
        grown >> 20
    );
    assert!(
        grown < OPERATOR_LIMIT,
        "the operator's memory grew by {} MiB (limit {} MiB)",
        grown >> 20,
        OPERATOR_LIMIT >> 20
    );
}

/// Finding 4: `maxChildren` is the user's (up to 1,000,000). A set asking for a million
/// children is refused by the administrator's ceiling, naming it, before any child is
/// expanded.
#[tokio::test]
async fn a_set_of_a_million_children_is_refused_by_the_operators_ceiling() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let before = peak_rss();
    let values: Vec<u32> = (1..=1000).collect();
    let mut set = support::iperf_set(
        "huge",
        json!({"streams": values, "duration": values}),
        1,
        1,
        "Continue",
    );
    set["spec"]["maxChildren"] = json!(1_000_000);
    double.create(&SETS, set).expect("creating the set");
    let status =
        support::wait_for_status(&double, "huge", "Invalid", |s| s["phase"] == "Invalid").await;
    let valid = condition(&status, "Valid");
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("1000000 children") && message.contains("ceiling of 10000"),
        "{status}"
    );
    assert!(
        message.contains("maxChildrenPerSet"),
        "names where the ceiling is set: {message}"
    );
    assert!(
        support::children(&double, "huge").is_empty(),
        "no child was created"
    );
    let grown = peak_rss().saturating_sub(before);
    println!(
        "peak resident set grew by {} MiB for a set of a million children",
        grown >> 20
    );
    assert!(grown < OPERATOR_LIMIT, "grew by {} MiB", grown >> 20);
}

/// Issue 34, finding 4: a benchmark's pods could mount any Secret of the namespace (the
/// warehouse's credentials, a Helm release) through `podOverride.env`, an LLM's
/// `apiKeySecretRef` or `requestHeaderSecrets`. One its owner did not label
/// `perfsweep.io/consumable: "true"` fails the benchmark before any pod exists, naming
/// it; once labelled, the same spec runs.
#[tokio::test]
async fn a_secret_its_owner_did_not_mark_for_benchmarks_is_never_mounted() {
    let double = double_with_crds().await;
    create_secret(
        &double,
        "warehouse-s3",
        json!({"AWS_SECRET_ACCESS_KEY": "admins-only"}),
    );
    let _operator = Operator::start(&double, "test");
    let spec = json!({
        "endpoint": {"url": "http://vllm:8000", "modelName": "m"},
        "trafficScenarios": ["D(10,10)"], "numConcurrency": [1],
        "podOverride": {"env": [{"name": "STOLEN",
            "valueFrom": {"secretKeyRef": {"name": "warehouse-s3", "key": "AWS_SECRET_ACCESS_KEY"}}}]},
    });
    create(
        &double,
        &support::LLMS,
        "LLMInference",
        "thief",
        spec.clone(),
    );
    let status =
        support::wait_for_object_status(&double, &support::LLMS, "thief", "phase Failed", |s| {
            s["phase"] == "Failed"
        })
        .await;
    let failed = condition(&status, "Failed");
    assert_eq!(failed["reason"], "SecretNotConsumable", "{status}");
    assert!(
        failed["message"].as_str().is_some_and(
            |m| m.contains("Secret warehouse-s3 is not labelled perfsweep.io/consumable=true")
        ),
        "{status}"
    );
    assert!(
        double
            .get(&Gvr::PODS, Some(NS), "thief-loadgen-0")
            .is_none(),
        "no pod was made"
    );

    double
        .patch(
            &Gvr::SECRETS,
            Some(NS),
            "warehouse-s3",
            json!({"metadata": {"labels": {"perfsweep.io/consumable": "true"}}}),
        )
        .expect("labelled by its owner");
    create(&double, &support::LLMS, "LLMInference", "allowed", spec);
    wait_until(WAIT, format_args!("the allowed benchmark's pod"), || {
        double
            .get(&Gvr::PODS, Some(NS), "allowed-loadgen-0")
            .ok_or_else(|| "no pod yet".to_owned())
    })
    .await;
}

const POLICIES: Gvr = Gvr::from_static("networking.k8s.io", "v1", "networkpolicies");

/// The pods of benchmark `name`.
fn pods_of(double: &ApiDouble, name: &str) -> Vec<Value> {
    double
        .list(&Gvr::PODS, Some(NS))
        .into_iter()
        .filter(|pod| pod["metadata"]["labels"]["perfsweep.io/benchmark"] == name)
        .collect()
}

/// The two pods of each of `children`, once they are all there.
async fn two_pods_each(double: &ApiDouble, children: &[String], what: &str) -> Vec<Value> {
    wait_until(WAIT, what, || {
        let pods: Vec<Value> = children.iter().flat_map(|c| pods_of(double, c)).collect();
        if pods.len() == 2 * children.len() {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await
}

/// A standalone IPerf `name` whose controlling owner reference names set `set` of `uid`
/// (which the operator did not create as that set's child), and its two pods.
async fn forged_child(double: &ApiDouble, name: &str, set: &str, uid: &str) -> Vec<Value> {
    double
        .create(
            &IPERFS,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                "metadata": {"name": name, "namespace": NS, "ownerReferences": [{
                    "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
                    "name": set, "uid": uid, "controller": true}]},
                "spec": {"duration": 5},
            }),
        )
        .expect("creating the forged child");
    two_pods_each(double, &[name.to_owned()], "the forged child's pods").await
}

/// Where in the double's request log the first create of `resource` is.
fn first_create(double: &ApiDouble, resource: &str) -> usize {
    double
        .requests()
        .iter()
        .position(|r| r.verb == "create" && r.resource == resource)
        .unwrap_or_else(|| panic!("a create of {resource}"))
}

/// The double and a running operator with a 3-child IPerf set `name`, all three created
/// at once: the set's uid, its children's names (sorted) and their pods.
async fn set_of_three(name: &str) -> (ApiDouble, Operator, String, Vec<String>, Vec<Value>) {
    set_of_three_on(double_with_crds().await, name).await
}

/// [`set_of_three`] on a double prepared by the caller (faults planted).
async fn set_of_three_on(
    double: ApiDouble,
    name: &str,
) -> (ApiDouble, Operator, String, Vec<String>, Vec<Value>) {
    let operator = Operator::start(&double, "test");
    let set = support::create_set(
        &double,
        support::iperf_set(name, json!({"streams": [1, 2, 3]}), 1, 3, "Continue"),
    )
    .await;
    let set_uid = set.metadata.uid.clone().expect("the set has a uid");
    let mut children = support::expected_names(&set);
    children.sort();
    let pods = two_pods_each(&double, &children, "every child's two pods").await;
    (double, operator, set_uid, children, pods)
}

/// Issue 35: a set's children are admitted by one NetworkPolicy of the set's, made before
/// the first child (one create per set, not per child), and their pods carry the set's
/// uid for it. A benchmark that names as its owner a set whose policy the operator did
/// not make (a forged or stale owner reference) is not left without one: it gets its own.
#[tokio::test]
async fn a_sets_children_share_its_one_policy_and_a_forged_child_gets_its_own() {
    let (double, _operator, set_uid, _children, pods) = set_of_three("peers").await;
    let policies = double.list(&POLICIES, Some(NS));
    let names: Vec<&str> = policies.iter().map(support::name_of).collect();
    assert_eq!(
        names,
        ["peers-set"],
        "one policy for the set, none per child"
    );
    let policy = &policies[0];
    assert_eq!(policy["metadata"]["ownerReferences"][0]["uid"], set_uid);
    assert_eq!(
        policy["metadata"]["ownerReferences"][0]["kind"],
        "BenchmarkSet"
    );
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        json!({"perfsweep.io/set-uid": set_uid})
    );
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"],
        json!({"perfsweep.io/set-uid": set_uid})
    );
    for pod in &pods {
        assert_eq!(
            pod["metadata"]["labels"]["perfsweep.io/set-uid"],
            set_uid,
            "{} is admitted by the set's policy",
            support::name_of(pod)
        );
    }
    // Made before the first child, so that no child's pod ever runs unguarded.
    let position = |resource: &str| first_create(&double, resource);
    assert!(position("networkpolicies") < position("iperfs"));

    // A standalone IPerf claiming a set the operator made no policy for.
    let pods = forged_child(
        &double,
        "forged",
        "peers",
        "00000000-0000-0000-0000-00000000f0a9",
    )
    .await;
    let own = double
        .get(&POLICIES, Some(NS), "forged")
        .expect("the forged child's own NetworkPolicy");
    assert_eq!(
        own["spec"]["podSelector"]["matchLabels"]["perfsweep.io/benchmark"],
        "forged"
    );
    for pod in &pods {
        assert!(
            pod["metadata"]["labels"]
                .get("perfsweep.io/set-uid")
                .is_none(),
            "{}",
            pod["metadata"]["labels"]
        );
    }
}

/// The keys of a Secret as the double keeps it (`stringData` as written, or `data`).
fn secret_keys(secret: &Value) -> Vec<String> {
    let mut keys: Vec<String> = ["data", "stringData"]
        .iter()
        .filter_map(|field| secret[*field].as_object())
        .flat_map(|map| map.keys().cloned())
        .collect();
    keys.sort();
    keys
}

/// Where a pod's agent reads its launch token: (Secret, key).
fn token_ref(pod: &Value) -> (String, String) {
    let env = pod["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "PERFSWEEP_LAUNCH_TOKEN"))
        .unwrap_or_else(|| panic!("{} reads no launch token", support::name_of(pod)));
    let selector = &env["valueFrom"]["secretKeyRef"];
    let field = |name: &str| selector[name].as_str().unwrap_or_default().to_owned();
    (field("name"), field("key"))
}

/// Issue 35: the children a set creates at once read their launch tokens from one Secret
/// of the set's, written before the first child (one create per batch, not a Secret per
/// child), each pod its own child's key. A benchmark naming the set as its controlling
/// owner without being the child its set created — the set's own uid, a name the set
/// never made — gets a Secret of its own. The batch is deleted once its children ended.
#[tokio::test]
async fn a_sets_children_read_their_own_keys_of_one_batch_of_tokens() {
    let (double, _operator, set_uid, children, pods) = set_of_three("batched").await;
    let secrets = double.list(&Gvr::SECRETS, Some(NS));
    let names: Vec<&str> = secrets.iter().map(support::name_of).collect();
    let batches: Vec<&Value> = secrets
        .iter()
        .filter(|s| support::name_of(s).starts_with("batched-launch-"))
        .collect();
    assert_eq!(
        batches.len(),
        1,
        "one batch for the children made at once: {names:?}"
    );
    let batch = batches[0];
    let batch_name = support::name_of(batch).to_owned();
    assert_eq!(
        secret_keys(batch),
        children,
        "a key per child, named after it"
    );
    assert_eq!(batch["metadata"]["ownerReferences"][0]["uid"], set_uid);
    assert_eq!(batch["metadata"]["ownerReferences"][0]["controller"], true);
    for child in &children {
        assert!(
            !names.contains(&format!("{child}-launch").as_str()),
            "{child} made a launch Secret of its own: {names:?}"
        );
    }
    for pod in &pods {
        let child = pod["metadata"]["labels"]["perfsweep.io/benchmark"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            token_ref(pod),
            (batch_name.clone(), child.to_owned()),
            "{} reads its own child's key",
            support::name_of(pod)
        );
    }
    let position = |resource: &str| first_create(&double, resource);
    assert!(
        position("secrets") < position("iperfs"),
        "the batch before the first child"
    );

    // The set's real uid as controlling owner, a name the set never created.
    let forged = forged_child(&double, "forged-token", "batched", &set_uid).await;
    for pod in &forged {
        assert_eq!(
            token_ref(pod),
            ("forged-token-launch".to_owned(), "token".to_owned()),
            "the forged child reads a token of its own"
        );
    }
    assert!(
        double
            .get(&Gvr::SECRETS, Some(NS), "forged-token-launch")
            .is_some(),
        "the forged child's own launch Secret"
    );

    // Every child ends (its agents fail): the batch goes.
    for pod in &pods {
        finish_pod(&double, support::name_of(pod), 1, "");
    }
    wait_until(WAIT, "the ended batch deleted", || {
        match double.get(&Gvr::SECRETS, Some(NS), &batch_name) {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
}

/// The set's one policy is an economy, never a gate: when its create fails (here a 500;
/// the operator does not ask again for that set), the set's children are created all
/// the same, each guarded by a NetworkPolicy of its own.
#[tokio::test]
async fn a_set_whose_policy_cannot_be_made_runs_its_children_with_their_own() {
    let double = double_with_crds().await;
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("create", "networkpolicies").times(1),
        500,
        "InternalError",
    );
    let _operator = Operator::start(&double, "test");
    let set = support::create_set(
        &double,
        support::iperf_set("unguarded", json!({"streams": [1, 2]}), 1, 2, "Continue"),
    )
    .await;
    let children = support::expected_names(&set);
    let policies = wait_until(WAIT, "a NetworkPolicy for each child", || {
        let names: Vec<String> = double
            .list(&POLICIES, Some(NS))
            .iter()
            .map(|p| support::name_of(p).to_owned())
            .collect();
        if children.iter().all(|child| names.contains(child)) {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    assert!(
        !policies.contains(&"unguarded-set".to_owned()),
        "{policies:?}"
    );
    for child in &children {
        let pods = wait_until(WAIT, format_args!("{child}'s pods"), || {
            let pods = pods_of(&double, child);
            if pods.len() == 2 {
                Ok(pods)
            } else {
                Err(format!("{} pods", pods.len()))
            }
        })
        .await;
        assert!(pods.iter().all(|pod| {
            pod["metadata"]["labels"]
                .get("perfsweep.io/set-uid")
                .is_none()
        }));
    }
}

/// A batch of tokens is an economy, never a gate: when its create fails (here a 500),
/// the set's children are created all the same, each with a launch Secret of its own that
/// its pods read.
#[tokio::test]
async fn a_set_whose_batch_of_tokens_cannot_be_made_runs_its_children_with_their_own() {
    let double = double_with_crds().await;
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("create", "secrets").times(1),
        500,
        "InternalError",
    );
    let (double, _operator, _set_uid, children, pods) = set_of_three_on(double, "unbatched").await;
    for pod in &pods {
        let child = pod["metadata"]["labels"]["perfsweep.io/benchmark"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            token_ref(pod),
            (format!("{child}-launch"), "token".to_owned()),
            "{} reads its child's own Secret",
            support::name_of(pod)
        );
    }
    for child in &children {
        assert!(
            double
                .get(&Gvr::SECRETS, Some(NS), &format!("{child}-launch"))
                .is_some(),
            "{child}'s own launch Secret"
        );
    }
    let batches: Vec<String> = double
        .list(&Gvr::SECRETS, Some(NS))
        .iter()
        .map(|s| support::name_of(s).to_owned())
        .filter(|name| name.starts_with("unbatched-launch-"))
        .collect();
    assert!(batches.is_empty(), "{batches:?}");
}

/// An operator restarted mid-sweep finds the set's policy made by the one before it (its
/// create answers 409, the policy read is owned by the set) and goes on using it: the
/// next child has no policy of its own and its pods carry the set's uid.
#[tokio::test]
async fn a_restarted_operator_adopts_the_sets_own_policy() {
    let double = double_with_crds().await;
    let first = Operator::start(&double, "first");
    let set = support::create_set(
        &double,
        support::iperf_set("resumed", json!({"streams": [1, 2]}), 1, 1, "Continue"),
    )
    .await;
    let set_uid = set.metadata.uid.clone().expect("the set has a uid");
    let children = support::expected_names(&set);
    wait_until(WAIT, "the first child's pods", || {
        match pods_of(&double, &children[0]).len() {
            2 => Ok(()),
            n => Err(format!("{n} pods")),
        }
    })
    .await;
    first.stop().await;
    support::set_phase(&double, &children[0], "Succeeded");

    let _second = Operator::start(&double, "second");
    let pods = wait_until(WAIT, "the second child's pods", || {
        let pods = pods_of(&double, &children[1]);
        if pods.len() == 2 {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await;
    let names: Vec<String> = double
        .list(&POLICIES, Some(NS))
        .iter()
        .map(|p| support::name_of(p).to_owned())
        .collect();
    assert_eq!(names, ["resumed-set"], "the set's one policy, adopted");
    assert!(
        support::requests(&double, "get", "networkpolicies")
            .iter()
            .any(|r| r.path.ends_with("/resumed-set")),
        "the second operator read the policy its create met"
    );
    for pod in &pods {
        assert_eq!(pod["metadata"]["labels"]["perfsweep.io/set-uid"], set_uid);
    }
}
