//! A prompt dataset read from an S3-compatible server (moto's server mode, PyPI
//! `moto[server]`, as the export tests use): the object is uploaded with perfsweep's
//! export client, then the load generator reads `s3://bucket/key` with credentials from
//! its environment and sends every prompt to the simulator.
//!
//! One test in this binary: it sets the credentials in the process environment before
//! any thread starts.

mod support;

use std::process::Command;

use perfsweep_llm::dataset::Format;
use perfsweep_llm::loadgen::{self, LoadgenArgs};
use perfsweep_llm::sim::{SimArgs, Simulator};

const SECRET: &str = "dataset-s3cr3t-0123456789";

#[test]
fn a_prompt_dataset_is_read_from_s3_compatible_storage() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    moto.create_bucket("datasets");
    let port = moto.port;
    // SAFETY: the only test of this binary, before any other thread exists.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let endpoint = format!("http://127.0.0.1:{port}");
        let store = support::s3::store(port, "datasets", "prompts", SECRET);
        store
            .put(
                "questions.txt",
                "one two three\nfour five\n\nsix seven eight nine\n".into(),
            )
            .await
            .expect("uploaded");

        let mut sim_args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
        sim_args.ttft_ms = 1.0;
        sim_args.itl_ms = 0.5;
        let sim = Simulator::start(sim_args).await.expect("simulator");
        let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
        args.progress = false;
        args.warmup_requests = Some(0);
        args.dataset = Some("s3://datasets/prompts/questions.txt".into());
        args.dataset_format = Format::Prompts;
        args.dataset_params = vec![format!("endpoint={endpoint}")];
        // The export stores, as `perfsweep loadgen` hands them to the load generator.
        args.hooks = perfsweep::cli::loadgen_hooks();
        args.dataset_output_tokens = Some(3);
        args.max_requests = Some(6);
        let report = loadgen::execute(&args).await.expect("run");
        assert_eq!(report.iterations[0].requests, 6);
        let mut lengths: Vec<u32> = sim.stats().records.iter().map(|r| r.input_tokens).collect();
        lengths.sort_unstable();
        lengths.dedup();
        assert_eq!(lengths, [2, 3, 4], "every prompt of the object was sent");

        args.dataset = Some("s3://datasets/prompts/missing.txt".into());
        let error = format!("{:#}", loadgen::execute(&args).await.expect_err("missing"));
        assert!(error.contains("missing.txt"), "{error}");
        assert!(!error.contains(SECRET), "credentials never reach messages");
        drop(sim);

        // The spec's way: `secretName` names the Secret; a local run reads its keys from
        // PERFSWEEP_SECRET_<NAME>_<KEY>, and nothing from the AWS_* variables.
        let dir = std::env::temp_dir().join(format!("perfsweep-s3-dataset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let sweep = dir.join("sweep.yaml");
        std::fs::write(
            &sweep,
            format!(
                r#"apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: s3-dataset
spec:
  endpoint:
    simulator: {{ttftMillis: 1, itlMillis: 1}}
  dataset:
    format: prompts
    outputTokens: 3
    source:
      url: s3://datasets/prompts/questions.txt
      secretName: s3-creds
      parameters: {{endpoint: "{endpoint}"}}
  numConcurrency: [2]
  maxRequestsPerIteration: 6
"#
            ),
        )
        .expect("sweep written");
        let out = dir.join("results");
        let run = |with_secret: bool| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_perfsweep"));
            command
                // Both runs write to the same place; the second must fail on its
                // missing keys, not on the first one's records.
                .args(["run", "--local", "--overwrite", "--output"])
                .arg(&out)
                .arg(&sweep)
                .env_remove("AWS_ACCESS_KEY_ID")
                .env_remove("AWS_SECRET_ACCESS_KEY");
            if with_secret {
                command
                    .env("PERFSWEEP_SECRET_S3_CREDS_AWS_ACCESS_KEY_ID", "testing")
                    .env("PERFSWEEP_SECRET_S3_CREDS_AWS_SECRET_ACCESS_KEY", SECRET);
            }
            command.output().expect("perfsweep runs")
        };
        let output = run(true);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
        // Without the Secret's keys the run stops before anything starts, naming them.
        let output = run(false);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!output.status.success());
        assert!(
            format!("{stdout}{stderr}").contains("PERFSWEEP_SECRET_S3_CREDS_AWS_ACCESS_KEY_ID"),
            "{stdout}\n{stderr}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}
