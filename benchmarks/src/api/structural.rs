//! The API server's rules for a CustomResourceDefinition's schemas, checked offline.
//!
//! Kubernetes refuses a CRD whose `openAPIV3Schema` is not *structural* or uses OpenAPI
//! constructs it does not support; YAML that parses and a schema that validates objects
//! are not enough (issue 23: the LLMInference CRD carried a `$ref` and `helm install`
//! failed). This module applies the rules of the API server's own validation
//! (`apiextensions-apiserver`: `validation.ValidateCustomResourceDefinitionOpenAPISchema`
//! and `schema.ValidateStructural`) to a CRD given as JSON, and names each violation at the
//! path and in the words the API server uses, e.g.
//! `spec.versions[0].schema.openAPIV3Schema.properties[status]…additionalProperties.$ref:
//! Forbidden: $ref is not supported`.
//!
//! Not checked here: CEL rules (compiled by [`crate::kinds::registry`] already) and their
//! cost, and whether defaults validate against their schema.

use std::fmt;

use serde_json::{Map, Value};

/// One rule of the API server a CRD breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Where, as the API server writes field paths (`properties[name]`, `items`).
    pub path: String,
    /// What is wrong, e.g. `Forbidden: $ref is not supported`.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every violation in a CRD (`apiextensions.k8s.io/v1` as JSON): each version's schema,
/// and the printer columns. Empty when the API server would accept the schemas.
pub fn check_crd(crd: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, version) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        match version.pointer("/schema/openAPIV3Schema") {
            Some(schema) => {
                let status = version
                    .pointer("/subresources/status")
                    .is_some_and(|s| !s.is_null());
                out.extend(check_schema(
                    schema,
                    &format!("{at}.schema.openAPIV3Schema"),
                    status,
                ));
            }
            None => out.push(Violation {
                path: format!("{at}.schema.openAPIV3Schema"),
                message: "Required value: schemas are required".to_owned(),
            }),
        }
        check_printer_columns(version, &at, &mut out);
    }
    out
}

/// Every violation in one version's `openAPIV3Schema` (at `path`); `status_subresource`:
/// whether that version has the status subresource, which limits what the root may say.
pub fn check_schema(schema: &Value, path: &str, status_subresource: bool) -> Vec<Violation> {
    let mut walker = Walker::default();
    walker.structural(schema, path, Level::Root);
    if status_subresource && let Some(root) = schema.as_object() {
        root_with_status(root, path, &mut walker.out);
    }
    walker.out
}

/// Where a schema node sits, for the rules that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The types Kubernetes knows (`null` is refused with a hint to use `nullable`).
const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// Keywords the API server refuses anywhere: (keyword, message).
const UNSUPPORTED: &[(&str, &str)] = &[
    ("$ref", "$ref is not supported"),
    ("definitions", "definitions is not supported"),
    ("id", "id is not supported"),
    ("additionalItems", "additionalItems is not supported"),
    ("patternProperties", "patternProperties is not supported"),
    ("dependencies", "dependencies is not supported"),
];

/// What a schema nested in `allOf`/`anyOf`/`oneOf`/`not` must leave to the structural
/// schema beside it: (keyword, message).
const NOT_IN_JUNCTORS: &[(&str, &str)] = &[
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    (
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    ),
    (
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    ),
    (
        "x-kubernetes-map-type",
        "must be undefined to be structural",
    ),
    ("x-kubernetes-validations", "must be empty to be structural"),
];

/// Flags a junctor's schema must not set to true.
const FLAGS_NOT_IN_JUNCTORS: &[&str] = &[
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];

const JUNCTORS: &[&str] = &["allOf", "anyOf", "oneOf"];

/// The `reason`s a validation rule may give.
const RULE_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// What the root may say when the status subresource is on (the API server extracts
/// `properties.status` and would lose anything else).
const ROOT_WITH_STATUS: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
];

#[derive(Default)]
struct Walker {
    out: Vec<Violation>,
}

