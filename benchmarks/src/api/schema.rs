//! Checks a value against a CRD's OpenAPI v3 schema the way the API server's admission
//! does (types, enums, bounds, patterns, required and unknown fields), so offline
//! validation and admission reject the same specs with the same field paths.
//!
//! The schema is compiled once into a [`Node`] tree; regexes are compiled then, which is
//! what makes validating 10,000 children cheap.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use crate::api::validation::{FieldError, join};

/// A compiled schema node.
#[derive(Debug, Default)]
pub struct Node {
    type_: Option<String>,
    int_or_string: bool,
    preserve_unknown_fields: bool,
    nullable: bool,
    properties: BTreeMap<String, Node>,
    additional_properties: Option<Box<Node>>,
    required: Vec<String>,
    items: Option<Box<Node>>,
    enum_values: Vec<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    multiple_of: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    pattern: Option<Regex>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    all_of: Vec<Node>,
}

/// A schema that cannot be compiled (a bug in perfsweep's types, not in user input).
#[derive(Debug, thiserror::Error)]
#[error("invalid schema at {path}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

impl Node {
    /// Compiles an `openAPIV3Schema` (as JSON).
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        compile_at(schema, "")
    }

    /// Checks `value` and returns every violation, with paths rooted at `path`.
    pub fn check(&self, value: &Value, path: &str) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.check_into(value, path, &mut errors);
        errors
    }

    /// Checks a whole object against a CRD's root schema. The API server owns
    /// `apiVersion`, `kind` and `metadata`, which CRD schemas leave out.
    pub fn check_object_root(&self, object: &Value) -> Vec<FieldError> {
        let Some(map) = object.as_object() else {
            return vec![type_error("", "an object", object)];
        };
        let mut errors = Vec::new();
        for (key, child) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match self.properties.get(key) {
                Some(node) => node.check_into(child, key, &mut errors),
                None => errors.push(FieldError::new(key.clone(), "unknown field")),
            }
        }
        for field in &self.required {
            if map.get(field).is_none_or(Value::is_null) {
                errors.push(FieldError::new(field.clone(), "required value"));
            }
        }
        errors
    }

    fn check_into(&self, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        if value.is_null() {
            // The API server prunes nulls of non-nullable fields, so null means "unset".
            return;
        }
        let before = errors.len();
        for branch in &self.all_of {
            branch.check_into(value, path, errors);
        }
        if !self.any_of.is_empty() && !self.any_of.iter().any(|b| b.check(value, path).is_empty()) {
            errors.push(FieldError::new(path, "does not match any allowed form"));
        }
        if !self.one_of.is_empty()
            && self
                .one_of
                .iter()
                .filter(|b| b.check(value, path).is_empty())
                .count()
                != 1
        {
            errors.push(FieldError::new(path, "must match exactly one allowed form"));
        }
        if errors.len() > before {
            return;
        }
        if self.int_or_string {
            if !(value.is_string() || value.is_i64() || value.is_u64()) {
                errors.push(FieldError::new(
                    path,
                    format!("must be an integer or a string, got {}", describe(value)),
                ));
            }
            self.check_string(value, path, errors);
            return;
        }
        match self.type_.as_deref() {
            Some("object") => self.check_object(value, path, errors),
            Some("array") => self.check_array(value, path, errors),
            Some("string") => {
                if value.is_string() {
                    self.check_string(value, path, errors);
                } else {
                    errors.push(self.string_type_error(path, value));
                }
            }
            Some("integer") => {
                if value.is_i64() || value.is_u64() {
                    self.check_number(value, path, errors);
                } else {
                    errors.push(type_error(path, "an integer", value));
                }
            }
            Some("number") => {
                if value.is_number() {
                    self.check_number(value, path, errors);
                } else {
                    errors.push(type_error(path, "a number", value));
                }
            }
            Some("boolean") if !value.is_boolean() => {
                errors.push(type_error(path, "true or false", value));
            }
            _ => {}
        }
        if !self.enum_values.is_empty() && !self.enum_values.contains(value) {
            let allowed: Vec<String> = self.enum_values.iter().map(Value::to_string).collect();
            errors.push(FieldError::new(
                path,
                format!(
                    "unsupported value {value}: supported values are {}",
                    allowed.join(", ")
                ),
            ));
        }
    }

    fn check_object(&self, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        let Some(map) = value.as_object() else {
            errors.push(type_error(path, "an object", value));
            return;
        };
        for field in &self.required {
            if map.get(field).is_none_or(Value::is_null) {
                errors.push(FieldError::new(join(path, field), "required value"));
            }
        }
        let count = map.len() as u64;
        if self.min_properties.is_some_and(|min| count < min) {
            errors.push(FieldError::new(path, "has too few entries"));
        }
        if self.max_properties.is_some_and(|max| count > max) {
            errors.push(FieldError::new(path, "has too many entries"));
        }
        for (key, child) in map {
            let child_path = if self.properties.is_empty() && self.additional_properties.is_some() {
                format!("{path}[{key}]")
            } else {
                join(path, key)
            };
            if let Some(node) = self.properties.get(key) {
                node.check_into(child, &child_path, errors);
            } else if let Some(node) = &self.additional_properties {
                node.check_into(child, &child_path, errors);
            } else if !self.preserve_unknown_fields {
                errors.push(FieldError::new(child_path, "unknown field"));
            }
        }
    }

    fn check_array(&self, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        let Some(items) = value.as_array() else {
            errors.push(type_error(path, "a list", value));
            return;
        };
        let count = items.len() as u64;
        if let Some(min) = self.min_items.filter(|&min| count < min) {
            errors.push(FieldError::new(
                path,
                format!("must have at least {min} item(s)"),
            ));
        }
        if let Some(max) = self.max_items.filter(|&max| count > max) {
            errors.push(FieldError::new(
                path,
                format!("must have at most {max} items"),
            ));
        }
        if let Some(node) = &self.items {
            for (index, item) in items.iter().enumerate() {
                node.check_into(item, &format!("{path}[{index}]"), errors);
            }
        }
    }

    fn check_string(&self, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        let Some(text) = value.as_str() else { return };
        let length = text.chars().count() as u64;
        if let Some(min) = self.min_length.filter(|&min| length < min) {
            errors.push(FieldError::new(
                path,
                format!("must be at least {min} character(s) long"),
            ));
        }
        if let Some(max) = self.max_length.filter(|&max| length > max) {
            errors.push(FieldError::new(
                path,
                format!("must be at most {max} characters long"),
            ));
        }
        if let Some(pattern) = self.pattern.as_ref().filter(|p| !p.is_match(text)) {
            errors.push(FieldError::new(
                path,
                format!("{text:?} does not match the pattern {}", pattern.as_str()),
            ));
        }
    }

    fn check_number(&self, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        let Some(number) = value.as_f64() else { return };
        if let Some(step) = self
            .multiple_of
            .filter(|&step| step > 0.0 && (number / step).fract() != 0.0)
        {
            errors.push(FieldError::new(
                path,
                format!("{value} must be a multiple of {step}"),
            ));
        }
        if let Some(min) = self.minimum {
            let below = if self.exclusive_minimum {
                number <= min
            } else {
                number < min
            };
            if below {
                let op = if self.exclusive_minimum { ">" } else { ">=" };
                errors.push(FieldError::new(
                    path,
                    format!("{value} is out of range: must be {op} {min}"),
                ));
            }
        }
        if let Some(max) = self.maximum {
            let above = if self.exclusive_maximum {
                number >= max
            } else {
                number > max
            };
            if above {
                let op = if self.exclusive_maximum { "<" } else { "<=" };
                errors.push(FieldError::new(
                    path,
                    format!("{value} is out of range: must be {op} {max}"),
                ));
            }
        }
    }
}

