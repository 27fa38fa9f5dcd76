//! OME's BenchmarkJob accepted as written: both examples of OME's documentation (kept
//! under examples/ome) and one BenchmarkJob per OME `storageUri` format convert,
//! validate and render, inline credentials ending up in a Secret and nowhere else.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use perfsweep_benchmarks::formats::yaml;
use serde_json::{Value, json};

const OCI_EXAMPLE: &str = "examples/ome/benchmarkjob-oci.yaml";
const S3_EXAMPLE: &str = "examples/ome/benchmarkjob-s3.yaml";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn perfsweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("perfsweep runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `perfsweep render --objects FILE`: the printed documents.
fn render(file: &str) -> (Vec<Value>, String) {
    let output = perfsweep(&["render", "--objects", file]);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    let documents =
        yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("rendered YAML");
    (documents, err)
}

fn of_kind<'a>(documents: &'a [Value], kind: &str) -> Vec<&'a Value> {
    documents.iter().filter(|d| d["kind"] == kind).collect()
}

fn loadgen_args(documents: &[Value]) -> Vec<String> {
    let pod = of_kind(documents, "Pod")
        .into_iter()
        .find(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("loadgen"))
        })
        .expect("a load generator pod");
    let plan = pod["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "PERFSWEEP_PLAN")
        .and_then(|e| e["value"].as_str())
        .expect("the plan in the pod's environment");
    let plan: Value = serde_json::from_str(plan).expect("a JSON plan");
    plan["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .find(|r| r["name"] == "loadgen")
        .expect("the loadgen role")["command"]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a["literal"].as_str().map(str::to_owned))
        .collect()
}

fn arg_after(args: &[String], flag: &str) -> String {
    let at = args.iter().position(|a| a == flag).expect(flag);
    args[at + 1].clone()
}

#[test]
fn both_ome_examples_validate_and_say_they_were_converted() {
    let output = perfsweep(&["validate", OCI_EXAMPLE, S3_EXAMPLE]);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert!(err.contains("2 valid, 0 invalid"), "{err}");
    assert_eq!(
        err.matches("converted ome.io/v1beta1 BenchmarkJob to perfsweep.io/v1alpha1 LLMInference")
            .count(),
        2,
        "{err}"
    );
    assert!(err.contains("spec.podOverride.image dropped"), "{err}");
    // OCI's auth and the AWS profile are credentials' settings: moved, with a warning.
    assert!(
        err.contains("warning: ")
            && err.contains("parameters.auth")
            && err.contains("parameters.aws_profile"),
        "{err}"
    );
}

#[test]
fn the_oci_example_renders_its_pods_with_the_override_and_the_ome_service() {
    let (documents, err) = render(OCI_EXAMPLE);
    assert!(
        err.contains("converted ome.io/v1beta1 BenchmarkJob"),
        "{err}"
    );
    let secret = of_kind(&documents, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "llama-3-1-70b-benchmark-output-credentials")
        .expect("the Secret the inline parameters moved into");
    assert_eq!(
        secret["stringData"],
        json!({"OCI_AUTH": "instance_principal"})
    );
    let benchmark = of_kind(&documents, "LLMInference")[0];
    assert_eq!(benchmark["apiVersion"], "perfsweep.io/v1alpha1");
    let location = &benchmark["spec"]["outputLocation"];
    assert_eq!(
        location["secretName"],
        "llama-3-1-70b-benchmark-output-credentials"
    );
    assert!(
        location
            .get("parameters")
            .is_none_or(|p| p.get("auth").is_none())
    );
    assert_eq!(
        benchmark["spec"]["endpoint"]["inferenceService"]["apiGroup"],
        "ome.io"
    );
    let args = loadgen_args(&documents);
    assert_eq!(
        arg_after(&args, "--url"),
        "http://llama-3-1-70b-instruct.llama-3-1-70b-instruct.svc.cluster.local:8080"
    );
    let pod = of_kind(&documents, "Pod")
        .into_iter()
        .find(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("loadgen"))
        })
        .expect("a loadgen pod");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["resources"]["limits"]["cpu"], "4");
    assert_ne!(
        container["image"], "ghcr.io/sgl-project/genai-bench:0.1.127",
        "genai-bench's image does not run perfsweep's load generator"
    );
}

#[test]
fn the_s3_examples_direct_url_picks_the_completions_api_and_the_bucket_region() {
    let (documents, _) = render(S3_EXAMPLE);
    let args = loadgen_args(&documents);
    assert_eq!(arg_after(&args, "--url"), "http://my-model-service:8080");
    assert_eq!(arg_after(&args, "--api"), "completions");
    assert_eq!(arg_after(&args, "--model"), "llama-3");
    let secret = of_kind(&documents, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "model-benchmark-s3-output-credentials")
        .expect("the credentials' Secret");
    assert_eq!(secret["stringData"], json!({"AWS_PROFILE": "production"}));
    assert_eq!(secret["metadata"]["namespace"], "default");
}

