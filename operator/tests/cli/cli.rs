//! The `perfsweep` binary's offline commands, as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use perfsweep_benchmarks::formats::yaml;
use serde_json::Value;

fn perfsweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("perfsweep runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn kube_perftest_examples() -> Vec<String> {
    let root = repo().join("benchmarks/testdata/kube-perftest");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).expect("examples") {
        let dir = dir.expect("entry").path();
        if dir.is_dir() {
            for file in std::fs::read_dir(&dir).expect("example dir") {
                let file = file.expect("entry").path();
                files.push(
                    file.strip_prefix(repo())
                        .unwrap_or(&file)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    files.sort();
    files
}

fn registry_kind_count() -> usize {
    perfsweep_benchmarks::kinds::registry::kind_names().len()
}

#[test]
fn crds_prints_every_checked_in_crd() {
    let output = perfsweep(&["crds"]);
    assert!(output.status.success());
    let printed = yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
    let checked_in = std::fs::read_dir(repo().join("crds"))
        .expect("crds/")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        })
        .count();
    assert_eq!(printed.len(), checked_in);
    assert_eq!(
        printed.len(),
        registry_kind_count() + 1,
        "every kind and BenchmarkSet"
    );
    for crd in printed {
        let name = crd["metadata"]["name"].as_str().expect("named CRD");
        let file = std::fs::read_to_string(repo().join("crds").join(format!("{name}.yaml")))
            .expect("a checked-in file per printed CRD");
        let on_disk = yaml::documents(&file).expect("YAML").remove(0);
        assert_eq!(crd, on_disk, "{name}");
    }
}

#[test]
fn validate_accepts_every_kube_perftest_example_and_says_it_converted() {
    let files = kube_perftest_examples();
    assert_eq!(files.len(), 25);
    let mut args = vec!["validate"];
    args.extend(files.iter().map(String::as_str));
    let output = perfsweep(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("converted apiVersion group perftest.stackhpc.com")
            .count(),
        25
    );
    assert!(stderr.contains("25 valid, 0 invalid"), "{stderr}");
}

#[test]
fn validate_rejects_an_invalid_sweep_with_the_field_path() {
    let dir = std::env::temp_dir().join(format!("perfsweep-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: perfsweep.io/v1alpha1\nkind: BenchmarkSet\nmetadata: {name: bad}\nspec:\n  template: {apiVersion: perfsweep.io/v1alpha1, kind: IPerf, spec: {}}\n  permutations: {product: {streams: [2, 500]}}\n",
    )
    .expect("written");
    let output = perfsweep(&["validate", file.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("permutation 1 (streams=500): spec.permutations.product[streams][1]"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn render_prints_product_plus_explicit_times_repetitions_children() {
    let output = perfsweep(&["render", "examples/iperf-sriov.yaml"]);
    assert!(output.status.success());
    let children = yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
    // (3 product values + 2 explicit entries) × 5 repetitions.
    assert_eq!(children.len(), 25);
    assert!(
        children.iter().all(|c| c["kind"] == "IPerf"
            && c["metadata"]["labels"]["perfsweep.io/set"] == "iperf-sriov")
    );
}

#[test]
fn render_expands_node_pairs_over_the_given_nodes() {
    let output = perfsweep(&["render", "examples/iperf-node-pairs.yaml"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("spec.permutations.nodePairs") && stderr.contains("--nodes"),
        "{stderr}"
    );

    let dir = std::env::temp_dir().join(format!("perfsweep-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let list = dir.join("nodes.txt");
    // As `kubectl get nodes -o name` prints them.
    std::fs::write(&list, "node/c\nnode/a\nnode/b\nnode/d\n").expect("writing the node list");
    for nodes in ["a,b,c,d".to_owned(), format!("@{}", list.display())] {
        let output = perfsweep(&[
            "render",
            "examples/iperf-node-pairs.yaml",
            "--nodes",
            &nodes,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let children = yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
        // 4 nodes: 6 pairs × 3 repetitions.
        assert_eq!(children.len(), 18, "--nodes {nodes}");
        // In rounds of two disjoint pairs (circle method): a–d with b–c, then b–d with
        // a–c, then c–d with a–b; each repetition has rounds of its own.
        let pair = |i: usize| {
            (
                children[i]["spec"]["placement"]["server"]["nodes"][0].clone(),
                children[i]["spec"]["placement"]["client"]["nodes"][0].clone(),
            )
        };
        assert_eq!(pair(0), ("a".into(), "d".into()));
        assert_eq!(pair(1), ("b".into(), "c".into()));
        assert_eq!(pair(5), ("a".into(), "b".into()));
        let round = |i: usize| children[i]["metadata"]["labels"]["perfsweep.io/round"].clone();
        assert_eq!(
            [round(0), round(1), round(2), round(5)],
            ["0", "0", "1", "2"]
        );
        assert_eq!(round(6), "3", "the second repetition's first round");
    }
    let output = perfsweep(&["validate", "examples/iperf-node-pairs.yaml", "--nodes", "a"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("matches 1 node (a)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn render_objects_gives_valid_podgroups_for_every_child() {
    let output = perfsweep(&[
        "render",
        "--objects",
        "-n",
        "bench",
        "examples/iperf-sweep.yaml",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let objects = yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
    let count = |kind: &str| objects.iter().filter(|o| o["kind"] == kind).count();
    // Issue 34, finding 7: the NetworkPolicy guarding the benchmarks' control ports is
    // shown too, as the operator creates it: one for the set (issue 35), whose uid every
    // child's pods carry.
    assert_eq!(
        (
            count("IPerf"),
            count("PodGroup"),
            count("Service"),
            count("NetworkPolicy"),
            count("Secret"),
            count("Pod")
        ),
        (20, 20, 20, 1, 20, 40)
    );
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .expect("the set's NetworkPolicy");
    let set_uid = &policy["spec"]["podSelector"]["matchLabels"]["perfsweep.io/set-uid"];
    assert!(set_uid.is_string(), "{policy}");
    assert!(
        objects
            .iter()
            .filter(|o| o["kind"] == "Pod")
            .all(|pod| &pod["metadata"]["labels"]["perfsweep.io/set-uid"] == set_uid),
        "every child's pod is admitted by the set's policy"
    );
    let crd = std::fs::read_to_string(
        repo().join("benchmarks/testdata/third-party/volcano/scheduling.volcano.sh_podgroups.yaml"),
    )
    .expect("Volcano CRD");
    let crd = yaml::documents(&crd).expect("YAML").remove(0);
    let schema = perfsweep_benchmarks::api::schema::Node::compile(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    )
    .expect("schema compiles");
    for group in objects.iter().filter(|o| o["kind"] == "PodGroup") {
        assert_eq!(group["spec"]["minMember"], 2);
        assert_eq!(group["metadata"]["namespace"], "bench");
        let errors = schema.check_object_root(group);
        assert!(errors.is_empty(), "{errors:?}");
    }
    let pod: &Value = objects.iter().find(|o| o["kind"] == "Pod").expect("a pod");
    assert_eq!(pod["spec"]["schedulerName"], "volcano");
}
