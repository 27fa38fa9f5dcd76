//! Least privilege for benchmark pods.
//!
//! Every pod runs as the unprivileged user 65532 (the distroless `nonroot` user) with
//! the runtime's default seccomp profile, no privilege escalation, a read-only root
//! filesystem and no capabilities at all — enough for iperf3, fio on a volume, MPI over
//! TCP and the agent itself.
//!
//! What needs more:
//! - `NET_ADMIN`, only when `mtu` is set: the agent runs `ip link set dev … mtu` inside
//!   the pod's own network namespace (never the host's: `mtu` is refused with
//!   hostNetwork).
//! - The capabilities a role's plan lists, e.g. `IPC_LOCK` for RDMA tools, which pin
//!   their buffers in memory (`ibv_reg_mr`) beyond the default `RLIMIT_MEMLOCK`.
//!
//! A container that is granted any capability runs as root (user 0), still with every
//! other capability dropped, no privilege escalation and a read-only root filesystem.
//! Non-root is not possible there: Kubernetes sets no ambient capabilities
//! (kubernetes/kubernetes#56374), so a non-root process loses its added capabilities
//! when it executes another program, and the capability is needed by the program the
//! agent executes (`ip`, `ib_write_bw`), not by the agent. Such pods need a namespace
//! whose Pod Security level is `privileged` (as do hostNetwork pods); all others meet
//! the `restricted` level.

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext,
};

use crate::execution::plan::Role;

use super::{RenderError, invalid};

/// The user and group benchmark processes run as.
pub const NON_ROOT_ID: i64 = 65532;
/// Added when the agent sets the MTU.
pub const MTU_CAPABILITY: &str = "NET_ADMIN";

/// The pod-wide context: non-root, owning the pod's volumes through `fsGroup`.
pub fn pod_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(NON_ROOT_ID),
        run_as_group: Some(NON_ROOT_ID),
        fs_group: Some(NON_ROOT_ID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}

/// The capabilities the container of `role` is granted, normalized (`IPC_LOCK`, not
/// `CAP_IPC_LOCK`), without duplicates.
pub fn capabilities(role: &Role, sets_mtu: bool) -> Result<Vec<String>, RenderError> {
    let mut added: Vec<String> = Vec::new();
    let requested = role.capabilities.iter().map(String::as_str);
    for capability in requested.chain(sets_mtu.then_some(MTU_CAPABILITY)) {
        let name = capability.trim().to_ascii_uppercase();
        let name = name.strip_prefix("CAP_").unwrap_or(&name).to_owned();
        let path = format!("plan.roles[{}].capabilities", role.name);
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(invalid(path, format!("{capability:?} is not a capability")));
        }
        if name == "SYS_ADMIN" {
            // Kubernetes refuses it with allowPrivilegeEscalation: false, and it is
            // close to full root on the node; no benchmark needs it.
            return Err(invalid(path, "perfsweep does not grant SYS_ADMIN"));
        }
        if !added.contains(&name) {
            added.push(name);
        }
    }
    Ok(added)
}

/// The container's context, given the capabilities it is granted.
pub fn container_context(added: &[String]) -> SecurityContext {
    let needs_root = !added.is_empty();
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        privileged: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: needs_root.then(|| added.to_vec()),
        }),
        // See the module comment: added capabilities reach the tool only as root.
        run_as_non_root: needs_root.then_some(false),
        run_as_user: needs_root.then_some(0),
        ..SecurityContext::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{Command, Lifetime, Readiness};

    fn role(capabilities: &[&str]) -> Role {
        Role {
            name: "r".into(),
            replicas: 1,
            setup: Vec::new(),
            command: Command {
                program: "true".into(),
                package: "coreutils".into(),
                args: Vec::new(),
            },
            files: Vec::new(),
            ports: Vec::new(),
            ready_when: Readiness::Started,
            waits_for: Vec::new(),
            lifetime: Lifetime::Serve,
            uses_devices: true,
            capabilities: capabilities
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            env: std::collections::BTreeMap::default(),
            secret_env: Vec::new(),
            volumes: Vec::new(),
        }
    }

    #[test]
    fn no_capabilities_means_non_root() {
        let added = capabilities(&role(&[]), false).expect("valid");
        assert!(added.is_empty());
        let context = container_context(&added);
        assert_eq!(context.run_as_user, None, "inherits the pod's 65532");
        assert_eq!(context.run_as_non_root, None, "inherits the pod's true");
        let caps = context.capabilities.expect("capabilities");
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(caps.add, None);
    }

    #[test]
    fn capabilities_are_normalized_and_need_root() {
        let added = capabilities(&role(&["CAP_IPC_LOCK", "net_admin"]), true).expect("valid");
        assert_eq!(added, ["IPC_LOCK", "NET_ADMIN"]);
        let context = container_context(&added);
        assert_eq!(context.run_as_user, Some(0));
        assert_eq!(context.run_as_non_root, Some(false));
        assert_eq!(context.allow_privilege_escalation, Some(false));
        assert_eq!(context.read_only_root_filesystem, Some(true));
    }

    #[test]
    fn sys_admin_and_garbage_are_refused() {
        assert!(capabilities(&role(&["SYS_ADMIN"]), false).is_err());
        assert!(capabilities(&role(&["ipc lock"]), false).is_err());
        assert!(capabilities(&role(&[""]), false).is_err());
    }
}