impl Walker {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.out.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    /// A node of the structural schema: the root, a property, additional properties or
    /// array items.
    fn structural(&mut self, node: &Value, path: &str, level: Level) {
        let Some(map) = node.as_object() else {
            self.push(path, "Invalid value: must be a schema object");
            return;
        };
        self.supported(map, path);
        let flag = |key: &str| map.get(key).and_then(Value::as_bool) == Some(true);
        let int_or_string = flag("x-kubernetes-int-or-string");
        let preserve = flag("x-kubernetes-preserve-unknown-fields");
        let embedded = flag("x-kubernetes-embedded-resource");
        let type_ = map.get("type").and_then(Value::as_str).unwrap_or_default();

        if embedded && type_ != "object" {
            self.push(
                format!("{path}.type"),
                "Required value: must be object if x-kubernetes-embedded-resource is true",
            );
        } else if type_.is_empty() && !int_or_string && !preserve {
            let message = match level {
                Level::Root => "Required value: must not be empty at the root",
                Level::Item => "Required value: must not be empty for specified array items",
                Level::Field => "Required value: must not be empty for specified object fields",
            };
            self.push(format!("{path}.type"), message);
        }
        if int_or_string && preserve {
            self.push(
                format!("{path}.x-kubernetes-preserve-unknown-fields"),
                "Invalid value: must be false if x-kubernetes-int-or-string is true",
            );
        }
        if int_or_string && embedded {
            self.push(
                format!("{path}.x-kubernetes-embedded-resource"),
                "Invalid value: must be false if x-kubernetes-int-or-string is true",
            );
        }
        if level == Level::Root {
            if !type_.is_empty() && type_ != "object" {
                self.push(
                    format!("{path}.type"),
                    "Invalid value: must be object at the root",
                );
            }
            if flag("nullable") {
                self.push(
                    format!("{path}.nullable"),
                    "Forbidden: nullable cannot be true at the root",
                );
            }
            if map.contains_key("additionalProperties") {
                self.push(
                    format!("{path}.additionalProperties"),
                    "Forbidden: must not be used at the root",
                );
            }
        }
        if type_ == "array" && !map.contains_key("items") {
            self.push(format!("{path}.items"), "Required value: must be specified");
        }
        if embedded {
            if map.contains_key("additionalProperties") {
                self.push(
                    format!("{path}.additionalProperties"),
                    "Forbidden: must not be used if x-kubernetes-embedded-resource is set",
                );
            }
            if !preserve && properties(map).is_none_or(Map::is_empty) {
                self.push(
                    format!("{path}.properties"),
                    "Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                );
            }
        }
        let resource = level == Level::Root || embedded;
        if let Some(props) = properties(map) {
            if resource {
                self.resource_meta(props, path, level);
            }
            for (name, child) in props {
                self.structural(child, &format!("{path}.properties[{name}]"), Level::Field);
            }
        }
        if let Some(additional) = map.get("additionalProperties")
            && additional.is_object()
        {
            self.structural(
                additional,
                &format!("{path}.additionalProperties"),
                Level::Field,
            );
        }
        if let Some(items) = map.get("items")
            && items.is_object()
        {
            self.structural(items, &format!("{path}.items"), Level::Item);
        }
        self.junctors(map, map, path, path);
    }

    /// The checks of the API server's standard validator, on every schema node.
    fn supported(&mut self, map: &Map<String, Value>, path: &str) {
        for (key, message) in UNSUPPORTED {
            if map.contains_key(*key) {
                self.push(format!("{path}.{key}"), format!("Forbidden: {message}"));
            }
        }
        match map.get("type") {
            Some(Value::String(t)) if t == "null" => self.push(
                format!("{path}.type"),
                "Forbidden: type cannot be set to null, use nullable as an alternative",
            ),
            Some(Value::String(t)) if !TYPES.contains(&t.as_str()) => self.push(
                format!("{path}.type"),
                format!("Unsupported value: {t:?}: supported values: {TYPES:?}"),
            ),
            Some(Value::String(_)) | None => {}
            Some(other) => self.push(
                format!("{path}.type"),
                format!("Invalid value: {other}: must be a string"),
            ),
        }
        if map.get("items").is_some_and(Value::is_array) {
            self.push(
                format!("{path}.items"),
                "Forbidden: items must be a schema object and not an array",
            );
        }
        if map.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
            self.push(
                format!("{path}.uniqueItems"),
                "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            );
        }
        if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
            self.push(
                format!("{path}.x-kubernetes-preserve-unknown-fields"),
                "Invalid value: false: must be true or undefined",
            );
        }
        if properties(map).is_some_and(|p| !p.is_empty())
            && map
                .get("additionalProperties")
                .is_some_and(|a| a.is_object() || a == &Value::Bool(false))
        {
            self.push(
                format!("{path}.additionalProperties"),
                "Forbidden: additionalProperties and properties are mutual exclusive",
            );
        }
        if let Some(pattern) = map.get("pattern").and_then(Value::as_str)
            && let Err(error) = regex::Regex::new(pattern)
        {
            self.push(
                format!("{path}.pattern"),
                format!("Invalid value: {pattern:?}: must be a valid regular expression, but isn't: {error}"),
            );
        }
        self.list_and_map_types(map, path);
        self.rules(map, path);
    }

