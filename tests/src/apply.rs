//! Server-side apply, simplified to field ownership by apply managers.
//!
//! What the double does, as the apiserver does: each apply records the fields the
//! manager sent in `metadata.managedFields` (`operation: Apply`, FieldsV1, one entry per
//! manager and subresource), and a field the manager applied before and no longer sends
//! is removed, unless another apply manager owns it too. What it does not do: lists are
//! atomic (the apiserver merges `listType: map` lists such as conditions by key), fields
//! written by updates and merge patches are not tracked (`operation: Update`), and a
//! field owned by another manager with a different value is overwritten instead of
//! answering 409 Conflict (as `force: true` would).

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::patch;

/// Applies `body` for `manager` to `target` (the whole object). `subresource`: `status`
/// for an apply on the status subresource, whose fields are then the only ones tracked.
pub(crate) fn server_side_apply(
    target: &mut Value,
    body: &[u8],
    manager: &str,
    subresource: Option<&str>,
) -> Result<(), ApiError> {
    let applied = patch::parse_object(body)?;
    let sent = fields_of(&tracked(&applied, subresource));
    let mut entries: Vec<Value> = target
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mine = |entry: &Value| {
        entry["manager"] == manager
            && entry["operation"] == "Apply"
            && entry["subresource"].as_str() == subresource
    };
    let before = entries
        .iter()
        .find(|entry| mine(entry))
        .map_or_else(|| json!({}), |entry| entry["fieldsV1"].clone());
    let others: Vec<Value> = entries
        .iter()
        .filter(|entry| !mine(entry) && entry["operation"] == "Apply")
        .map(|entry| entry["fieldsV1"].clone())
        .collect();
    for path in leaves(&before) {
        let dropped = !contains(&sent, &path);
        if dropped && !others.iter().any(|set| contains(set, &path)) {
            remove(target, &path);
        }
    }
    json_patch::merge(target, &applied);
    entries.retain(|entry| !mine(entry));
    let mut entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": applied.get("apiVersion").cloned().unwrap_or(Value::Null),
        "fieldsType": "FieldsV1",
        "fieldsV1": sent,
    });
    if let Some(subresource) = subresource {
        entry["subresource"] = json!(subresource);
    }
    entries.push(entry);
    if let Some(metadata) = target.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("managedFields".into(), Value::Array(entries));
    }
    Ok(())
}

/// The part of an applied object whose fields are owned: `status` on the status
/// subresource; otherwise everything but identity, metadata other than labels and
/// annotations, and status.
fn tracked(applied: &Value, subresource: Option<&str>) -> Value {
    let mut out = Map::new();
    let Some(object) = applied.as_object() else {
        return Value::Object(out);
    };
    if subresource == Some("status") {
        if let Some(status) = object.get("status") {
            out.insert("status".into(), status.clone());
        }
        return Value::Object(out);
    }
    for (key, value) in object {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                let mut metadata = Map::new();
                for field in ["labels", "annotations"] {
                    if let Some(value) = value.get(field) {
                        metadata.insert(field.into(), value.clone());
                    }
                }
                if !metadata.is_empty() {
                    out.insert("metadata".into(), Value::Object(metadata));
                }
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// The FieldsV1 set of `value`: `{"f:a": {".": {}, "f:b": {}}}`: a map owns itself
/// (`.`) and its fields; lists and scalars are leaves (`{}`).
fn fields_of(value: &Value) -> Value {
    let Value::Object(map) = value else {
        return json!({});
    };
    Value::Object(
        map.iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let inner = match fields_of(v) {
                    Value::Object(mut fields) if v.is_object() => {
                        fields.insert(".".into(), json!({}));
                        Value::Object(fields)
                    }
                    leaf => leaf,
                };
                (format!("f:{k}"), inner)
            })
            .collect(),
    )
}

/// A set's entries for fields (not its `.` entry).
fn fields(set: &Value) -> impl Iterator<Item = (&str, &Value)> {
    set.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(key, inner)| Some((key.strip_prefix("f:")?, inner)))
}

/// The leaf paths of a FieldsV1 set, as field names.
fn leaves(set: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (field, inner) in fields(set) {
        let below = leaves(inner);
        if below.is_empty() {
            out.push(vec![field.to_owned()]);
        } else {
            for mut path in below {
                path.insert(0, field.to_owned());
                out.push(path);
            }
        }
    }
    out
}

/// Whether the set owns `path`: the field itself or a leaf (scalar, list) above it.
fn contains(set: &Value, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    match set.get(format!("f:{first}")) {
        None => false,
        Some(inner) if rest.is_empty() || inner.as_object().is_none_or(Map::is_empty) => true,
        Some(inner) => contains(inner, rest),
    }
}

/// Removes the field at `path`, and the maps above it that it leaves empty.
fn remove(target: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(map) = target.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        map.remove(first);
        return;
    }
    if let Some(inner) = map.get_mut(first) {
        remove(inner, rest);
        if inner.as_object().is_some_and(Map::is_empty) {
            map.remove(first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(target: &mut Value, body: Value, manager: &str) {
        server_side_apply(target, body.to_string().as_bytes(), manager, Some("status"))
            .expect("applies");
    }

    #[test]
    fn fields_a_manager_stops_sending_are_removed() {
        let mut object = json!({"metadata": {"name": "b"}, "spec": {"x": 1}});
        apply(
            &mut object,
            json!({"status": {"phase": "Running", "progress": "50%", "result": {"a": 1, "b": 2}}}),
            "perfsweep",
        );
        assert_eq!(object["status"]["progress"], "50%");
        apply(
            &mut object,
            json!({"status": {"phase": "Succeeded", "result": {"a": 3}}}),
            "perfsweep",
        );
        assert_eq!(
            object["status"],
            json!({"phase": "Succeeded", "result": {"a": 3}})
        );
        assert_eq!(
            object["spec"],
            json!({"x": 1}),
            "spec is not the status' to touch"
        );
        let entries = object["metadata"]["managedFields"]
            .as_array()
            .expect("managed fields");
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:status": {".": {}, "f:phase": {}, "f:result": {".": {}, "f:a": {}}}})
        );
        assert_eq!(entries[0]["subresource"], "status");
    }

    #[test]
    fn a_field_another_manager_applies_too_is_kept() {
        let mut object = json!({"metadata": {"name": "b"}});
        apply(
            &mut object,
            json!({"status": {"phase": "Running", "note": "x"}}),
            "a",
        );
        apply(&mut object, json!({"status": {"note": "x"}}), "b");
        apply(&mut object, json!({"status": {"phase": "Running"}}), "a");
        assert_eq!(object["status"], json!({"phase": "Running", "note": "x"}));
        apply(&mut object, json!({"status": {}}), "b");
        assert_eq!(object["status"], json!({"phase": "Running"}));
    }

    #[test]
    fn lists_are_replaced_whole() {
        let mut object = json!({"metadata": {"name": "b"}});
        apply(
            &mut object,
            json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}),
            "a",
        );
        apply(
            &mut object,
            json!({"status": {"conditions": [{"type": "B"}]}}),
            "a",
        );
        assert_eq!(object["status"]["conditions"], json!([{"type": "B"}]));
        apply(&mut object, json!({"status": {}}), "a");
        assert_eq!(
            object["status"],
            json!({}),
            "the manager still applies an empty status"
        );
    }
}
