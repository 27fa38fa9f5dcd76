//! The headless Service that gives every pod a DNS name, `<role>-<index>.<benchmark>`,
//! through the pods' `hostname` and `subdomain`.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};

use crate::execution::plan::PortProtocol;

use super::Context;

/// The Service named after the benchmark, selecting its pods.
pub(crate) fn render(context: &Context) -> Service {
    let ports = context
        .ports
        .all()
        .iter()
        .map(|port| ServicePort {
            name: Some(port.name.clone()),
            port: i32::from(port.port),
            protocol: Some(protocol(port.protocol).to_owned()),
            ..ServicePort::default()
        })
        .collect();
    Service {
        metadata: context.metadata(context.benchmark.name.clone()),
        spec: Some(ServiceSpec {
            // Headless: DNS answers with the pods' own addresses, no virtual IP or proxying.
            cluster_ip: Some("None".to_owned()),
            // Peers resolve each other before they are ready: agents wait for their
            // peers' readiness themselves, over the control port.
            publish_not_ready_addresses: Some(true),
            selector: Some(context.selector()),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

pub(crate) fn protocol(protocol: PortProtocol) -> &'static str {
    match protocol {
        PortProtocol::TCP => "TCP",
        PortProtocol::UDP => "UDP",
    }
}
