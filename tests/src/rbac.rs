//! Authorization as the apiserver's RBAC authorizer does it, for one service account:
//! the rules of the Roles and ClusterRoles a test hands over (typically the ones a Helm
//! chart renders) are evaluated on every request that carries the service account's
//! token, and a request no rule allows is answered `403 Forbidden`, worded like the
//! real server's. Requests without the token are the test's own (cluster-admin).
//!
//! Bindings are not modelled: every rule given is bound to the service account. A
//! ClusterRole's rules apply in every namespace and to cluster-scoped resources, a
//! Role's only in its namespace.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::requests::RecordedRequest;

/// The bearer token of the service account whose requests are authorized.
pub(crate) const SERVICE_ACCOUNT_TOKEN: &str = "perfsweep-testkit-service-account";

/// One `PolicyRule` of a Role or ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// `apiGroups`; `""` is the core group, `"*"` any.
    pub api_groups: Vec<String>,
    /// `resources`, `plural` or `plural/subresource`; `"*"` any.
    pub resources: Vec<String>,
    /// `verbs`; `"*"` any.
    pub verbs: Vec<String>,
    /// `resourceNames`; empty allows any name.
    pub resource_names: Vec<String>,
    /// The Role's namespace, or `None` for a ClusterRole.
    pub namespace: Option<String>,
    /// `Kind name` of the role the rule came from, for messages.
    pub source: String,
}

impl PolicyRule {
    /// Whether this rule allows the request (a resource request).
    pub fn allows(&self, request: &RecordedRequest) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
        any(&self.api_groups, &request.group)
            && any(&self.resources, &request.rbac_resource())
            && any(&self.verbs, &request.verb)
            && (self.resource_names.is_empty()
                || request
                    .name
                    .as_ref()
                    .is_some_and(|name| self.resource_names.contains(name)))
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| request.namespace.as_ref() == Some(ns))
    }
}

/// The rules of one service account, and its name for messages.
#[derive(Debug, Clone)]
pub struct Rbac {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// Every rule bound to the service account.
    pub rules: Vec<PolicyRule>,
}

impl Rbac {
    /// The rules of every `Role` and `ClusterRole` among `objects` (other kinds are
    /// ignored), for the service account `namespace/name`.
    ///
    /// # Errors
    /// A role whose rules are not lists of strings, described.
    pub fn from_roles(namespace: &str, name: &str, objects: &[Value]) -> Result<Self, String> {
        let mut rules = Vec::new();
        for object in objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            let role_namespace = match kind {
                "ClusterRole" => None,
                "Role" => Some(
                    object["metadata"]["namespace"]
                        .as_str()
                        .ok_or_else(|| format!("a Role without a namespace: {object}"))?
                        .to_owned(),
                ),
                _ => continue,
            };
            let source = format!(
                "{kind} {}",
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            for rule in object["rules"].as_array().into_iter().flatten() {
                let strings = |field: &str| -> Result<Vec<String>, String> {
                    match &rule[field] {
                        Value::Null => Ok(Vec::new()),
                        Value::Array(items) => items
                            .iter()
                            .map(|item| {
                                item.as_str().map(str::to_owned).ok_or_else(|| {
                                    format!("{source}: {field} holds a non-string: {item}")
                                })
                            })
                            .collect(),
                        other => Err(format!("{source}: {field} is not a list: {other}")),
                    }
                };
                rules.push(PolicyRule {
                    api_groups: strings("apiGroups")?,
                    resources: strings("resources")?,
                    verbs: strings("verbs")?,
                    resource_names: strings("resourceNames")?,
                    namespace: role_namespace.clone(),
                    source: source.clone(),
                });
            }
        }
        Ok(Self {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            rules,
        })
    }

    /// `Ok` when a rule allows the request; otherwise the apiserver's 403. Non-resource
    /// requests (discovery, `/version`) are allowed, as `system:discovery` does.
    pub fn authorize(&self, request: &RecordedRequest) -> Result<(), ApiError> {
        if !request.is_resource_request() || self.rules.iter().any(|rule| rule.allows(request)) {
            return Ok(());
        }
        Err(forbidden(&self.user, request))
    }
}