/// OME's documented `outputLocation` of each backend, with its parameters.
fn ome_locations() -> Vec<(&'static str, Value, Vec<&'static str>)> {
    vec![
        (
            "oci",
            json!({"storageUri": "oci://n/my-namespace/b/my-bucket/o/benchmark-results",
                   "parameters": {"auth": "security_token", "config_file": "/path/to/config",
                                  "profile": "DEFAULT", "security_token": "oci-token-value",
                                  "region": "us-phoenix-1"}}),
            vec![
                "OCI_AUTH",
                "OCI_CONFIG_FILE",
                "OCI_PROFILE",
                "OCI_SECURITY_TOKEN",
            ],
        ),
        (
            "s3",
            json!({"storageUri": "s3://my-bucket@us-west-2/path/to/results",
                   "parameters": {"aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
                                  "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG",
                                  "aws_profile": "production", "aws_region": "us-west-2"}}),
            vec!["AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SECRET_ACCESS_KEY"],
        ),
        (
            "az",
            json!({"storageUri": "az://myaccount/mycontainer/path/to/results",
                   "parameters": {"azure_account_name": "myaccount",
                                  "azure_account_key": "YOUR_KEY",
                                  "azure_connection_string": "DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey=YOUR_KEY",
                                  "azure_sas_token": "?sv=secret-sas"}}),
            vec![
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_CONNECTION_STRING",
                "AZURE_STORAGE_SAS_TOKEN",
            ],
        ),
        (
            "gs",
            json!({"storageUri": "gs://my-bucket/path/to/results",
                   "parameters": {"gcp_project_id": "my-project-123",
                                  "gcp_credentials_path": "/path/to/service-account.json"}}),
            vec!["GOOGLE_APPLICATION_CREDENTIALS"],
        ),
        (
            "github",
            json!({"storageUri": "github://owner/repo@v1.0.0",
                   "parameters": {"github_token": "ghp_xxxxxxxxxxxx"}}),
            vec!["GITHUB_TOKEN"],
        ),
        ("pvc", json!({"storageUri": "pvc://my-pvc/results"}), vec![]),
    ]
}

#[test]
fn every_ome_storage_uri_format_converts_validates_and_renders() {
    let example: Value =
        yaml::documents(&std::fs::read_to_string(repo().join(S3_EXAMPLE)).expect("the S3 example"))
            .expect("YAML")
            .remove(0);
    let dir = std::env::temp_dir().join(format!("perfsweep-ome-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    for (scheme, location, keys) in ome_locations() {
        let mut job = example.clone();
        job["spec"]["outputLocation"] = location.clone();
        let file = dir.join(format!("{scheme}.yaml"));
        std::fs::write(&file, serde_json::to_string(&job).expect("JSON is YAML")).expect("written");
        let file = file.display().to_string();

        let output = perfsweep(&["validate", &file]);
        assert!(output.status.success(), "{scheme}: {}", stderr(&output));
        let validated = stderr(&output);
        assert!(
            validated.contains("converted ome.io/v1beta1 BenchmarkJob"),
            "{scheme}: {validated}"
        );

        let (documents, _) = render(&file);
        let benchmark = of_kind(&documents, "LLMInference")[0];
        let rendered_location = &benchmark["spec"]["outputLocation"];
        assert_eq!(
            rendered_location["storageUri"], location["storageUri"],
            "{scheme}"
        );
        let secrets: Vec<&Value> = of_kind(&documents, "Secret")
            .into_iter()
            .filter(|s| s["metadata"]["name"] == "model-benchmark-s3-output-credentials")
            .collect();
        if keys.is_empty() {
            assert!(secrets.is_empty(), "{scheme}: no credentials, no Secret");
            // pvc://: the load generator's pod mounts the claim it writes into.
            let pod = of_kind(&documents, "Pod")
                .into_iter()
                .find(|p| {
                    p["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.contains("loadgen"))
                })
                .expect("a load generator pod");
            assert!(
                pod["spec"]["volumes"]
                    .to_string()
                    .contains("\"claimName\":\"my-pvc\""),
                "{scheme}: {}",
                pod["spec"]["volumes"]
            );
            continue;
        }
        let data = secrets[0]["stringData"].as_object().expect("stringData");
        let mut found: Vec<&str> = data.keys().map(String::as_str).collect();
        found.sort_unstable();
        assert_eq!(found, keys, "{scheme}");
        assert_eq!(
            rendered_location["secretName"],
            "model-benchmark-s3-output-credentials"
        );
        // No credential value is left anywhere but in the Secret.
        let elsewhere: String = documents
            .iter()
            .filter(|d| {
                d["kind"] != "Secret"
                    || d["metadata"]["name"] != "model-benchmark-s3-output-credentials"
            })
            .map(Value::to_string)
            .collect();
        for value in data.values().filter_map(Value::as_str) {
            assert!(
                !elsewhere.contains(value),
                "{scheme}: {value} outside the Secret"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_crd_refuses_inline_credentials_that_were_not_converted() {
    let dir = std::env::temp_dir().join(format!("perfsweep-ome-crd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join("both.yaml");
    std::fs::write(
        &file,
        "apiVersion: ome.io/v1beta1\nkind: BenchmarkJob\nmetadata: {name: b}\nspec:\n  \
         endpoint: {endpoint: {url: 'http://m:8080/v1/chat/completions', modelName: m}}\n  \
         outputLocation: {storageUri: 's3://b/p', secretName: s, parameters: {aws_secret_access_key: k}}\n",
    )
    .expect("written");
    let output = perfsweep(&["validate", &file.display().to_string()]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("spec.outputLocation") && err.contains("both given"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