fn compile_at(schema: &Value, path: &str) -> Result<Node, SchemaError> {
    let fail = |message: String| SchemaError {
        path: path.to_owned(),
        message,
    };
    let Some(map) = schema.as_object() else {
        // `true`/`false` schemas do not occur in structural schemas; accept anything.
        return Ok(Node {
            preserve_unknown_fields: true,
            ..Node::default()
        });
    };
    let flag = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
    let number = |key: &str| map.get(key).and_then(Value::as_f64);
    let count = |key: &str| map.get(key).and_then(Value::as_u64);
    let compile_list = |key: &str| -> Result<Vec<Node>, SchemaError> {
        map.get(key).and_then(Value::as_array).map_or_else(
            || Ok(Vec::new()),
            |branches| {
                branches
                    .iter()
                    .map(|branch| compile_at(branch, path))
                    .collect()
            },
        )
    };

    let mut properties = BTreeMap::new();
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            properties.insert(name.clone(), compile_at(child, &join(path, name))?);
        }
    }
    let additional_properties = match map.get("additionalProperties") {
        Some(Value::Object(_)) => Some(Box::new(compile_at(
            &map["additionalProperties"],
            &format!("{path}[*]"),
        )?)),
        Some(Value::Bool(true)) => Some(Box::new(Node {
            preserve_unknown_fields: true,
            ..Node::default()
        })),
        _ => None,
    };
    let items = match map.get("items") {
        Some(items) => Some(Box::new(compile_at(items, &format!("{path}[*]"))?)),
        None => None,
    };
    let pattern = match map.get("pattern").and_then(Value::as_str) {
        Some(pattern) => Some(Regex::new(pattern).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    Ok(Node {
        type_: map.get("type").and_then(Value::as_str).map(str::to_owned),
        int_or_string: flag("x-kubernetes-int-or-string"),
        preserve_unknown_fields: flag("x-kubernetes-preserve-unknown-fields"),
        nullable: flag("nullable"),
        properties,
        additional_properties,
        required: map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        items,
        enum_values: map
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        minimum: number("minimum"),
        maximum: number("maximum"),
        multiple_of: number("multipleOf"),
        exclusive_minimum: flag("exclusiveMinimum"),
        exclusive_maximum: flag("exclusiveMaximum"),
        min_length: count("minLength"),
        max_length: count("maxLength"),
        min_items: count("minItems"),
        max_items: count("maxItems"),
        min_properties: count("minProperties"),
        max_properties: count("maxProperties"),
        pattern,
        any_of: compile_list("anyOf")?,
        one_of: compile_list("oneOf")?,
        all_of: compile_list("allOf")?,
    })
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn type_error(path: &str, expected: &str, value: &Value) -> FieldError {
    FieldError::new(
        path,
        format!("must be {expected}, got {} ({value})", describe(value)),
    )
}

impl Node {
    /// A number where a patterned string belongs (`timeout: 60`): the message shows the
    /// quoted form the pattern accepts (`"60s"`, or `"4096"` for a size), when one does.
    fn string_type_error(&self, path: &str, value: &Value) -> FieldError {
        let suggestion = match (value, &self.pattern) {
            (Value::Number(n), Some(pattern)) => [format!("{n}s"), n.to_string()]
                .into_iter()
                .find(|candidate| pattern.is_match(candidate)),
            (Value::Number(n), None) => Some(n.to_string()),
            _ => None,
        };
        match suggestion {
            Some(example) => FieldError::new(
                path,
                format!(
                    "must be a string, got {} ({value}): expected a {} like {example:?}",
                    describe(value),
                    if example.ends_with('s') && value.is_number() {
                        "duration"
                    } else {
                        "quoted value"
                    }
                ),
            ),
            None => type_error(path, "a string", value),
        }
    }

    /// Whether this node allows null (kept for completeness of the compiled form).
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Node {
        Node::compile(&json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "pattern": "^[a-z]+$"},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["read", "write"]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "list": {"type": "array", "minItems": 1, "items": {"type": "integer"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "qty": {"x-kubernetes-int-or-string": true}
            }
        }))
        .unwrap()
    }

    fn paths(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn accepts_a_valid_value() {
        let value = json!({"name": "abc", "count": 3, "mode": "read", "labels": {"a": "b"},
            "list": [1], "free": {"anything": [1, {"x": 2}]}, "qty": "1Gi"});
        assert_eq!(node().check(&value, "spec"), vec![]);
    }

    #[test]
    fn names_every_violation_with_its_path() {
        let value = json!({"count": 0, "mode": "trim", "labels": {"a": 1}, "list": [],
            "qty": 1.5, "extra": true});
        let mut got = paths(node().check(&value, "spec"));
        got.sort();
        assert_eq!(
            got,
            vec![
                "spec.count",
                "spec.extra",
                "spec.labels[a]",
                "spec.list",
                "spec.mode",
                "spec.name",
                "spec.qty"
            ]
        );
    }

    #[test]
    fn rejects_wrong_types_and_patterns() {
        let errors = node().check(&json!({"name": "ABC", "count": "3"}), "");
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.starts_with("name: \"ABC\" does not match"))
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("count: must be an integer"))
        );
    }

    /// Finding 10 of issue 18: `timeout: 60` said "must be a string" without the form.
    #[test]
    fn numbers_for_patterned_strings_show_the_expected_form() {
        let iperf = crate::kinds::registry::lookup("IPerf").expect("registered");
        let object = json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "a"}, "spec": {"timeout": 60}});
        let errors = iperf.validate(&object);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "spec.timeout");
        assert!(
            errors[0]
                .message
                .ends_with("expected a duration like \"60s\""),
            "{}",
            errors[0].message
        );
        let fio = crate::kinds::registry::lookup("Fio").expect("registered");
        let object = json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "Fio",
            "metadata": {"name": "a"}, "spec": {"bs": 4096}});
        let errors = fio.validate(&object);
        assert!(
            errors
                .iter()
                .any(|e| e.path == "spec.bs" && e.message.contains("like \"4096\"")),
            "{errors:?}"
        );
    }

    #[test]
    fn null_means_unset() {
        assert_eq!(
            node().check(&json!({"name": "a", "count": null}), ""),
            vec![]
        );
        assert_eq!(
            paths(node().check(&json!({"name": null}), "")),
            vec!["name"]
        );
    }
}
