//! Read/write helpers for `metadata` on untyped objects.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub(crate) fn str_field<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub(crate) fn name(obj: &Value) -> Option<&str> {
    str_field(obj, "name").filter(|n| !n.is_empty())
}

pub(crate) fn uid(obj: &Value) -> Option<&str> {
    str_field(obj, "uid")
}

pub(crate) fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

pub(crate) fn is_terminating(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The `metadata` map, created if absent; `None` only if `obj` is not a JSON object.
pub(crate) fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
}

pub(crate) fn set(obj: &mut Value, field: &str, value: Value) {
    if let Some(meta) = metadata_mut(obj) {
        meta.insert(field.to_owned(), value);
    }
}

pub(crate) fn remove(obj: &mut Value, field: &str) {
    if let Some(meta) = metadata_mut(obj) {
        meta.remove(field);
    }
}

/// RFC 3339 at whole seconds, the precision `metav1.Time` serialises with.
pub(crate) fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}
