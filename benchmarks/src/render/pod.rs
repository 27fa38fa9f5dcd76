//! One pod per process of the plan, running `perfsweep agent` with the environment of
//! [`crate::execution::agent_env`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSpec, SecretKeySelector, Volume,
    VolumeMount,
};

use crate::api::labels;
use crate::api::volcano;
use crate::execution::agent_env::{self, DEFAULT_CONTROL_PORT, PeerEndpoints};
use crate::execution::plan::{Role, process_name};
use crate::kinds::common::Scheduler;

use super::network::{ANNOTATIONS_FILE, POD_IP_ENV, PODINFO_DIR, PODINFO_VOLUME};
use super::placement::{self, SPREAD_LABEL};
use super::volumes::{TMPDIR, WORKDIR};
use super::{Context, RenderError, invalid, resources, security, service};

/// The agent's command in the benchmark images.
pub const AGENT_COMMAND: &[&str] = &["perfsweep", "agent"];
pub const CONTAINER_NAME: &str = "agent";
/// Where the kubelet reads the termination message from (its default path).
pub const TERMINATION_LOG: &str = "/dev/termination-log";
/// Seconds a pod may outlive the benchmark's timeout. The operator fails the benchmark
/// at its timeout; the pods' own deadline is the backstop if the operator is down, so
/// nothing runs forever, and the margin keeps it from pre-empting the operator's
/// clearer reason.
pub const DEADLINE_MARGIN_SECONDS: u64 = 60;

/// The pod of replica `index` of `role`.
pub(crate) fn render(context: &Context, role: &Role, index: u32) -> Result<Pod, RenderError> {
    let benchmark = &context.benchmark.name;
    let hostname = process_name(&role.name, index);
    let mut placement = placement::for_pod(context.common, benchmark, role, index);
    if let Some(changes) = context.plan.pod_overrides.get(&role.name) {
        if !changes.node_selector.is_empty() {
            placement
                .node_selector
                .get_or_insert_with(BTreeMap::new)
                .extend(changes.node_selector.clone());
        }
        if !changes.tolerations.is_empty() {
            placement
                .tolerations
                .get_or_insert_with(Vec::new)
                .extend(changes.tolerations.iter().cloned());
        }
        if let Some(affinity) = &changes.affinity {
            placement.affinity = Some(affinity.clone());
        }
    }

    let mut metadata = context.metadata(format!("{benchmark}-{hostname}"));
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(labels::ROLE.to_owned(), role.name.clone());
    if placement.spread {
        labels.insert(SPREAD_LABEL.to_owned(), benchmark.clone());
    }
    let mut annotations = context.network.annotations.clone();
    if context.scheduler == Scheduler::Volcano {
        annotations.insert(volcano::GROUP_NAME_ANNOTATION.to_owned(), benchmark.clone());
        annotations.insert(volcano::TASK_SPEC_ANNOTATION.to_owned(), role.name.clone());
    }
    metadata.annotations = (!annotations.is_empty()).then_some(annotations);

    let timeout = context.plan.timeout_seconds.max(1);
    let deadline = i64::try_from(timeout.saturating_add(DEADLINE_MARGIN_SECONDS))
        .map_err(|_| invalid("spec.timeout", "is too long"))?;
    let host_network = context.network.host_network;

    Ok(Pod {
        metadata,
        spec: Some(PodSpec {
            hostname: Some(hostname),
            subdomain: Some(benchmark.clone()),
            restart_policy: Some("Never".to_owned()),
            active_deadline_seconds: Some(deadline),
            scheduler_name: (context.scheduler == Scheduler::Volcano)
                .then(|| volcano::SCHEDULER_NAME.to_owned()),
            priority_class_name: context.common.priority_class_name.clone(),
            host_network: host_network.then_some(true),
            // Without it a hostNetwork pod resolves names with the node's resolver and
            // cannot find its peers' Service records.
            dns_policy: host_network.then(|| "ClusterFirstWithHostNet".to_owned()),
            node_selector: placement.node_selector,
            tolerations: placement.tolerations,
            affinity: placement.affinity,
            security_context: Some(security::pod_context()),
            // The agent never calls the Kubernetes API.
            automount_service_account_token: Some(false),
            // The agent reads only its own variables; don't add one set per Service.
            enable_service_links: Some(false),
            containers: vec![container(context, role, index)?],
            volumes: Some(volumes(context, role, index)),
            ..PodSpec::default()
        }),
        status: None,
    })
}