    fn list_and_map_types(&mut self, map: &Map<String, Value>, path: &str) {
        let type_ = map.get("type").and_then(Value::as_str).unwrap_or_default();
        if let Some(map_type) = map.get("x-kubernetes-map-type") {
            if type_ != "object" {
                self.push(
                    format!("{path}.type"),
                    "Invalid value: must be object if x-kubernetes-map-type is specified",
                );
            }
            if !matches!(map_type.as_str(), Some("atomic" | "granular")) {
                self.push(
                    format!("{path}.x-kubernetes-map-type"),
                    format!(
                        "Unsupported value: {map_type}: supported values: \"atomic\", \"granular\""
                    ),
                );
            }
        }
        let list_type = map.get("x-kubernetes-list-type").and_then(Value::as_str);
        if map.contains_key("x-kubernetes-list-type") {
            if type_ != "array" {
                self.push(
                    format!("{path}.type"),
                    "Invalid value: must be array if x-kubernetes-list-type is specified",
                );
            }
            if !matches!(list_type, Some("atomic" | "set" | "map")) {
                self.push(
                    format!("{path}.x-kubernetes-list-type"),
                    "Unsupported value: supported values: \"atomic\", \"map\", \"set\"",
                );
            }
        }
        let keys = map
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .filter(|k| !k.is_empty());
        if keys.is_some() && list_type != Some("map") {
            self.push(
                format!("{path}.x-kubernetes-list-type"),
                "Invalid value: must be map if x-kubernetes-list-map-keys is non-empty",
            );
        }
        if list_type == Some("map") {
            let item_properties = map
                .get("items")
                .and_then(Value::as_object)
                .and_then(properties);
            match (keys, item_properties) {
                (None, _) => self.push(
                    format!("{path}.x-kubernetes-list-map-keys"),
                    "Required value: must not be empty if x-kubernetes-list-type is map",
                ),
                (Some(_), None) => self.push(
                    format!("{path}.items"),
                    "Required value: must have a schema with properties if x-kubernetes-list-type is map",
                ),
                (Some(keys), Some(props)) => {
                    for key in keys {
                        if !key.as_str().is_some_and(|k| props.contains_key(k)) {
                            self.push(
                                format!("{path}.x-kubernetes-list-map-keys"),
                                format!("Invalid value: {key}: entries must all be names of item properties"),
                            );
                        }
                    }
                }
            }
        }
    }

