//! Every example under `examples/` is valid: what the README points people at must work.

use std::path::Path;

use perfsweep_benchmarks::formats::yaml;
use perfsweep_benchmarks::input::document;

#[test]
fn every_example_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable example");
        for doc in yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
            let what = document::describe(&doc);
            // Node-pair sets need a node list; these stand in for a cluster's.
            let nodes = ["node-a", "node-b", "node-c"].map(str::to_owned);
            if let Err(error) = document::check_with_nodes(doc, Some(&nodes)) {
                panic!("{}: {what}: {error}", path.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} example documents found");
}

#[test]
fn example_network_attachments_match_the_multus_crd() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crd_text =
        std::fs::read_to_string(root.join(
            "testdata/third-party/multus/network-attachment-definitions.k8s.cni.cncf.io.yaml",
        ))
        .expect("the Multus CRD is in testdata");
    let crd = yaml::documents(&crd_text).expect("valid YAML").remove(0);
    let schema = perfsweep_benchmarks::api::schema::Node::compile(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    )
    .expect("the Multus schema compiles");
    let dir = root.join("../examples/networks");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/networks exists") {
        let path = entry.expect("readable entry").path();
        let text = std::fs::read_to_string(&path).expect("readable example");
        for doc in yaml::documents(&text).expect("valid YAML") {
            assert_eq!(
                doc["kind"],
                "NetworkAttachmentDefinition",
                "{}",
                path.display()
            );
            let errors = schema.check_object_root(&doc);
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            let config: serde_json::Value =
                serde_json::from_str(doc["spec"]["config"].as_str().expect("config string"))
                    .unwrap_or_else(|e| panic!("{}: spec.config is not JSON: {e}", path.display()));
            assert!(
                config["type"].is_string(),
                "{}: the CNI config names a plugin type",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 1);
    // The check can fail: a config of the wrong type is rejected.
    let bad = serde_json::json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "x"}, "spec": {"config": 5}});
    assert!(!schema.check_object_root(&bad).is_empty());
}

/// The servers the LLM examples point at (not perfsweep objects, so not validated
/// above) are the ones the examples name.
#[test]
fn the_example_llm_servers_are_the_endpoints_of_the_llm_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let servers = std::fs::read_to_string(root.join("servers/vllm.yaml")).expect("readable");
    let docs = yaml::documents(&servers).expect("valid YAML");
    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service")
        .expect("a Service");
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let sweep = std::fs::read_to_string(root.join("llm-vllm.yaml")).expect("readable");
    let sweep = yaml::documents(&sweep).expect("valid YAML").remove(0);
    let endpoint = &sweep["spec"]["template"]["spec"]["endpoint"];
    assert_eq!(service["metadata"]["name"], endpoint["service"]["name"]);
    assert_eq!(
        service["spec"]["ports"][0]["port"],
        endpoint["service"]["port"]
    );
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args");
    let model = endpoint["modelName"].as_str().expect("a model name");
    assert!(
        args.iter()
            .any(|a| a.as_str() == Some(&format!("--model={model}"))),
        "the server serves {model}"
    );
}
