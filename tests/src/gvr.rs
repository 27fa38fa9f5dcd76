//! Group/version/resource triples naming the collections tests read and write directly.

use std::borrow::Cow;
use std::fmt;

/// A group/version/resource (plural) triple, e.g. `("", "v1", "pods")`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    /// API group; empty for the core group.
    pub group: Cow<'static, str>,
    /// API version, e.g. `v1`.
    pub version: Cow<'static, str>,
    /// Plural resource name, e.g. `pods`.
    pub resource: Cow<'static, str>,
}

impl Gvr {
    /// Core v1 namespaces.
    pub const NAMESPACES: Gvr = Gvr::from_static("", "v1", "namespaces");
    /// Core v1 pods.
    pub const PODS: Gvr = Gvr::from_static("", "v1", "pods");
    /// Core v1 services.
    pub const SERVICES: Gvr = Gvr::from_static("", "v1", "services");
    /// Core v1 secrets.
    pub const SECRETS: Gvr = Gvr::from_static("", "v1", "secrets");
    /// Core v1 configmaps.
    pub const CONFIGMAPS: Gvr = Gvr::from_static("", "v1", "configmaps");
    /// Core v1 events.
    pub const EVENTS: Gvr = Gvr::from_static("", "v1", "events");
    /// `events.k8s.io/v1` events.
    pub const EVENTS_V1: Gvr = Gvr::from_static("events.k8s.io", "v1", "events");
    /// Core v1 persistentvolumeclaims.
    pub const PERSISTENT_VOLUME_CLAIMS: Gvr = Gvr::from_static("", "v1", "persistentvolumeclaims");
    /// Core v1 serviceaccounts.
    pub const SERVICE_ACCOUNTS: Gvr = Gvr::from_static("", "v1", "serviceaccounts");
    /// Core v1 nodes.
    pub const NODES: Gvr = Gvr::from_static("", "v1", "nodes");
    /// `coordination.k8s.io/v1` leases.
    pub const LEASES: Gvr = Gvr::from_static("coordination.k8s.io", "v1", "leases");
    /// Volcano `scheduling.volcano.sh/v1beta1` podgroups.
    pub const PODGROUPS: Gvr = Gvr::from_static("scheduling.volcano.sh", "v1beta1", "podgroups");
    /// `apiextensions.k8s.io/v1` customresourcedefinitions.
    pub const CUSTOM_RESOURCE_DEFINITIONS: Gvr =
        Gvr::from_static("apiextensions.k8s.io", "v1", "customresourcedefinitions");

    /// A triple from owned or borrowed strings.
    pub fn new(
        group: impl Into<Cow<'static, str>>,
        version: impl Into<Cow<'static, str>>,
        resource: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// A triple from string literals, usable in constants.
    pub const fn from_static(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
    ) -> Self {
        Self {
            group: Cow::Borrowed(group),
            version: Cow::Borrowed(version),
            resource: Cow::Borrowed(resource),
        }
    }
}

impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}
