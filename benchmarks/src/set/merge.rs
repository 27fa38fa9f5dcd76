//! Deep merge of a permutation into a template spec.
//!
//! Objects merge key by key, recursively. A scalar in the permutation replaces the
//! template's. `null` removes the field (so a permutation can unset a template value).
//! Lists follow the set's [`ListMergeMode`] choice.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How a list in a permutation combines with the same list in the template.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ListMergeMode {
    /// The permutation's list replaces the template's (what most sweeps mean:
    /// `extraArgs: [--tclass=96]` is the whole argument list of that permutation).
    #[default]
    Replace,
    /// The permutation's items are appended to the template's (for adding, say, one
    /// toleration or one extra argument per permutation).
    Append,
}

/// Merges `patch` into `base` in place.
pub fn merge(base: &mut Map<String, Value>, patch: &Map<String, Value>, lists: ListMergeMode) {
    for (key, value) in patch {
        match value {
            Value::Null => {
                base.remove(key);
            }
            Value::Object(patch_child) => {
                if let Some(Value::Object(base_child)) = base.get_mut(key) {
                    merge(base_child, patch_child, lists);
                } else {
                    let mut fresh = Map::new();
                    merge(&mut fresh, patch_child, lists);
                    base.insert(key.clone(), Value::Object(fresh));
                }
            }
            Value::Array(items) => match (lists, base.get_mut(key)) {
                (ListMergeMode::Append, Some(Value::Array(existing))) => {
                    existing.extend(items.iter().cloned());
                }
                _ => {
                    base.insert(key.clone(), value.clone());
                }
            },
            scalar => {
                base.insert(key.clone(), scalar.clone());
            }
        }
    }
}

/// Splits a product key into its path segments: `a.b` is `["a", "b"]`, and `\.` is a
/// literal dot (`limits.nvidia\.com/gpu` is `["limits", "nvidia.com/gpu"]`).
pub fn split_path(key: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => push_char(&mut segments, next),
                None => push_char(&mut segments, '\\'),
            },
            '.' => segments.push(String::new()),
            other => push_char(&mut segments, other),
        }
    }
    segments
}

fn push_char(segments: &mut [String], c: char) {
    if let Some(last) = segments.last_mut() {
        last.push(c);
    }
}

/// Sets `value` at `path` in `target`, creating intermediate objects.
pub fn set_path(target: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = target;
    for segment in parents {
        let entry = node
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(child) = entry else {
            return;
        };
        node = child;
    }
    node.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn merges_nested_objects_and_replaces_scalars() {
        let mut base = obj(json!({"a": 1, "r": {"limits": {"cpu": 1}, "requests": {"cpu": 1}}}));
        merge(
            &mut base,
            &obj(json!({"a": 2, "r": {"limits": {"gpu": 1}}})),
            ListMergeMode::Replace,
        );
        assert_eq!(
            Value::Object(base),
            json!({"a": 2, "r": {"limits": {"cpu": 1, "gpu": 1}, "requests": {"cpu": 1}}})
        );
    }

    #[test]
    fn null_removes_a_field() {
        let mut base = obj(json!({"mtu": 9000, "keep": true}));
        merge(
            &mut base,
            &obj(json!({"mtu": null})),
            ListMergeMode::Replace,
        );
        assert_eq!(Value::Object(base), json!({"keep": true}));
    }

    #[test]
    fn lists_replace_or_append_as_chosen() {
        let template = obj(json!({"extraArgs": ["-a"]}));
        let patch = obj(json!({"extraArgs": ["-b"]}));

        let mut replaced = template.clone();
        merge(&mut replaced, &patch, ListMergeMode::Replace);
        assert_eq!(replaced["extraArgs"], json!(["-b"]));

        let mut appended = template;
        merge(&mut appended, &patch, ListMergeMode::Append);
        assert_eq!(appended["extraArgs"], json!(["-a", "-b"]));
    }

    #[test]
    fn dotted_paths_with_escapes() {
        assert_eq!(split_path("streams"), vec!["streams"]);
        assert_eq!(
            split_path(r"resources.limits.nvidia\.com/gpu"),
            vec!["resources", "limits", "nvidia.com/gpu"]
        );
        let mut target = Map::new();
        set_path(&mut target, &split_path("a.b.c"), json!(3));
        assert_eq!(Value::Object(target), json!({"a": {"b": {"c": 3}}}));
    }
}