    /// `x-kubernetes-validations`: the parts the API server checks before compiling.
    fn rules(&mut self, map: &Map<String, Value>, path: &str) {
        let Some(rules) = map
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        else {
            return;
        };
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("{path}.x-kubernetes-validations[{i}]");
            let text = |key: &str| rule.get(key).and_then(Value::as_str);
            if text("rule").is_none_or(|r| r.trim().is_empty()) {
                self.push(
                    format!("{at}.rule"),
                    "Required value: rule is not specified",
                );
            }
            if let Some(message) = text("message") {
                if message.trim().is_empty() {
                    self.push(
                        format!("{at}.message"),
                        "Invalid value: must be non-empty if specified",
                    );
                } else if message.contains('\n') {
                    self.push(
                        format!("{at}.message"),
                        "Invalid value: must not contain line breaks",
                    );
                }
            } else if text("rule").is_some_and(|r| r.contains('\n')) {
                self.push(
                    format!("{at}.message"),
                    "Required value: message must be specified if rule contains line breaks",
                );
            }
            if let Some(reason) = text("reason")
                && !RULE_REASONS.contains(&reason)
            {
                self.push(
                    format!("{at}.reason"),
                    format!("Unsupported value: {reason:?}: supported values: {RULE_REASONS:?}"),
                );
            }
            if let Some(field_path) = text("fieldPath")
                && (field_path.trim().is_empty() || field_path.contains('\n'))
            {
                self.push(
                    format!("{at}.fieldPath"),
                    "Invalid value: must be non-empty and without line breaks if specified",
                );
            }
        }
    }

    /// `metadata`, `kind` and `apiVersion` of a resource (the root, or an embedded one):
    /// Kubernetes owns them.
    fn resource_meta(&mut self, props: &Map<String, Value>, path: &str, level: Level) {
        for key in ["kind", "apiVersion"] {
            if let Some(field) = props.get(key)
                && field.get("type").and_then(Value::as_str) != Some("string")
            {
                self.push(
                    format!("{path}.properties[{key}].type"),
                    "Invalid value: must be string",
                );
            }
        }
        let Some(metadata) = props.get("metadata").and_then(Value::as_object) else {
            return;
        };
        let at = format!("{path}.properties[metadata]");
        if metadata.get("type").and_then(Value::as_str) != Some("object") {
            self.push(format!("{at}.type"), "Invalid value: must be object");
        }
        if level != Level::Root {
            return;
        }
        // Only restrictions of name and generateName: anything else the API server
        // would silently not apply.
        let names_only = properties(metadata)
            .is_none_or(|p| !p.is_empty() && p.keys().all(|k| k == "name" || k == "generateName"));
        let other_keys = metadata
            .keys()
            .any(|k| !matches!(k.as_str(), "type" | "properties" | "default"));
        if !names_only || other_keys {
            self.push(
                at,
                "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            );
        }
    }

    /// The junctors of `map` (the node at `node_path`), whose constraints apply to the
    /// structural node `structural` (at `structural_path`).
    fn junctors(
        &mut self,
        map: &Map<String, Value>,
        structural: &Map<String, Value>,
        node_path: &str,
        structural_path: &str,
    ) {
        let int_or_string_any_of = is_int_or_string_any_of(map.get("anyOf"));
        let int_or_string_all_of = map
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
            .is_some_and(|first| is_int_or_string_any_of(first.get("anyOf")));
        for junctor in JUNCTORS {
            let Some(schemas) = map.get(*junctor).and_then(Value::as_array) else {
                continue;
            };
            for (i, schema) in schemas.iter().enumerate() {
                let skip_types = (*junctor == "anyOf" && int_or_string_any_of)
                    || (*junctor == "allOf" && i == 0 && int_or_string_all_of);
                let at = format!("{node_path}.{junctor}[{i}]");
                self.nested(schema, &at, structural, structural_path, skip_types);
            }
        }
        if let Some(not) = map.get("not") {
            let at = format!("{node_path}.not");
            self.nested(not, &at, structural, structural_path, false);
        }
    }

    /// A schema inside a junctor: value validation only, on what the structural schema
    /// (`structural`, at `structural_path`) specifies.
    fn nested(
        &mut self,
        node: &Value,
        path: &str,
        structural: &Map<String, Value>,
        structural_path: &str,
        int_or_string: bool,
    ) {
        let Some(map) = node.as_object() else {
            self.push(path, "Invalid value: must be a schema object");
            return;
        };
        self.supported(map, path);
        if int_or_string {
            // `anyOf: [{type: integer}, {type: string}]` is how int-or-string is written.
            self.junctors(map, structural, path, structural_path);
            return;
        }
        for (key, message) in NOT_IN_JUNCTORS {
            if map.contains_key(*key) {
                self.push(format!("{path}.{key}"), format!("Forbidden: {message}"));
            }
        }
        for key in FLAGS_NOT_IN_JUNCTORS {
            if map.get(*key).and_then(Value::as_bool) == Some(true) {
                self.push(
                    format!("{path}.{key}"),
                    "Forbidden: must be false to be structural",
                );
            }
        }
        if let Some(props) = properties(map) {
            if props.contains_key("metadata") {
                self.push(
                    format!("{path}.properties[metadata]"),
                    "Forbidden: must not be specified in a nested context",
                );
            }
            let specified = properties(structural);
            for (name, child) in props {
                let sub_path = format!("{structural_path}.properties[{name}]");
                match specified
                    .and_then(|s| s.get(name))
                    .and_then(Value::as_object)
                {
                    Some(sub) => {
                        self.nested(
                            child,
                            &format!("{path}.properties[{name}]"),
                            sub,
                            &sub_path,
                            false,
                        );
                    }
                    None => self.push(
                        sub_path,
                        format!(
                            "Required value: because it is defined in {path}.properties[{name}]"
                        ),
                    ),
                }
            }
        }
        if let Some(items) = map.get("items") {
            let sub_path = format!("{structural_path}.items");
            match structural.get("items").and_then(Value::as_object) {
                Some(sub) => self.nested(items, &format!("{path}.items"), sub, &sub_path, false),
                None => self.push(
                    sub_path,
                    format!("Required value: because it is defined in {path}.items"),
                ),
            }
        }
        self.junctors(map, structural, path, structural_path);
    }
}

