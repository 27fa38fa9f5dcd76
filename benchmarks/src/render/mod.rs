//! The Kubernetes objects a benchmark runs as: a Volcano PodGroup, a headless Service for
//! peer discovery, and one pod per process of the plan. Pure: no cluster access.
//!
//! Everything here is generic over kinds: it reads only the [`Plan`] and the fields every
//! kind shares ([`CommonSpec`]). Each pod runs `perfsweep agent`, configured through the
//! environment described in [`crate::execution::agent_env`].

pub mod consumed_secrets;
pub mod launch;
pub mod network;
pub mod network_policy;
pub mod placement;
pub mod pod;
pub mod pod_group;
pub mod ports;
pub mod resources;
pub mod security;
pub mod service;
pub mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::api::labels;
use crate::execution::plan::{Plan, process_name};
use crate::kinds::common::{CommonSpec, Scheduler};
use crate::kinds::registry::{self, KindInfo};

/// The benchmark object the rendered objects belong to (and are owned by).
#[derive(Clone, Debug)]
pub struct BenchmarkRef {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

/// Everything one benchmark creates in the cluster.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// `None` with `scheduler: default`.
    pub pod_group: Option<crate::api::volcano::PodGroup>,
    pub service: Service,
    /// Admits only the benchmark's own pods to its pods; `None` for a set's child whose
    /// set's one policy admits them ([`Rendered::covered_by_set`]).
    pub network_policy: Option<k8s_openapi::api::networking::v1::NetworkPolicy>,
    /// Secrets the pods mount (owned by the benchmark, deleted with its pods).
    pub secrets: Vec<k8s_openapi::api::core::v1::Secret>,
    /// Claims the benchmark creates for its volumes (owned, deleted with its pods).
    /// Existing claims a spec refers to are never listed here.
    pub claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    pub pods: Vec<Pod>,
    /// Where the pods read their launch token when it is not in a Secret of their own
    /// ([`Rendered::with_token_source`]): the one reference to another Secret they make
    /// without its owner's consent, so [`consumed_secrets`] passes it over.
    ///
    /// [`consumed_secrets`]: consumed_secrets::consumed_secrets
    pub token_source: Option<launch::TokenSource>,
}

impl Rendered {
    /// Every object, as JSON, in the order the operator creates them: what `perfsweep
    /// render --objects` shows. Destructured whole, so that an object added to
    /// [`Rendered`] (and created by the operator) cannot be left out of what a reviewer
    /// sees offline.
    pub fn objects(&self) -> Result<Vec<serde_json::Value>, serde_json::Error> {
        let Self {
            pod_group,
            service,
            network_policy,
            secrets,
            claims,
            pods,
            // Not an object: where the pods read their token, which they show.
            token_source: _,
        } = self;
        let mut out = Vec::with_capacity(3 + secrets.len() + claims.len() + pods.len());
        if let Some(group) = pod_group {
            out.push(serde_json::to_value(group)?);
        }
        out.push(serde_json::to_value(service)?);
        if let Some(policy) = network_policy {
            out.push(serde_json::to_value(policy)?);
        }
        for secret in secrets {
            out.push(serde_json::to_value(secret)?);
        }
        for claim in claims {
            out.push(serde_json::to_value(claim)?);
        }
        for pod in pods {
            out.push(serde_json::to_value(pod)?);
        }
        Ok(out)
    }

    /// The objects of a child of the set of uid `set_uid`, whose one policy
    /// ([`network_policy::for_set`]) admits the set's pods: no policy of its own, and its
    /// pods labelled for the set's.
    #[must_use]
    pub fn covered_by_set(mut self, set_uid: &str) -> Self {
        self.network_policy = None;
        for pod in &mut self.pods {
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(labels::SET_UID.to_owned(), set_uid.to_owned());
        }
        self
    }

