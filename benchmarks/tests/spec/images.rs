//! The images perfsweep runs are one list: every kind's default image has a Dockerfile
//! under `images/`, and the chart (`artifacthub.io/images` in Chart.yaml, the operator's
//! `image.repository` in values.yaml) and the release workflow name exactly the images
//! that have one, at the version the kinds tag them with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use perfsweep_benchmarks::formats::yaml;
use perfsweep_benchmarks::kinds::registry::{self, IMAGE_REGISTRY};
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative))
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

fn yaml_file(relative: &str) -> Value {
    yaml::from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The names `images/<name>/Dockerfile` exists for.
fn dockerfile_images() -> BTreeSet<String> {
    std::fs::read_dir(repo().join("images"))
        .expect("images/ exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|dir| dir.join("Dockerfile").is_file())
        .filter_map(|dir| Some(dir.file_name()?.to_str()?.to_owned()))
        .collect()
}

/// The image name in `<registry>/<name>:<version>`, when it is under `registry` at
/// `version`.
fn image_name<'a>(reference: &'a str, registry: &str, version: &str) -> Result<&'a str, String> {
    reference
        .strip_prefix(registry)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_suffix(version))
        .and_then(|rest| rest.strip_suffix(':'))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| format!("{reference:?} is not {registry}/<image>:{version}"))
}

/// The chart's image list (the `artifacthub.io/images` annotation of Chart.yaml).
fn chart_images(chart: &Value, registry: &str) -> Result<BTreeSet<String>, String> {
    let version = chart["appVersion"]
        .as_str()
        .ok_or("Chart.yaml: appVersion is missing")?;
    let listed = chart["annotations"]["artifacthub.io/images"]
        .as_str()
        .ok_or("Chart.yaml: annotations.artifacthub.io/images is missing")?;
    let entries: Vec<Value> = yaml::from_str(listed)
        .map_err(|e| format!("Chart.yaml: annotations.artifacthub.io/images: {e}"))?;
    let mut names = BTreeSet::new();
    for (index, entry) in entries.iter().enumerate() {
        let field = format!("Chart.yaml: annotations.artifacthub.io/images[{index}]");
        let reference = entry["image"]
            .as_str()
            .ok_or(format!("{field}.image is missing"))?;
        let name = image_name(reference, registry, version).map_err(|e| format!("{field}: {e}"))?;
        if entry["name"].as_str() != Some(name) {
            return Err(format!("{field}.name is {}, not {name:?}", entry["name"]));
        }
        names.insert(name.to_owned());
    }
    Ok(names)
}

/// The images the release workflow builds (`jobs.images.strategy.matrix.image`).
fn workflow_images(workflow: &Value) -> Result<BTreeSet<String>, String> {
    let listed = workflow["jobs"]["images"]["strategy"]["matrix"]["image"]
        .as_array()
        .ok_or("release.yml: jobs.images.strategy.matrix.image is not a list")?;
    listed
        .iter()
        .map(|name| {
            name.as_str()
                .map(str::to_owned)
                .ok_or(format!("release.yml: matrix image {name} is not a name"))
        })
        .collect()
}

/// How two image lists differ, or `None` when they are the same.
fn difference(
    left_name: &str,
    left: &BTreeSet<String>,
    right_name: &str,
    right: &BTreeSet<String>,
) -> Option<String> {
    let only_left: Vec<_> = left.difference(right).collect();
    let only_right: Vec<_> = right.difference(left).collect();
    (!only_left.is_empty() || !only_right.is_empty()).then(|| {
        format!("only in {left_name}: {only_left:?}; only in {right_name}: {only_right:?}")
    })
}

#[test]
fn every_kinds_default_image_has_a_dockerfile() {
    let dockerfiles = dockerfile_images();
    for kind in registry::kinds() {
        let image = kind.default_image();
        let name = image_name(&image, IMAGE_REGISTRY, VERSION)
            .unwrap_or_else(|e| panic!("{}: default image {e}", kind.kind));
        assert!(
            dockerfiles.contains(name),
            "{}'s default image {image} has no images/{name}/Dockerfile",
            kind.kind
        );
    }
}

#[test]
fn chart_workflow_and_dockerfiles_name_the_same_images() {
    let dockerfiles = dockerfile_images();
    let mut expected: BTreeSet<String> = registry::kinds()
        .iter()
        .filter_map(|kind| {
            image_name(&kind.default_image(), IMAGE_REGISTRY, VERSION)
                .ok()
                .map(str::to_owned)
        })
        .collect();
    expected.insert("operator".into());

    let chart = chart_images(&yaml_file("charts/perfsweep/Chart.yaml"), IMAGE_REGISTRY)
        .unwrap_or_else(|e| panic!("{e}"));
    let workflow = workflow_images(&yaml_file(".github/workflows/release.yml"))
        .unwrap_or_else(|e| panic!("{e}"));
    for (name, list) in [
        ("the kinds and the operator", &expected),
        ("the chart", &chart),
        ("the release workflow", &workflow),
    ] {
        if let Some(diff) = difference("images/*/Dockerfile", &dockerfiles, name, list) {
            panic!("images/*/Dockerfile and {name} disagree: {diff}");
        }
    }

    let values = yaml_file("charts/perfsweep/values.yaml");
    assert_eq!(
        values["image"]["repository"].as_str(),
        Some(format!("{IMAGE_REGISTRY}/operator").as_str()),
        "values.yaml image.repository is the operator image the workflow pushes"
    );
    let chart_yaml = yaml_file("charts/perfsweep/Chart.yaml");
    assert_eq!(
        chart_yaml["appVersion"].as_str(),
        Some(VERSION),
        "the chart's appVersion tags the images the kinds name"
    );
}

#[test]
fn a_disagreement_is_found_and_named() {
    let chart: Value = yaml::from_str(
        "appVersion: \"1.2.3\"\nannotations:\n  artifacthub.io/images: |\n    - name: iperf\n      image: ghcr.io/perfsweep/iperf:1.2.3\n    - name: fio\n      image: ghcr.io/perfsweep/fio:1.2.3\n",
    )
    .expect("valid YAML");
    let listed = chart_images(&chart, "ghcr.io/perfsweep").expect("a valid list");
    let workflow: Value =
        yaml::from_str("jobs:\n  images:\n    strategy:\n      matrix:\n        image: [iperf]\n")
            .expect("valid YAML");
    let pushed = workflow_images(&workflow).expect("a valid list");
    let diff = difference("the chart", &listed, "the workflow", &pushed)
        .expect("fio is missing from the workflow");
    assert!(diff.contains("only in the chart: [\"fio\"]"), "{diff}");
    assert_eq!(difference("a", &listed, "b", &listed), None);

    let wrong_tag: Value = yaml::from_str(
        "appVersion: \"1.2.3\"\nannotations:\n  artifacthub.io/images: |\n    - name: iperf\n      image: ghcr.io/perfsweep/iperf:9.9.9\n",
    )
    .expect("valid YAML");
    let error = chart_images(&wrong_tag, "ghcr.io/perfsweep").expect_err("the tag is wrong");
    assert!(
        error.contains("images[0]") && error.contains("iperf:9.9.9"),
        "{error}"
    );
    let missing: Value = yaml::from_str("appVersion: \"1.2.3\"\n").expect("valid YAML");
    let error = chart_images(&missing, "ghcr.io/perfsweep").expect_err("no annotation");
    assert!(error.contains("artifacthub.io/images"), "{error}");
}