/// `services "x" is forbidden: User "…" cannot get resource "services" in API group ""
/// in the namespace "ns"`, as the apiserver words it.
fn forbidden(user: &str, request: &RecordedRequest) -> ApiError {
    let resource = request.rbac_resource();
    let qualified = if request.group.is_empty() {
        request.resource.clone()
    } else {
        format!("{}.{}", request.resource, request.group)
    };
    let object = match &request.name {
        Some(name) => format!("{qualified} {name:?}"),
        None => qualified,
    };
    let scope = match &request.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_owned(),
    };
    let mut error = ApiError::new(
        403,
        "Forbidden",
        format!(
            "{object} is forbidden: User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            request.verb, request.group
        ),
    );
    error.details = Some(json!({
        "name": request.name.clone().unwrap_or_default(),
        "group": request.group,
        "kind": request.resource,
    }));
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        verb: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> RecordedRequest {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
            None => (resource.to_owned(), None),
        };
        RecordedRequest {
            verb: verb.into(),
            group: String::new(),
            version: "v1".into(),
            resource,
            subresource,
            namespace: ns.map(str::to_owned),
            name: name.map(str::to_owned),
            status_code: 0,
            path: String::new(),
        }
    }

    fn rbac() -> Rbac {
        Rbac::from_roles(
            "perfsweep-system",
            "perfsweep",
            &[
                json!({"kind": "ClusterRole", "metadata": {"name": "op"}, "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "create"]},
                    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                ]}),
                json!({"kind": "Role", "metadata": {"name": "le", "namespace": "sys"}, "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"], "verbs": ["get"]},
                ]}),
                json!({"kind": "ServiceAccount", "metadata": {"name": "ignored"}}),
            ],
        )
        .expect("valid roles")
    }

    #[test]
    fn allows_what_a_rule_grants_and_nothing_else() {
        let rbac = rbac();
        assert!(
            rbac.authorize(&request("list", "pods", Some("a"), None))
                .is_ok()
        );
        assert!(
            rbac.authorize(&request("get", "pods/log", Some("a"), Some("p")))
                .is_ok()
        );
        assert!(
            rbac.authorize(&request("get", "configmaps", Some("sys"), Some("lock")))
                .is_ok()
        );
        for denied in [
            request("get", "pods", Some("a"), Some("p")),
            request("get", "configmaps", Some("sys"), Some("other")),
            request("get", "configmaps", Some("elsewhere"), Some("lock")),
            request("delete", "pods", Some("a"), Some("p")),
        ] {
            assert!(rbac.authorize(&denied).is_err(), "{denied:?}");
        }
    }

    #[test]
    fn a_denial_reads_like_the_apiservers() {
        let error = rbac()
            .authorize(&request("get", "services", Some("bench2"), Some("ipf-0")))
            .expect_err("services are not granted");
        assert_eq!((error.code, error.reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            error.message,
            "services \"ipf-0\" is forbidden: User \"system:serviceaccount:perfsweep-system:perfsweep\" \
             cannot get resource \"services\" in API group \"\" in the namespace \"bench2\""
        );
    }

    #[tokio::test]
    async fn the_double_answers_the_service_account_403_and_the_test_not() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, ListParams};

        let double = crate::ApiDouble::start().await;
        double.enforce_rbac(rbac());
        let as_operator: Api<Pod> = Api::namespaced(double.service_account_client(), "a");
        as_operator
            .list(&ListParams::default())
            .await
            .expect("list pods is granted");
        match as_operator.get_opt("p").await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 403);
                assert!(
                    status.message.contains("cannot get resource \"pods\""),
                    "{}",
                    status.message
                );
            }
            other => panic!("expected 403 Forbidden, got {other:?}"),
        }
        let as_admin: Api<Pod> = Api::namespaced(double.client(), "a");
        assert!(
            as_admin
                .get_opt("p")
                .await
                .expect("admin may get")
                .is_none()
        );
        let denied: Vec<(String, u16)> = double
            .requests()
            .into_iter()
            .filter(|r| r.status_code == 403)
            .map(|r| (r.verb, r.status_code))
            .collect();
        assert_eq!(denied, [("get".to_owned(), 403)]);
    }
}
