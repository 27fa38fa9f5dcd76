//! PATCH bodies, by content type.

use serde_json::Value;

use crate::error::ApiError;

/// The patch formats the apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
    /// Simplified: applied as a JSON merge patch. Real strategic merge merges lists by
    /// their patch-merge key (e.g. containers by name) where a merge patch replaces them,
    /// and understands `$patch` directives; callers relying on either will diverge.
    Strategic,
    /// Server-side apply, simplified (see `apply.rs`): creates a missing object;
    /// otherwise removes the fields the manager applied before and no longer sends,
    /// merges the body in and records the manager's fields in `managedFields`. No
    /// conflicts (as with `force`); lists are atomic.
    Apply,
}

impl PatchKind {
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match mime.as_str() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            _ => Err(ApiError::unsupported_media_type(content_type)),
        }
    }
}

/// Applies `body` to `target` in place.
pub(crate) fn apply(kind: PatchKind, target: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(target, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })
        }
        PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
            let patch = parse_object(body)?;
            json_patch::merge(target, &patch);
            Ok(())
        }
    }
}

/// Parses a patch or apply body, which must be a JSON object. YAML apply bodies are
/// not supported: kube sends JSON, which is valid YAML.
pub(crate) fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request("patch body must be a JSON object"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes() {
        let mut doc = json!({"a": 1, "b": {"c": 2, "d": 3}});
        let body = br#"{"a": null, "b": {"c": 5}}"#;
        apply(PatchKind::Merge, &mut doc, body).expect("applies");
        assert_eq!(doc, json!({"b": {"c": 5, "d": 3}}));
    }

    #[test]
    fn json_patch_and_failed_test_op() {
        let mut doc = json!({"a": [1]});
        let body = br#"[{"op": "add", "path": "/a/-", "value": 2}]"#;
        apply(PatchKind::Json, &mut doc, body).expect("applies");
        assert_eq!(doc, json!({"a": [1, 2]}));
        let failing = br#"[{"op": "test", "path": "/a/0", "value": 9}]"#;
        let err = apply(PatchKind::Json, &mut doc, failing).expect_err("test op fails");
        assert_eq!(err.code, 422);
        let err = apply(PatchKind::Json, &mut doc, b"{").expect_err("not JSON");
        assert_eq!(err.code, 400);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Ok(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type("text/plain").map_err(|e| e.code),
            Err(415)
        );
    }
}