fn properties(map: &Map<String, Value>) -> Option<&Map<String, Value>> {
    map.get("properties").and_then(Value::as_object)
}

/// `anyOf: [{type: integer}, {type: string}]`, exactly: int-or-string's own pattern.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    let Some(Value::Array(any_of)) = any_of else {
        return false;
    };
    let only_type = |schema: &Value, type_: &str| {
        schema
            .as_object()
            .is_some_and(|m| m.len() == 1 && m.get("type").and_then(Value::as_str) == Some(type_))
    };
    any_of.len() == 2 && only_type(&any_of[0], "integer") && only_type(&any_of[1], "string")
}

fn root_with_status(root: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let extra: Vec<&str> = root
        .keys()
        .map(String::as_str)
        .filter(|k| !ROOT_WITH_STATUS.contains(k))
        .collect();
    if !extra.is_empty() {
        out.push(Violation {
            path: path.to_owned(),
            message: format!(
                "Invalid value: only {ROOT_WITH_STATUS:?} are allowed at the root of the schema if the status subresource is enabled, not {extra:?}"
            ),
        });
    }
}

/// Printer column types and formats the API server accepts.
fn check_printer_columns(version: &Value, at: &str, out: &mut Vec<Violation>) {
    const TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
    const FORMATS: &[&str] = &[
        "",
        "byte",
        "date",
        "date-time",
        "double",
        "float",
        "int32",
        "int64",
        "password",
    ];
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return;
    };
    for (i, column) in columns.iter().enumerate() {
        let path = format!("{at}.additionalPrinterColumns[{i}]");
        let type_ = column
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !TYPES.contains(&type_) {
            out.push(Violation {
                path: format!("{path}.type"),
                message: format!("Unsupported value: {type_:?}: must be one of {TYPES:?}"),
            });
        }
        let format = column
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !FORMATS.contains(&format) {
            out.push(Violation {
                path: format!("{path}.format"),
                message: format!("Invalid value: {format:?}: must be one of {FORMATS:?}"),
            });
        }
        if column
            .get("jsonPath")
            .and_then(Value::as_str)
            .is_none_or(|p| p.trim().is_empty())
        {
            out.push(Violation {
                path: format!("{path}.jsonPath"),
                message: "Required value".to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{
            "name": "v1",
            "schema": {"openAPIV3Schema": schema},
            "subresources": {"status": {}},
        }]}})
    }

    fn messages(schema: Value) -> Vec<String> {
        check_crd(&crd(schema))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn object(properties: Value) -> Value {
        json!({"type": "object", "properties": properties})
    }

    #[test]
    fn a_plain_schema_is_structural() {
        let schema = json!({
            "type": "object",
            "description": "a resource",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
                "spec": object(json!({
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "choice": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                })),
            },
            "x-kubernetes-validations": [{"rule": "self.spec.port != 0", "message": "a port", "reason": "FieldValueInvalid"}],
        });
        assert_eq!(messages(schema), Vec::<String>::new());
    }

    #[test]
    fn a_ref_is_refused_where_the_api_server_says() {
        let schema = object(json!({"status": object(json!({
            "perModel": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Iteration"}},
        }))}));
        assert_eq!(
            messages(schema),
            [
                "spec.versions[0].schema.openAPIV3Schema.properties[status].properties[perModel].additionalProperties.$ref: Forbidden: $ref is not supported",
                "spec.versions[0].schema.openAPIV3Schema.properties[status].properties[perModel].additionalProperties.type: Required value: must not be empty for specified object fields",
            ]
        );
    }

    #[test]
    fn every_node_needs_a_type() {
        let schema = json!({"properties": {
            "a": {"description": "no type"},
            "b": {"type": "array", "items": {}},
            "c": {"type": "array"},
            "d": {"x-kubernetes-preserve-unknown-fields": true},
        }});
        let found = messages(schema);
        let root = "spec.versions[0].schema.openAPIV3Schema";
        assert_eq!(
            found,
            [
                format!("{root}.type: Required value: must not be empty at the root"),
                format!(
                    "{root}.properties[a].type: Required value: must not be empty for specified object fields"
                ),
                format!(
                    "{root}.properties[b].items.type: Required value: must not be empty for specified array items"
                ),
                format!("{root}.properties[c].items: Required value: must be specified"),
            ]
        );
    }

    #[test]
    fn unsupported_keywords_are_refused() {
        let schema = object(json!({
            "a": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "b": {"type": "null"},
            "c": {"type": "array", "items": [{"type": "string"}]},
            "d": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "e": {"type": "object", "patternProperties": {"x": {"type": "string"}}},
            "f": {"type": "string", "x-kubernetes-preserve-unknown-fields": false},
            "g": {"type": "integer", "x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true},
        }));
        let mut root = object(json!({}));
        root["definitions"] = json!({"X": {"type": "string"}});
        let found = messages(schema).join("\n") + "\n" + &messages(root).join("\n");
        for expected in [
            "properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            "properties[b].type: Forbidden: type cannot be set to null",
            "properties[c].items: Forbidden: items must be a schema object and not an array",
            "properties[d].uniqueItems: Forbidden",
            "properties[e].patternProperties: Forbidden: patternProperties is not supported",
            "properties[f].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
            "properties[g].x-kubernetes-preserve-unknown-fields: Invalid value: must be false if x-kubernetes-int-or-string is true",
            "openAPIV3Schema.definitions: Forbidden: definitions is not supported",
        ] {
            assert!(found.contains(expected), "{expected} not in\n{found}");
        }
    }

    #[test]
    fn the_root_is_an_object_without_nullable_or_additional_properties() {
        let found = messages(
            json!({"type": "object", "nullable": true, "additionalProperties": {"type": "string"}}),
        );
        let found = found.join("\n");
        assert!(
            found.contains(
                "openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"
            ),
            "{found}"
        );
        assert!(
            found.contains(
                "openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"
            ),
            "{found}"
        );
        let found = messages(json!({"type": "string"})).join("\n");
        assert!(found.contains("must be object at the root"), "{found}");
    }

    #[test]
    fn metadata_may_only_restrict_name_and_generate_name() {
        let ok = object(
            json!({"metadata": {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}}),
        );
        assert_eq!(messages(ok), Vec::<String>::new());
        for metadata in [
            json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            json!({"type": "object", "description": "the metadata"}),
            json!({"properties": {"name": {"type": "string"}}}),
        ] {
            let found = messages(object(json!({"metadata": metadata}))).join("\n");
            assert!(
                found.contains("properties[metadata]"),
                "{metadata}: {found}"
            );
        }
        let nested = object(
            json!({"spec": {"type": "object", "properties": {"a": {"type": "string"}},
            "anyOf": [{"properties": {"metadata": {"type": "object"}}}]}}),
        );
        let found = messages(nested).join("\n");
        assert!(
            found.contains("must not be specified in a nested context"),
            "{found}"
        );
    }

    #[test]
    fn junctors_only_validate_what_the_structure_specifies() {
        let schema = object(json!({"spec": {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "anyOf": [
                {"type": "object", "description": "d", "nullable": true},
                {"properties": {"b": {"minLength": 1}}},
            ],
            "not": {"x-kubernetes-validations": [{"rule": "true"}]},
        }}));
        let found = messages(schema).join("\n");
        for expected in [
            "properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
            "properties[spec].anyOf[0].description: Forbidden: must be empty to be structural",
            "properties[spec].anyOf[0].nullable: Forbidden: must be false to be structural",
            "properties[spec].properties[b]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.properties[spec].anyOf[1].properties[b]",
            "properties[spec].not.x-kubernetes-validations: Forbidden: must be empty to be structural",
        ] {
            assert!(found.contains(expected), "{expected} not in\n{found}");
        }
    }

    #[test]
    fn list_types_and_rules_are_checked() {
        let schema = object(json!({
            "a": {"type": "object", "x-kubernetes-list-type": "set"},
            "b": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                  "x-kubernetes-list-type": "map"},
            "c": {"type": "string", "x-kubernetes-validations": [{"rule": "self != ''", "message": "two\nlines", "reason": "Nope"}]},
        }));
        let found = messages(schema).join("\n");
        for expected in [
            "properties[a].type: Invalid value: must be array if x-kubernetes-list-type is specified",
            "properties[b].x-kubernetes-list-map-keys: Required value",
            "properties[c].x-kubernetes-validations[0].message: Invalid value: must not contain line breaks",
            "properties[c].x-kubernetes-validations[0].reason: Unsupported value: \"Nope\"",
        ] {
            assert!(found.contains(expected), "{expected} not in\n{found}");
        }
    }

    #[test]
    fn printer_columns_have_known_types() {
        let mut value = crd(object(json!({})));
        value["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "X", "type": "float", "jsonPath": ".spec.x"}]);
        let found: Vec<String> = check_crd(&value).iter().map(ToString::to_string).collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("spec.versions[0].additionalPrinterColumns[0].type"),
            "{found:?}"
        );
    }
}
