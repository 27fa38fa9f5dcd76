//! kube-perftest compatibility: its API group is accepted and converted to perfsweep's.
//!
//! Every kube-perftest spec field keeps its name and meaning; only the group differs.

use serde_json::Value;

/// kube-perftest's API group.
pub const KUBE_PERFTEST_GROUP: &str = "perftest.stackhpc.com";

/// Checks a template's apiVersion. `Ok(Some(original))` when it was kube-perftest's and
/// is converted; `Ok(None)` when it already is perfsweep's; `Err(original)` otherwise.
pub fn template_api_version(api_version: &str) -> Result<Option<String>, String> {
    match api_version.split_once('/') {
        Some((crate::GROUP, crate::VERSION)) => Ok(None),
        Some((KUBE_PERFTEST_GROUP, crate::VERSION)) => Ok(Some(api_version.to_owned())),
        _ => Err(api_version.to_owned()),
    }
}

/// Rewrites kube-perftest's group to perfsweep's in a document (and its template, for a
/// set). Returns whether anything changed.
pub fn convert_group(document: &mut Value) -> bool {
    let mut changed = rewrite(document.get_mut("apiVersion"));
    if let Some(template) = document.pointer_mut("/spec/template") {
        changed |= rewrite(template.get_mut("apiVersion"));
    }
    changed
}

fn rewrite(api_version: Option<&mut Value>) -> bool {
    let Some(Value::String(text)) = api_version else {
        return false;
    };
    match text.split_once('/') {
        Some((KUBE_PERFTEST_GROUP, version)) => {
            *text = format!("{}/{version}", crate::GROUP);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_set_and_template() {
        let mut doc = json!({"apiVersion": "perftest.stackhpc.com/v1alpha1", "kind": "BenchmarkSet",
            "spec": {"template": {"apiVersion": "perftest.stackhpc.com/v1alpha1", "kind": "IPerf"}}});
        assert!(convert_group(&mut doc));
        assert_eq!(doc["apiVersion"], "perfsweep.io/v1alpha1");
        assert_eq!(
            doc["spec"]["template"]["apiVersion"],
            "perfsweep.io/v1alpha1"
        );
        assert!(!convert_group(&mut doc));
    }

    #[test]
    fn template_versions() {
        assert_eq!(template_api_version("perfsweep.io/v1alpha1"), Ok(None));
        assert_eq!(
            template_api_version("perftest.stackhpc.com/v1alpha1"),
            Ok(Some("perftest.stackhpc.com/v1alpha1".into()))
        );
        assert!(template_api_version("example.com/v1").is_err());
    }
}