    /// The objects with the pods reading their launch token from `source` (a key of a
    /// set's batch, see [`launch::batch_secret`], or where the benchmark's first pods read
    /// it), and without a launch Secret of their own to create.
    #[must_use]
    pub fn with_token_source(mut self, source: &launch::TokenSource) -> Self {
        self.secrets.retain(|secret| !launch::needs_token(secret));
        for pod in &mut self.pods {
            launch::read_token_from(pod, source);
        }
        self.token_source = Some(source.clone());
        self
    }
}

/// Renders the objects of a benchmark of kind `benchmark.kind` with `spec` (its full
/// spec JSON, already validated) and `plan`.
pub fn render(
    benchmark: &BenchmarkRef,
    spec: &Value,
    plan: &Plan,
) -> Result<Rendered, RenderError> {
    // Every kind flattens CommonSpec into its spec, so the shared fields deserialize from
    // the whole spec; the kind's own fields are already in the plan.
    let common: CommonSpec =
        serde_json::from_value(spec.clone()).map_err(|e| invalid("spec", e))?;
    let kind = registry::lookup(&benchmark.kind).ok_or_else(|| {
        RenderError::Unsupported(format!(
            "unknown benchmark kind {:?}: known kinds are {}",
            benchmark.kind,
            registry::kind_names().join(", ")
        ))
    })?;
    let plan = &name_claim_export(plan, benchmark);
    let context = Context::new(benchmark, &common, plan, kind)?;
    volumes::check(&context)?;
    let pods = plan
        .processes()
        .map(|(role, index)| pod::render(&context, role, index))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rendered {
        pod_group: match context.scheduler {
            Scheduler::Volcano => Some(pod_group::render(&context, &pods)?),
            Scheduler::Default => None,
        },
        service: service::render(&context),
        network_policy: Some(network_policy::render(&context)),
        // Every benchmark's agents authenticate each other with its token.
        secrets: vec![launch::secret(&context)],
        claims: volumes::claims(&context)?,
        pods,
        token_source: None,
    })
}

/// A role writing a `pvc://` export learns the run and file name it writes under: the
/// benchmark's name and its uid's first 8 hex digits, as the operator names runs.
fn name_claim_export(plan: &Plan, benchmark: &BenchmarkRef) -> Plan {
    let mut plan = plan.clone();
    let short: String = benchmark
        .uid
        .chars()
        .filter(|c| *c != '-')
        .take(8)
        .collect();
    for role in &mut plan.roles {
        if role
            .env
            .contains_key(crate::execution::agent_env::EXPORT_DIR)
        {
            role.env.insert(
                crate::execution::agent_env::EXPORT_RUN.into(),
                format!("{}-{short}", benchmark.name),
            );
            role.env.insert(
                crate::execution::agent_env::EXPORT_NAME.into(),
                benchmark.name.clone(),
            );
        }
    }
    plan
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("{0}")]
    Unsupported(String),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

pub(crate) fn invalid(path: impl Into<String>, message: impl ToString) -> RenderError {
    RenderError::Invalid {
        path: path.into(),
        message: message.to_string(),
    }
}

/// What every part of the rendering reads, checked once.
pub(crate) struct Context<'a> {
    pub benchmark: &'a BenchmarkRef,
    pub common: &'a CommonSpec,
    pub plan: &'a Plan,
    pub kind: &'static KindInfo,
    pub scheduler: Scheduler,
    pub network: network::NetworkPlan,
    pub ports: ports::PortNames,
}

impl<'a> Context<'a> {
    fn new(
        benchmark: &'a BenchmarkRef,
        common: &'a CommonSpec,
        plan: &'a Plan,
        kind: &'static KindInfo,
    ) -> Result<Self, RenderError> {
        check_names(benchmark, plan)?;
        if plan.kind != kind.kind {
            return Err(invalid(
                "plan.kind",
                format!(
                    "the plan is for {}, the benchmark is {}",
                    plan.kind, kind.kind
                ),
            ));
        }
        Ok(Self {
            benchmark,
            common,
            plan,
            kind,
            scheduler: common.scheduler.unwrap_or_default(),
            network: network::plan(common)?,
            ports: ports::PortNames::for_plan(plan)?,
        })
    }

