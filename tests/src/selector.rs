//! Label and field selectors, with the apiserver's grammar and matching rules.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;
use crate::meta;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Equals(k, v) => labels.get(k) == Some(v),
            // Like the apiserver, `!=` and `notin` also match objects lacking the label.
            Self::NotEquals(k, v) => labels.get(k) != Some(v),
            Self::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Self::Exists(k) => labels.contains_key(k),
            Self::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed `labelSelector`; requirements are ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses the string form (`a=b,c!=d,e in (f,g),!h`); empty selects everything.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        split_top_level(input)
            .into_iter()
            .filter(|term| !term.trim().is_empty())
            .map(|term| parse_requirement(term.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = meta::labels(obj);
        self.0.iter().all(|r| r.matches(&labels))
    }
}

/// Splits on commas that are not inside a `( … )` value set.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
}

fn parse_requirement(term: &str) -> Result<Requirement, ApiError> {
    let invalid = || ApiError::bad_request(format!("unable to parse requirement: {term:?}"));
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key.trim(), term)?));
    }
    for (op, ctor) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            return Ok(ctor(
                label_key(k.trim(), term)?,
                label_value(v.trim(), term)?,
            ));
        }
    }
    let mut words = term.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Requirement::Exists(label_key(key, term)?));
    };
    let (op, set) = if let Some(set) = rest.strip_prefix("notin") {
        ("notin", set)
    } else if let Some(set) = rest.strip_prefix("in") {
        ("in", set)
    } else {
        return Err(invalid());
    };
    let values = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(invalid)?
        .split(',')
        .map(|v| label_value(v.trim(), term))
        .collect::<Result<Vec<_>, _>>()?;
    let key = label_key(key, term)?;
    Ok(if op == "in" {
        Requirement::In(key, values)
    } else {
        Requirement::NotIn(key, values)
    })
}

fn label_key(key: &str, term: &str) -> Result<String, ApiError> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_owned())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label key {key:?} in {term:?}"
        )))
    }
}

fn label_value(value: &str, term: &str) -> Result<String, ApiError> {
    let valid = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(value.to_owned())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label value {value:?} in {term:?}"
        )))
    }
}

/// A parsed `fieldSelector` over the fields the apiserver indexes; terms are ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `field=value`/`field==value`/`field!=value` terms, rejecting fields the
    /// apiserver would not support for `plural` (it answers 400 for those too).
    pub fn parse(input: &str, plural: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in input.split(',').filter(|t| !t.trim().is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !supported_field(plural, field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    /// Selects only the object called `name` (watching a single object's URL).
    pub(crate) fn name(name: &str) -> Self {
        Self(vec![("metadata.name".to_owned(), true, name.to_owned())])
    }

    pub(crate) fn and(mut self, other: Self) -> Self {
        self.0.extend(other.0);
        self
    }

    /// Whether every term holds; a missing field compares as the empty string.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field
                .split('.')
                .try_fold(obj, |v, k| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default();
            (actual == value) == *equal
        })
    }
}

fn supported_field(plural: &str, field: &str) -> bool {
    const POD_FIELDS: &[&str] = &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ];
    const EVENT_FIELDS: &[&str] = &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
    matches!(field, "metadata.name" | "metadata.namespace")
        || (plural == "pods" && POD_FIELDS.contains(&field))
        || (plural == "events" && EVENT_FIELDS.contains(&field))
        || (plural == "secrets" && field == "type")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let obj = pod(json!({"app": "web", "tier": "front"}));
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (db, web)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("missing in (db)", false),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("!tier", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("app in (a,web),!missing", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).expect(selector);
            assert_eq!(parsed.matches(&obj), expected, "{selector}");
        }
    }

    #[test]
    fn malformed_selectors_are_rejected() {
        for bad in ["app in web", "a b c", "app=(x", "=v"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            FieldSelector::parse("spec.foo=bar", "configmaps")
                .map_err(|e| e.code)
                .err(),
            Some(400)
        );
    }

    #[test]
    fn field_selectors() {
        let obj = pod(json!({}));
        let sel = FieldSelector::parse("metadata.name=p,metadata.namespace!=other", "pods");
        assert!(sel.expect("parses").matches(&obj));
        let sel = FieldSelector::parse("metadata.name==q", "pods").expect("parses");
        assert!(!sel.matches(&obj));
        let sel = FieldSelector::parse("status.phase=", "pods").expect("parses");
        assert!(sel.matches(&obj));
    }
}
