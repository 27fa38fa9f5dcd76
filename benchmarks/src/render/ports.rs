//! Port names, chosen once per plan so a port has the same name on the Service and on
//! every container that exposes it.

use crate::execution::agent_env::DEFAULT_CONTROL_PORT;
use crate::execution::plan::{Plan, PortProtocol};

use super::{RenderError, invalid};

/// The name of the agent's control port.
pub const CONTROL_PORT_NAME: &str = "control";

/// One distinct (port, protocol) of a plan and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPort {
    pub name: String,
    pub port: u16,
    pub protocol: PortProtocol,
}

/// Every distinct port of a plan, the control port first, each with a unique name that
/// Kubernetes accepts for container and Service ports (an IANA service name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortNames(Vec<NamedPort>);

impl PortNames {
    pub fn for_plan(plan: &Plan) -> Result<Self, RenderError> {
        let mut named = vec![NamedPort {
            name: CONTROL_PORT_NAME.to_owned(),
            port: DEFAULT_CONTROL_PORT,
            protocol: PortProtocol::TCP,
        }];
        for role in &plan.roles {
            for port in &role.ports {
                if port.port == 0 {
                    return Err(invalid(
                        format!("plan.roles[{}].ports", role.name),
                        format!("port {:?} has number 0", port.name),
                    ));
                }
                if port.port == DEFAULT_CONTROL_PORT && port.protocol == PortProtocol::TCP {
                    // The agent listens there in every pod; the tool could not bind it.
                    return Err(invalid(
                        format!("plan.roles[{}].ports", role.name),
                        format!("TCP port {DEFAULT_CONTROL_PORT} is the agent's control port"),
                    ));
                }
                if named
                    .iter()
                    .any(|p| p.port == port.port && p.protocol == port.protocol)
                {
                    continue;
                }
                let name = unique_name(&named, &port.name, port.port, port.protocol);
                named.push(NamedPort {
                    name,
                    port: port.port,
                    protocol: port.protocol,
                });
            }
        }
        Ok(Self(named))
    }

    /// Every distinct port, the control port first.
    pub fn all(&self) -> &[NamedPort] {
        &self.0
    }

    /// The name chosen for (port, protocol), if the plan has it.
    pub fn name_of(&self, port: u16, protocol: PortProtocol) -> Option<&str> {
        self.0
            .iter()
            .find(|p| p.port == port && p.protocol == protocol)
            .map(|p| p.name.as_str())
    }
}

/// `wanted` made into a valid IANA service name, or `tcp-5201` style when that is
/// impossible or already taken.
fn unique_name(taken: &[NamedPort], wanted: &str, port: u16, protocol: PortProtocol) -> String {
    let free = |name: &str| is_iana_svc_name(name) && taken.iter().all(|p| p.name != name);
    let sanitized = sanitize(wanted);
    if free(&sanitized) {
        return sanitized;
    }
    let proto = match protocol {
        PortProtocol::TCP => "tcp",
        PortProtocol::UDP => "udp",
    };
    let fallback = format!("{proto}-{port}");
    if free(&fallback) {
        return fallback;
    }
    // Only reachable when a plan names another port literally `tcp-<this port>`; a plan
    // has finitely many names, so the search ends.
    #[allow(clippy::maybe_infinite_iter)]
    (2u32..)
        .map(|n| format!("{proto}-{port}-{n}"))
        .find(|name| free(name))
        .unwrap_or(fallback)
}

/// Lowercase, other characters as `-`, no repeated or edge hyphens, at most 15 long.
fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(15);
    out.trim_end_matches('-').to_owned()
}

/// Kubernetes' `IsValidPortName`: at most 15 characters of `[a-z0-9-]`, at least one
/// letter, no leading, trailing or doubled hyphen.
pub fn is_iana_svc_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{Command, Lifetime, Port, Readiness, Role};

    fn role(name: &str, ports: Vec<(&str, u16, PortProtocol)>) -> Role {
        Role {
            name: name.into(),
            replicas: 1,
            setup: Vec::new(),
            command: Command {
                program: "true".into(),
                package: "coreutils".into(),
                args: Vec::new(),
            },
            files: Vec::new(),
            ports: ports
                .into_iter()
                .map(|(name, port, protocol)| Port {
                    name: name.into(),
                    port,
                    protocol,
                })
                .collect(),
            ready_when: Readiness::Started,
            waits_for: Vec::new(),
            lifetime: Lifetime::Serve,
            uses_devices: false,
            capabilities: Vec::new(),
            env: std::collections::BTreeMap::default(),
            secret_env: Vec::new(),
            volumes: Vec::new(),
        }
    }

    fn plan(roles: Vec<Role>) -> Plan {
        Plan {
            kind: "IPerf".into(),
            roles,
            result_role: "a".into(),
            timeout_seconds: 60,
            pod_overrides: std::collections::BTreeMap::default(),
        }
    }

    #[test]
    fn ports_are_deduplicated_and_named_validly() {
        use PortProtocol::{TCP, UDP};
        let names = PortNames::for_plan(&plan(vec![
            role("a", vec![("iperf", 5201, TCP), ("iperf-udp", 5201, UDP)]),
            // Same port again under another name: one entry, the first name.
            role(
                "b",
                vec![("other", 5201, TCP), ("Very_Long_Port_Name_X", 9000, TCP)],
            ),
            // A name already taken by another port, and one with no letter.
            role("c", vec![("iperf", 9001, TCP), ("1234", 9002, UDP)]),
        ]))
        .expect("valid plan");
        let got: Vec<(&str, u16)> = names
            .all()
            .iter()
            .map(|p| (p.name.as_str(), p.port))
            .collect();
        assert_eq!(
            got,
            [
                ("control", 7470),
                ("iperf", 5201),
                ("iperf-udp", 5201),
                ("very-long-port", 9000),
                ("tcp-9001", 9001),
                ("udp-9002", 9002),
            ]
        );
        assert!(names.all().iter().all(|p| is_iana_svc_name(&p.name)));
        assert_eq!(names.name_of(5201, UDP), Some("iperf-udp"));
    }

    #[test]
    fn the_control_port_is_reserved() {
        let error = PortNames::for_plan(&plan(vec![role(
            "a",
            vec![("x", DEFAULT_CONTROL_PORT, PortProtocol::TCP)],
        )]))
        .expect_err("conflicts with the agent");
        assert!(error.to_string().contains("control port"), "{error}");
    }

    #[test]
    fn iana_names() {
        for good in ["control", "iperf-udp", "a1", "abcdefghijklmno"] {
            assert!(is_iana_svc_name(good), "{good}");
        }
        for bad in [
            "",
            "123",
            "-a",
            "a-",
            "a--b",
            "A",
            "abcdefghijklmnop",
            "a_b",
        ] {
            assert!(!is_iana_svc_name(bad), "{bad}");
        }
    }
}