fn container(context: &Context, role: &Role, index: u32) -> Result<Container, RenderError> {
    let common = context.common;
    let added = security::capabilities(role, common.mtu.is_some())?;
    let mut ports = vec![ContainerPort {
        name: Some(super::ports::CONTROL_PORT_NAME.to_owned()),
        container_port: i32::from(DEFAULT_CONTROL_PORT),
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }];
    // Declared so the scheduler sees them: under hostNetwork they become host ports
    // (the API server defaults hostPort to containerPort), which keeps two pods that
    // would bind the same node port off one node.
    for port in &role.ports {
        let name = context
            .ports
            .name_of(port.port, port.protocol)
            .map(str::to_owned);
        let declared = ContainerPort {
            name,
            container_port: i32::from(port.port),
            protocol: Some(service::protocol(port.protocol).to_owned()),
            ..ContainerPort::default()
        };
        if !ports.contains(&declared) {
            ports.push(declared);
        }
    }
    let mut mounts = vec![mount("work", WORKDIR, false), mount("tmp", TMPDIR, false)];
    if context.network.needs_podinfo {
        mounts.push(mount(PODINFO_VOLUME, PODINFO_DIR, true));
    }
    mounts.extend(super::volumes::mounts(role));
    let changes = context.plan.pod_overrides.get(&role.name);
    let resources = match changes.and_then(|c| c.resources.as_ref()) {
        Some(own) => resources::for_role(Some(own), role)
            .map_err(|e| invalid("spec.podOverride.resources", e))?,
        None => resources::for_role(common.resources.as_ref(), role)?,
    };
    Ok(Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(
            changes
                .and_then(|c| c.image.clone())
                .or_else(|| common.image.clone())
                .unwrap_or_else(|| context.kind.default_image()),
        ),
        // Unset keeps Kubernetes' default (Always for `:latest`, else IfNotPresent).
        image_pull_policy: common.image_pull_policy.map(|p| p.as_str().to_owned()),
        command: Some(
            AGENT_COMMAND
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
        ),
        env: Some(env(context, role, index)?),
        ports: Some(ports),
        resources: Some(resources),
        security_context: Some(security::container_context(&added)),
        volume_mounts: Some(mounts),
        termination_message_path: Some(TERMINATION_LOG.to_owned()),
        // The agent writes a summary there; if it dies before, the log tail explains.
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    })
}

fn env(context: &Context, role: &Role, index: u32) -> Result<Vec<EnvVar>, RenderError> {
    let peers: PeerEndpoints = context
        .plan
        .roles
        .iter()
        .map(|r| {
            let endpoints = (0..r.replicas)
                .map(|i| {
                    format!(
                        "{}.{}:{DEFAULT_CONTROL_PORT}",
                        process_name(&r.name, i),
                        context.benchmark.name
                    )
                })
                .collect();
            (r.name.clone(), endpoints)
        })
        .collect();
    let pod_ip = agent_env::AddressSource::Env(POD_IP_ENV.to_owned());
    let site = agent_env::Site {
        peers: &peers,
        control_port: DEFAULT_CONTROL_PORT,
        address: &context.network.address,
        address_variable: (context.network.address == pod_ip)
            .then_some((POD_IP_ENV, agent_env::EnvValue::PodField("status.podIP"))),
        workdir: WORKDIR.to_owned(),
        volumes_dir: None,
        host: agent_env::EnvValue::PodField("spec.nodeName"),
        mtu: context.common.mtu,
    };
    let mut env: Vec<EnvVar> = agent_env::environment(context.plan, &role.name, index, &site)
        .map_err(|e| invalid("plan", e))?
        .into_iter()
        .map(|(name, source)| match source {
            agent_env::EnvValue::Text(text) => value(&name, text),
            agent_env::EnvValue::PodField(path) => field(&name, path),
        })
        .collect();
    env.push(super::launch::token_env(&context.benchmark.name));
    // The kubelet resolves these; the agent's tool inherits them.
    env.extend(role.secret_env.iter().map(|secret| EnvVar {
        name: secret.name.clone(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.secret.clone(),
                key: secret.key.clone(),
                optional: secret.optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }));
    env.extend([
        value(agent_env::TERMINATION_LOG, TERMINATION_LOG.to_owned()),
        value("TMPDIR", TMPDIR.to_owned()),
        value("HOME", TMPDIR.to_owned()),
    ]);
    if let Some(changes) = context.plan.pod_overrides.get(&role.name) {
        env.extend(changes.env.iter().cloned());
    }
    Ok(env)
}

fn volumes(context: &Context, role: &Role, index: u32) -> Vec<Volume> {
    let empty_dir = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mut volumes = vec![empty_dir("work"), empty_dir("tmp")];
    if context.network.needs_podinfo {
        // Multus's network-status annotation, with the attachment's address, appears
        // after the pod starts; the kubelet refreshes this file, an env var it would not.
        let file = ANNOTATIONS_FILE
            .strip_prefix(PODINFO_DIR)
            .unwrap_or(ANNOTATIONS_FILE)
            .trim_start_matches('/');
        volumes.push(Volume {
            name: PODINFO_VOLUME.to_owned(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![DownwardAPIVolumeFile {
                    path: file.to_owned(),
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: "metadata.annotations".to_owned(),
                    }),
                    ..DownwardAPIVolumeFile::default()
                }]),
                ..DownwardAPIVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    volumes.extend(super::volumes::pod_volumes(context, role, index));
    volumes
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn value(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value),
        value_from: None,
    }
}

/// A variable the downward API fills from a field of the pod.
fn field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: path.to_owned(),
            }),
            ..EnvVarSource::default()
        }),
    }
}
