//! Schema checks shared by the rendering tests: Volcano's real PodGroup CRD and the
//! upstream Kubernetes schemas through `kubernetes-validate`.

// Each target that includes this module uses a different subset of it.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use perfsweep_benchmarks::api::schema::Node;
use perfsweep_benchmarks::formats::yaml;
use serde_json::Value;

/// A file under `testdata/third-party/`.
pub fn third_party(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/third-party")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Volcano's PodGroup `v1beta1` schema, from the copied CRD.
pub fn volcano_schema() -> &'static Node {
    static SCHEMA: OnceLock<Node> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let docs = yaml::documents(&third_party("volcano/scheduling.volcano.sh_podgroups.yaml"))
            .expect("YAML");
        let crd = docs
            .iter()
            .find(|d| d["kind"] == "CustomResourceDefinition")
            .expect("a CRD");
        assert_eq!(crd["spec"]["names"]["kind"], "PodGroup");
        let version = crd["spec"]["versions"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "v1beta1"))
            .expect("v1beta1");
        Node::compile(&version["schema"]["openAPIV3Schema"]).expect("compiles")
    })
}

/// Any serializable object as JSON.
pub fn to_value(object: &impl serde::Serialize) -> Value {
    serde_json::to_value(object).expect("serializable")
}

/// Runs `kubernetes-validate --strict` on `objects` for the oldest and newest Kubernetes
/// versions k8s-openapi 0.29 supports. `None` when the tool is not installed (outside
/// CI, where `.ci/run` installs it, the skip is printed; under CI it fails).
pub fn kubernetes_validate(label: &str, objects: &[Value]) -> Option<Result<(), String>> {
    let probe = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--version"])
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let reason = "kubernetes-validate is not installed (python3 -m pip install kubernetes-validate==1.37.0; .ci/run installs it)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{reason}, and CI must run this check"
        );
        // Straight to stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED Kubernetes schema validation ({label}): {reason}"
        );
        return None;
    }
    let dir = scratch_dir(label);
    let files: Vec<PathBuf> = objects
        .iter()
        .enumerate()
        .map(|(i, object)| {
            let file = dir.join(format!("{i:03}.yaml"));
            // JSON is YAML.
            std::fs::write(&file, serde_json::to_string_pretty(object).expect("JSON"))
                .expect("writable temp dir");
            file
        })
        .collect();
    let mut result = Ok(());
    for version in ["1.33.0", "1.37.0"] {
        let output = Command::new("python3")
            .args([
                "-m",
                "kubernetes_validate",
                "--strict",
                "--quiet",
                "-k",
                version,
            ])
            .args(&files)
            .output()
            .expect("kubernetes-validate runs");
        if !output.status.success() {
            result = Err(format!(
                "Kubernetes {version}:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Some(result)
}

/// A fresh temporary directory for one check.
pub fn scratch_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("perfsweep-render-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
