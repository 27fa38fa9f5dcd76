//! Limits on the names of perfsweep's objects, which the CRDs' rules, set expansion and
//! the controllers all enforce.

/// The longest benchmark name: pods are named `<name>-<role>-<index>` and a pod's
/// hostname (used for peer discovery by DNS) is limited to 63 characters.
pub const MAX_BENCHMARK_NAME_LEN: usize = 50;

/// The longest BenchmarkSet name: children are named `<set>-<case id>-<repetition>`
/// (case ids are 10 hex digits, repetitions at most 3 digits), and a child's name is at
/// most [`MAX_BENCHMARK_NAME_LEN`].
pub const MAX_SET_NAME_LEN: usize = MAX_BENCHMARK_NAME_LEN - 15;
