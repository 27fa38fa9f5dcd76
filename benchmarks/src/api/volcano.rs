//! Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`), the third-party type perfsweep
//! writes, typed after Volcano's published CRD schema (volcano-sh/volcano `ed72c7c81`).
//! perfsweep never installs this CRD; it only creates PodGroups.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A gang of pods that Volcano schedules together: none starts until `minMember` can.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    plural = "podgroups",
    namespaced,
    status = "PodGroupStatus",
    derive = "PartialEq",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// Pods that must be schedulable together before any is bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    /// Resources the whole gang needs before it is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Minimum members per task (role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<BTreeMap<String, i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// What Volcano reports about a PodGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Pending, Running, Unknown, Inqueue or Completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodGroupCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

/// A PodGroup condition (e.g. `Unschedulable` with Volcano's reason).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_id: Option<String>,
}

/// The pod annotation that puts a pod in a PodGroup.
pub const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// The scheduler name of Volcano.
pub const SCHEDULER_NAME: &str = "volcano";
/// The pod annotation that names a pod's task (role) within its PodGroup. Volcano counts
/// pods per task by it (annotation, then label) when it checks `minTaskMember`: a
/// PodGroup with `minTaskMember` whose pods lack it is never valid, so never scheduled
/// (`getTaskRole` and `CheckTaskValid` in `pkg/scheduler/api/job_info.go`).
pub const TASK_SPEC_ANNOTATION: &str = "volcano.sh/task-spec";
