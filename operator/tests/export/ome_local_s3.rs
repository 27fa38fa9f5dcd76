//! OME's S3 BenchmarkJob example (examples/ome/benchmarkjob-s3.yaml) run as written by
//! `perfsweep run --local`: against the simulator (standing in for
//! `my-model-service:8080`) and exporting to a real S3-compatible server (moto), with the
//! keys of the example's `aws_profile: production` read from an AWS shared credentials
//! file, as the AWS tools read them.

use crate::support;

use std::path::Path;
use std::process::Command;

use perfsweep_benchmarks::formats::yaml;
use perfsweep_llm::sim::{SimArgs, Simulator};
use serde_json::Value;

const SECRET: &str = "prod-secret-key-never-printed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_s3_example_runs_against_the_simulator_and_exports_to_moto() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    moto.create_bucket("my-benchmarks");
    let mut sim_args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    sim_args.models = vec!["llama-3".into()];
    sim_args.ttft_ms = 1.0;
    sim_args.itl_ms = 0.05;
    let sim = Simulator::start(sim_args).await.expect("simulator starts");

    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = std::fs::read_to_string(repo.join("examples/ome/benchmarkjob-s3.yaml"))
        .expect("the example");
    let mut job: Value = yaml::documents(&example).expect("YAML").remove(0);
    // Only where things are changes: the simulator's address for the model service's,
    // and moto's for AWS's (the endpoint parameter perfsweep adds to OME's).
    job["spec"]["endpoint"]["endpoint"]["url"] =
        format!("http://{}/v1/completions", sim.address).into();
    job["spec"]["outputLocation"]["parameters"]["endpoint"] = moto.endpoint().into();

    let dir = std::env::temp_dir().join(format!("perfsweep-ome-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join("benchmarkjob-s3.yaml");
    std::fs::write(&file, serde_json::to_string(&job).expect("JSON")).expect("written");
    let credentials = dir.join("aws-credentials");
    std::fs::write(
        &credentials,
        format!(
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n\
             [production]\naws_access_key_id = testing\naws_secret_access_key = {SECRET}\n"
        ),
    )
    .expect("credentials file");
    let out = dir.join("results");
    let output = tokio::task::spawn_blocking({
        let (file, out, credentials) = (file.clone(), out.clone(), credentials.clone());
        move || {
            Command::new(env!("CARGO_BIN_EXE_perfsweep"))
                .args(["run", "--local", "--output"])
                .arg(&out)
                .arg(&file)
                .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
                .env_remove("AWS_ACCESS_KEY_ID")
                .env_remove("AWS_SECRET_ACCESS_KEY")
                .output()
                .expect("perfsweep runs")
        }
    })
    .await
    .expect("ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("converted ome.io/v1beta1 BenchmarkJob"),
        "{stderr}"
    );
    assert!(stderr.contains("parameters.aws_profile"), "{stderr}");
    assert!(!stderr.contains(SECRET), "the key was printed");
    assert!(
        sim.stats().requests >= 400,
        "4 iterations of 100 requests were sent"
    );

    // The record: converted spec without credentials, the completions API, 4 iterations.
    let records: Vec<Value> = std::fs::read_dir(&out)
        .expect("results")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("read")).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
    assert_eq!(record["benchmark"]["kind"], "LLMInference");
    let result = &record["outcome"]["result"];
    assert_eq!(result["api"], "completions");
    assert_eq!(result["iterations"].as_array().map(Vec::len), Some(4));
    let location = &record["spec"]["outputLocation"];
    assert_eq!(
        location["secretName"],
        "model-benchmark-s3-output-credentials"
    );
    assert!(!record.to_string().contains("production"), "{location}");

    // What moto holds: the records and the evidence, under the example's prefix.
    let store = support::s3::store(moto.port, "my-benchmarks", "experiments/2024", SECRET);
    let names = store.list().await.expect("listing");
    let run_id = record["runId"].as_str().expect("a run id");
    for expected in [
        format!("{run_id}/records.jsonl"),
        format!("{run_id}/records.parquet"),
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(&format!("{run_id}/evidence/"))),
        "{names:?}"
    );
    let lines = store
        .get(&format!("{run_id}/records.jsonl"))
        .await
        .expect("the records");
    let exported: Value =
        serde_json::from_slice(lines.split(|b| *b == b'\n').next().expect("a line"))
            .expect("a JSON record");
    assert_eq!(
        exported["outcome"]["result"]["iterations"],
        result["iterations"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Locally a `pvc://claim/path` location is the directory
/// `$PERFSWEEP_PVC_ROOT/claim/path` standing in for the claim.
#[test]
fn a_pvc_location_is_a_directory_on_this_machine() {
    let dir = std::env::temp_dir().join(format!("perfsweep-ome-pvc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join("pvc.yaml");
    std::fs::write(
        &file,
        "apiVersion: ome.io/v1beta1\nkind: BenchmarkJob\nmetadata: {name: pvc-local}\nspec:\n  \
         endpoint: {simulator: {ttftMillis: 1, itlMillis: 0.1}}\n  trafficScenarios: ['D(16,8)']\n  \
         maxRequestsPerIteration: 8\n  outputLocation: {storageUri: 'pvc://results/nightly'}\n",
    )
    .expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["run", "--local"])
        .arg(&file)
        .current_dir(&dir)
        .env("PERFSWEEP_PVC_ROOT", dir.join("claims"))
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let runs: Vec<_> = std::fs::read_dir(dir.join("claims/results/nightly"))
        .expect("the claim's directory")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(runs.len(), 1);
    let run = runs[0].path();
    let lines = std::fs::read_to_string(run.join("records.jsonl")).expect("records");
    let record: Value = serde_json::from_str(lines.lines().next().expect("a line")).expect("JSON");
    assert_eq!(record["outcome"]["status"], "succeeded");
    assert_eq!(record["benchmark"]["name"], "pvc-local");
    assert!(run.join("records.parquet").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}
