//! Finding the address this agent's peers send benchmark traffic to.

use std::path::Path;
use std::time::Duration;

use perfsweep_benchmarks::execution::agent_env::{self, AddressSource};

/// The resolved data-plane address and, for Multus, the interface it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataAddress {
    pub ip: String,
    pub interface: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("{variable} is not set; the pod must expose it through the downward API")]
    MissingVariable { variable: String },
    #[error(
        "Multus reported no address for network {network} within {waited:?} (annotation k8s.v1.cni.cncf.io/network-status in {file}): is the NetworkAttachmentDefinition present and Multus installed?"
    )]
    NoMultusAddress {
        network: String,
        file: String,
        waited: Duration,
    },
}

const NETWORK_STATUS: &str = "k8s.v1.cni.cncf.io/network-status";

/// Resolves `source`, waiting up to `wait` for Multus to publish the attachment's status
/// (the annotation appears after the pod starts).
pub async fn resolve(source: &AddressSource, wait: Duration) -> Result<DataAddress, AddressError> {
    match source {
        AddressSource::Literal(ip) => Ok(DataAddress {
            ip: ip.clone(),
            interface: None,
        }),
        AddressSource::Env(variable) => std::env::var(variable)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|ip| DataAddress {
                ip,
                interface: None,
            })
            .ok_or_else(|| AddressError::MissingVariable {
                variable: variable.clone(),
            }),
        AddressSource::Multus {
            network,
            annotations_file,
        } => {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                if let Some(address) = read_multus(Path::new(annotations_file), network) {
                    return Ok(address);
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(AddressError::NoMultusAddress {
                        network: network.clone(),
                        file: annotations_file.clone(),
                        waited: wait,
                    });
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

fn read_multus(file: &Path, network: &str) -> Option<DataAddress> {
    let contents = std::fs::read_to_string(file).ok()?;
    let status = agent_env::annotation_from_file(&contents, NETWORK_STATUS)?;
    let (ip, interface) = agent_env::multus_address(&status, network)?;
    Some(DataAddress { ip, interface })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_the_attachment_address_once_multus_publishes_it() {
        let dir = std::env::temp_dir().join(format!("perfsweep-address-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("annotations");
        std::fs::write(&file, "other=\"x\"\n").unwrap();
        let source = AddressSource::Multus {
            network: "default/sriov".into(),
            annotations_file: file.display().to_string(),
        };
        let writer = {
            let file = file.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let status =
                    r#"[{"name":"default/sriov","interface":"net1","ips":["192.168.1.9"]}]"#;
                let line = format!(
                    "{NETWORK_STATUS}={}\n",
                    serde_json::to_string(status).unwrap()
                );
                std::fs::write(&file, line).unwrap();
            })
        };
        let address = resolve(&source, Duration::from_secs(5)).await.unwrap();
        writer.await.unwrap();
        assert_eq!(address.ip, "192.168.1.9");
        assert_eq!(address.interface.as_deref(), Some("net1"));
        std::fs::remove_dir_all(dir).ok();
    }

    #[tokio::test]
    async fn a_missing_attachment_is_a_clear_error() {
        let source = AddressSource::Multus {
            network: "nope".into(),
            annotations_file: "/nonexistent/annotations".into(),
        };
        let error = resolve(&source, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("network nope"), "{error}");
    }
}
