//! What the benchmark engine needs of a kind's Rust type: its own module, so what reads
//! benchmarks (metrics) depends on it and not on the controllers.

use std::fmt::Debug;

use kube::Resource;
use kube::core::NamespaceResourceScope;
use kube::core::object::HasStatus;
use perfsweep_benchmarks::api::status::BenchmarkStatus;
use perfsweep_benchmarks::kinds::registry::BenchmarkKind;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What the engine needs of a kind's Rust type; every benchmark kind has it.
pub trait Benchmark:
    BenchmarkKind + Resource<DynamicType = (), Scope = NamespaceResourceScope> + Send + Sync + 'static
{
    /// The kind's structured result (its `BenchmarkKind::Output`).
    type Result: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;

    fn benchmark_status(&self) -> Option<&BenchmarkStatus<Self::Result>>;
}

impl<K, R> Benchmark for K
where
    K: BenchmarkKind<Output = R>
        + HasStatus<Status = BenchmarkStatus<R>>
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Send
        + Sync
        + 'static,
    R: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static,
{
    type Result = R;

    fn benchmark_status(&self) -> Option<&BenchmarkStatus<R>> {
        self.status()
    }
}