    /// Labels on every object of the benchmark.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
            (NAME_LABEL.to_owned(), self.kind.kind.to_lowercase()),
            (labels::BENCHMARK.to_owned(), self.benchmark.name.clone()),
            (labels::BENCHMARK_UID.to_owned(), self.benchmark.uid.clone()),
        ])
    }

    /// What selects the benchmark's own pods: its name and its uid, which no other
    /// object of the namespace carries unless copied on purpose.
    pub fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (labels::BENCHMARK.to_owned(), self.benchmark.name.clone()),
            (labels::BENCHMARK_UID.to_owned(), self.benchmark.uid.clone()),
        ])
    }

    /// Metadata of an object named `name` in the benchmark's namespace, labelled and owned
    /// by the benchmark (so deleting the benchmark deletes it).
    pub fn metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.benchmark.namespace.clone()),
            labels: Some(self.labels()),
            owner_references: Some(vec![OwnerReference {
                api_version: crate::API_VERSION.to_owned(),
                kind: self.benchmark.kind.clone(),
                name: self.benchmark.name.clone(),
                uid: self.benchmark.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        }
    }
}

/// `app.kubernetes.io/name`: the benchmark kind, lowercase (`iperf`).
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The names rendering derives from the benchmark and role names must be valid where
/// they are used; the CRD enforces this for benchmarks, but render is also called with
/// names from elsewhere (the CLI, tests), and an API server error at create time would
/// be far from the cause.
fn check_names(benchmark: &BenchmarkRef, plan: &Plan) -> Result<(), RenderError> {
    // The Service name must be a DNS-1035 label; it is also the pods' DNS subdomain and a
    // label value, both at most 63 characters.
    if !is_dns1035_label(&benchmark.name) {
        return Err(invalid(
            "metadata.name",
            format!(
                "{:?} must be a DNS label starting with a letter (at most 63 characters): it names the benchmark's Service",
                benchmark.name
            ),
        ));
    }
    if plan.roles.is_empty() {
        return Err(invalid("plan.roles", "the plan has no roles"));
    }
    let mut seen = Vec::new();
    for role in &plan.roles {
        if seen.contains(&role.name.as_str()) {
            return Err(invalid(
                "plan.roles",
                format!("duplicate role {:?}", role.name),
            ));
        }
        seen.push(&role.name);
        // Hostnames are `<role>-<index>`: DNS-1123 labels of at most 63 characters.
        let last = process_name(&role.name, role.replicas.saturating_sub(1));
        if !is_dns1123_label(&role.name) || !is_dns1123_label(&last) {
            return Err(invalid(
                "plan.roles",
                format!(
                    "role {:?}: pod hostnames such as {last:?} must be DNS labels of at most 63 characters",
                    role.name
                ),
            ));
        }
        // Pod names are `<benchmark>-<role>-<index>`, DNS subdomains of at most 253.
        let pod_name = format!("{}-{last}", benchmark.name);
        if pod_name.len() > 253 {
            return Err(invalid(
                "metadata.name",
                format!("pod name {pod_name:?} is longer than 253 characters"),
            ));
        }
    }
    Ok(())
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters (Kubernetes' DNS-1123 label).
pub(crate) fn is_dns1123_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// A DNS-1123 label that starts with a letter (Kubernetes' DNS-1035 label).
pub(crate) fn is_dns1035_label(text: &str) -> bool {
    is_dns1123_label(text) && text.as_bytes()[0].is_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for good in ["a", "iperf-1", "a1", &"a".repeat(63)] {
            assert!(is_dns1035_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
        assert!(is_dns1123_label("1a") && !is_dns1035_label("1a"));
    }
}
