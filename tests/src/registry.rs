//! Which resources the double serves, and how (scope, status subresource).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

/// One served resource: a group/version/plural with its kind and behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether `/status` is a separate subresource (and the main endpoint ignores status).
    pub status_subresource: bool,
}

impl ResourceType {
    /// A resource type; `namespaced` and `status_subresource` as given.
    pub fn new(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            kind: kind.to_owned(),
            namespaced,
            status_subresource,
        }
    }

    /// `v1` for core, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as the apiserver names resources in messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn key(&self) -> TypeKey {
        TypeKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// Storage identity of a resource: versions of one group/plural share their objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TypeKey {
    pub group: String,
    pub plural: String,
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut registry = Self::default();
        let builtins = [
            ("", "v1", "namespaces", "Namespace", false, true),
            ("", "v1", "pods", "Pod", true, true),
            ("", "v1", "services", "Service", true, true),
            ("", "v1", "secrets", "Secret", true, false),
            ("", "v1", "configmaps", "ConfigMap", true, false),
            ("", "v1", "events", "Event", true, false),
            (
                "",
                "v1",
                "persistentvolumeclaims",
                "PersistentVolumeClaim",
                true,
                true,
            ),
            ("", "v1", "serviceaccounts", "ServiceAccount", true, false),
            ("", "v1", "nodes", "Node", false, true),
            ("events.k8s.io", "v1", "events", "Event", true, false),
            (
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
                false,
            ),
            ("coordination.k8s.io", "v1", "leases", "Lease", true, false),
            (
                "scheduling.volcano.sh",
                "v1beta1",
                "podgroups",
                "PodGroup",
                true,
                true,
            ),
            (
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                true,
            ),
        ];
        for (group, version, plural, kind, namespaced, status) in builtins {
            registry.register(ResourceType::new(
                group, version, plural, kind, namespaced, status,
            ));
        }
        registry
    }

    pub fn register(&mut self, rt: ResourceType) {
        self.types.insert(
            (rt.group.clone(), rt.version.clone(), rt.plural.clone()),
            rt,
        );
    }

    pub fn unregister(&mut self, key: &TypeKey) {
        self.types
            .retain(|(group, _, plural), _| !(group == &key.group && plural == &key.plural));
    }

    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }
}

/// The resource types a `CustomResourceDefinition` object declares, one per served version.
pub(crate) fn types_from_crd(crd: &Value) -> Result<Vec<ResourceType>, ApiError> {
    let spec = crd
        .get("spec")
        .ok_or_else(|| ApiError::bad_request("CustomResourceDefinition has no spec"))?;
    let field = |path: &[&str]| -> Result<&str, ApiError> {
        path.iter()
            .try_fold(spec, |v, k| v.get(k))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "CustomResourceDefinition lacks spec.{}",
                    path.join(".")
                ))
            })
    };
    let group = field(&["group"])?;
    let plural = field(&["names", "plural"])?;
    let kind = field(&["names", "kind"])?;
    let namespaced = match field(&["scope"])? {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "CustomResourceDefinition has unknown scope {other}"
            )));
        }
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::bad_request("CustomResourceDefinition lacks spec.versions"))?;
    let mut types = Vec::new();
    for version in versions {
        if version.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let name = version
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_request("CRD version lacks a name"))?;
        let status = version
            .pointer("/subresources/status")
            .is_some_and(|s| !s.is_null());
        types.push(ResourceType::new(
            group, name, plural, kind, namespaced, status,
        ));
    }
    Ok(types)
}
