//! OME compatibility: an OME `BenchmarkJob` (`ome.io/v1beta1`) is accepted as written
//! and converted to an LLMInference, whose spec follows BenchmarkJob's field by field.
//!
//! What changes: the apiVersion and kind; an InferenceService reference gains
//! `apiGroup: ome.io` (OME's Service `<name>:8080`); fields perfsweep has no use for
//! (`podOverride.image`: genai-bench's image, `huggingFaceSecretReference`,
//! `resultFolderName`, `dataset`) are dropped with a note; inline credential parameters
//! of `outputLocation` move into a Secret
//! ([`crate::execution::output::move_inline_credentials`], done for every document).
//! Everything else keeps its name and meaning, the direct-URL endpoint
//! (`endpoint.endpoint`) and every OME `storageUri` format included.

use serde_json::Value;

/// OME's API version.
pub const API_VERSION: &str = "ome.io/v1beta1";
/// OME's kind.
pub const KIND: &str = "BenchmarkJob";

/// Fields of a BenchmarkJob spec perfsweep drops, and why.
const DROPPED: &[(&str, &str)] = &[
    (
        "/spec/podOverride/image",
        "genai-bench's image: perfsweep's own load generator runs in perfsweep's image",
    ),
    (
        "/spec/huggingFaceSecretReference",
        "no tokenizer is downloaded at run time (synthetic prompts use a bundled tokenizer)",
    ),
    (
        "/spec/resultFolderName",
        "records are named by run and benchmark",
    ),
    (
        "/spec/dataset",
        "OME's dataset is genai-bench's; use spec.dataset in perfsweep's form",
    ),
];

/// Converts `document` in place when it is an OME BenchmarkJob; returns what was done
/// (one note per change), or `None` for any other document.
pub fn convert(document: &mut Value) -> Option<Vec<String>> {
    let is_job = document.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION)
        && document.get("kind").and_then(Value::as_str) == Some(KIND);
    if !is_job {
        return None;
    }
    let mut notes = vec![format!(
        "converted {API_VERSION} {KIND} to {} LLMInference",
        crate::API_VERSION
    )];
    document["apiVersion"] = Value::String(crate::API_VERSION.to_owned());
    document["kind"] = Value::String("LLMInference".to_owned());
    for (pointer, why) in DROPPED {
        if remove(document, pointer).is_some() {
            let field = pointer.trim_start_matches('/').replace('/', ".");
            notes.push(format!("{field} dropped: {why}"));
        }
    }
    if let Some(isvc) = document
        .pointer_mut("/spec/endpoint/inferenceService")
        .and_then(Value::as_object_mut)
        && !isvc.contains_key("apiGroup")
    {
        isvc.insert("apiGroup".into(), Value::String("ome.io".into()));
        notes.push(
            "spec.endpoint.inferenceService: apiGroup ome.io (OME's Service <name>:8080)".into(),
        );
    }
    Some(notes)
}

fn remove(document: &mut Value, pointer: &str) -> Option<Value> {
    let (parent, key) = pointer.rsplit_once('/')?;
    document.pointer_mut(parent)?.as_object_mut()?.remove(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_benchmark_job_becomes_an_llminference_and_says_what_changed() {
        let mut job = json!({
            "apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob",
            "metadata": {"name": "b"},
            "spec": {"podOverride": {"image": "genai-bench", "resources": {}},
                     "endpoint": {"inferenceService": {"name": "llama"}},
                     "resultFolderName": "r"}
        });
        let notes = convert(&mut job).expect("converted");
        assert_eq!(job["apiVersion"], "perfsweep.io/v1alpha1");
        assert_eq!(job["kind"], "LLMInference");
        assert_eq!(job["spec"]["podOverride"], json!({"resources": {}}));
        assert_eq!(
            job["spec"]["endpoint"]["inferenceService"]["apiGroup"],
            "ome.io"
        );
        assert!(job["spec"].get("resultFolderName").is_none());
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(convert(&mut job).is_none(), "already perfsweep's");
    }
}
