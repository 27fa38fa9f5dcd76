//! "Where and when" for a report someone else will read (a vendor hand-off): the dates,
//! the cluster and hosts, the hardware the node labels name, and the tool versions, all
//! from the records' own `environment`.

use std::collections::BTreeSet;

use crate::results::record::ResultRecord;

/// `(what, value)` rows; empty without records.
pub fn rows(records: &[ResultRecord]) -> Vec<(String, String)> {
    if records.is_empty() {
        return Vec::new();
    }
    let join = |set: BTreeSet<String>| -> String {
        if set.is_empty() {
            "-".to_owned()
        } else {
            set.into_iter().collect::<Vec<_>>().join(", ")
        }
    };
    let first = records
        .iter()
        .map(|r| r.started_at.as_str())
        .min()
        .unwrap_or("?");
    let last = records
        .iter()
        .map(|r| r.finished_at.as_str())
        .max()
        .unwrap_or("?");
    let hosts: BTreeSet<String> = records
        .iter()
        .flat_map(|r| r.environment.hosts.iter().cloned())
        .collect();
    // Node labels as `label=value` per distinct value: the GPU model, NIC, zone, …
    let hardware: BTreeSet<String> = records
        .iter()
        .flat_map(|r| r.environment.node_labels.values())
        .flat_map(|labels| labels.iter().map(|(k, v)| format!("{k}={v}")))
        .collect();
    let tools: BTreeSet<String> = records
        .iter()
        .flat_map(|r| r.environment.tool_versions.iter())
        .map(|(tool, version)| format!("{tool} {version}"))
        .collect();
    let cluster: BTreeSet<String> = records
        .iter()
        .map(|r| match &r.environment.kubernetes_version {
            Some(version) => format!("{} (Kubernetes {version})", r.backend),
            None => r.backend.clone(),
        })
        .collect();
    let networks: BTreeSet<String> = records
        .iter()
        .filter_map(|r| r.environment.network.clone())
        .collect();
    let versions: BTreeSet<String> = records
        .iter()
        .map(|r| r.environment.perfsweep_version.clone())
        .collect();
    vec![
        ("date".to_owned(), format!("{first} to {last}")),
        ("cluster / backend".to_owned(), join(cluster)),
        (format!("hosts ({})", hosts.len()), join(hosts)),
        ("hardware (node labels)".to_owned(), join(hardware)),
        ("network".to_owned(), join(networks)),
        ("tool versions".to_owned(), join(tools)),
        ("perfsweep version".to_owned(), join(versions)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates_hosts_hardware_and_versions_come_from_the_records() {
        let record = |host: &str, start: &str, end: &str| -> ResultRecord {
            serde_json::from_value(json!({
                "schemaVersion": crate::results::record::SCHEMA_VERSION,
                "runId": "r", "benchmark": {"kind": "IPerf", "name": host},
                "workloadSpecDigest": "d", "spec": {}, "backend": "kubernetes",
                "environment": {"perfsweepVersion": "0.1.0", "hosts": [host],
                    "kubernetesVersion": "v1.31.2",
                    "nodeLabels": {host: {"nvidia.com/gpu.product": "H100"}},
                    "toolVersions": {"iperf3": "3.12"}},
                "startedAt": start, "finishedAt": end,
                "outcome": {"status": "failed", "reason": "x", "message": "y"},
            }))
            .expect("a record")
        };
        let rows = rows(&[
            record("gpu-1", "2026-11-25T10:00:00Z", "2026-11-25T10:01:00Z"),
            record("gpu-2", "2026-11-25T09:00:00Z", "2026-11-25T09:30:00Z"),
        ]);
        let get = |what: &str| {
            rows.iter()
                .find(|(k, _)| k.starts_with(what))
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        assert_eq!(get("date"), "2026-11-25T09:00:00Z to 2026-11-25T10:01:00Z");
        assert_eq!(get("hosts"), "gpu-1, gpu-2");
        assert_eq!(get("hardware"), "nvidia.com/gpu.product=H100");
        assert_eq!(get("tool versions"), "iperf3 3.12");
        assert_eq!(get("cluster"), "kubernetes (Kubernetes v1.31.2)");
        assert!(super::rows(&[]).is_empty());
    }
}
