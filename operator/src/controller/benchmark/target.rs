//! The benchmark being reconciled, dereferenced once: its identity, kind and the
//! installation's defaults.

use jiff::Timestamp;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use perfsweep_benchmarks::kinds::registry::KindInfo;

use super::kind::Benchmark;
use crate::controller::{Context, Error};

/// The benchmark being reconciled, dereferenced once.
pub(super) struct Target {
    pub(super) info: &'static KindInfo,
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) uid: String,
    pub(super) generation: Option<i64>,
    pub(super) resource_version: Option<String>,
    pub(super) created: Timestamp,
    /// The installation's defaults, applied to the spec before anything is built.
    pub(super) defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults,
    /// The uid of the set whose one NetworkPolicy admits this benchmark's pods (see
    /// `benchmarkset::SetPolicies`); `None`: the benchmark gets a policy of its own.
    pub(super) covering_set: Option<String>,
    /// Where its pods read their launch token when its set wrote it into a batch (see
    /// `benchmarkset::SetTokens`); `None`: the benchmark makes its own launch Secret.
    pub(super) token_source: Option<perfsweep_benchmarks::render::launch::TokenSource>,
}

impl Target {
    pub(super) fn of<K: Benchmark>(benchmark: &K, info: &'static KindInfo) -> Result<Self, Error> {
        let name = benchmark.name_any();
        let namespace = benchmark
            .namespace()
            .ok_or_else(|| Error::MissingNamespace {
                kind: info.kind,
                name: name.clone(),
            })?;
        let meta = benchmark.meta();
        Ok(Self {
            info,
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation,
            resource_version: meta.resource_version.clone(),
            created: meta
                .creation_timestamp
                .as_ref()
                .map_or_else(Timestamp::now, |time| time.0),
            name,
            namespace,
            defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults::default(),
            covering_set: None,
            token_source: None,
        })
    }

    /// `Kind ns/name`, for messages and backoff keys.
    pub(super) fn describe(&self) -> String {
        format!("{} {}/{}", self.info.kind, self.namespace, self.name)
    }

    pub(super) fn api<T>(&self, ctx: &Context) -> Api<T>
    where
        T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Api::namespaced(ctx.client.clone(), &self.namespace)
    }

    pub(super) fn owns(&self, object: &impl Resource) -> bool {
        object
            .owner_references()
            .iter()
            .any(|owner| owner.uid == self.uid)
    }
}
