//! Every example under `examples/` is valid: what the README points people at must work.

use std::path::Path;

use perfsweep_benchmarks::{document, yaml};

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
            if let Err(error) = document::check(doc) {
                panic!("{}: {what}: {error}", path.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} example documents found");
}
