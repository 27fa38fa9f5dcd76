//! The Helm chart ships the same CRDs as `crds/` (which a drift test ties to the Rust
//! types): Helm installs them from the chart's `crds/` directory, and with
//! `crds.asTemplates` renders the same files as templates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn yaml_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (name, text)
        })
        .collect()
}

#[test]
fn the_charts_crds_are_the_repositorys() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the operator crate is in the workspace")
        .to_path_buf();
    let repo = yaml_files(&root.join("crds"));
    let chart = yaml_files(&root.join("charts/perfsweep/crds"));
    assert!(!repo.is_empty(), "crds/ has the CRDs");
    assert_eq!(
        repo.keys().collect::<Vec<_>>(),
        chart.keys().collect::<Vec<_>>(),
        "charts/perfsweep/crds/ must hold the same files as crds/: cp crds/*.yaml charts/perfsweep/crds/"
    );
    for (name, text) in &repo {
        assert!(
            chart[name] == *text,
            "charts/perfsweep/crds/{name} differs from crds/{name}: cp crds/*.yaml charts/perfsweep/crds/"
        );
    }
}
