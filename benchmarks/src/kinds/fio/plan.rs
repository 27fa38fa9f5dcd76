//! The Fio plan: `numWorkers` workers run `fio --server` on their volume, one client
//! drives them all with the same job and collects fio's JSON (`client_stats`, one entry
//! per worker and job plus fio's own `All clients` aggregate).
//!
//! - The client sends the job through fio's host list (`--client=FILE`, one
//!   `address,port` per line): fio attaches job files to the `--client` before them, so
//!   one `--client` per worker would need the job file repeated after each; the list
//!   sends the one job to every server.
//! - The job's `directory` is the workers' volume (`{volume:data}`): fio resolves it on
//!   each server, and prefixes file names with the server's address, so workers that
//!   share one ReadWriteMany claim do not collide.
//! - `prefill` is a setup step of the client: a sequential write pass of the same job
//!   name, `numjobs`, `nrfiles` and `size` (so the same files) on every worker, before
//!   the measured job. Its output is logged, not parsed.

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use std::collections::BTreeMap;

use super::FioSpec;
use crate::execution::plan::{
    Arg, ClaimScope, Command, Lifetime, Plan, PlanFile, Port, PortProtocol, Readiness, Role,
    RoleVolume, VolumeSource,
};

const PACKAGE: &str = "fio";
/// The workers' volume, where fio's files go.
pub const VOLUME: &str = "data";
/// Where the workers mount it in their pods.
pub const MOUNT_PATH: &str = "/data";
/// fio's host list: one `address,port` line per worker.
pub const HOSTS_FILE: &str = "fio-hosts.list";
/// The measured job.
pub const JOB_FILE: &str = "job.fio";
/// The write pass `prefill` runs first.
pub const PREFILL_FILE: &str = "prefill.fio";
/// The job section's name (fio names files `<job>.<jobnum>.<filenum>`; the prefill pass
/// uses the same name so that it writes the files the measured job reads).
const JOB_NAME: &str = "perfsweep";

pub fn plan(spec: &FioSpec) -> Plan {
    let volume = RoleVolume {
        name: VOLUME.into(),
        mount_path: MOUNT_PATH.into(),
        source: volume_source(spec),
    };
    let worker = Role {
        name: "worker".into(),
        replicas: spec.num_workers,
        setup: Vec::new(),
        command: Command {
            program: "fio".into(),
            package: PACKAGE.into(),
            // `{self}`: bind the data address only, so that several workers on one
            // machine (the local backend) can all use the same port.
            args: vec![Arg::Literal(format!("--server={{self}},{}", spec.fio_port))],
        },
        files: Vec::new(),
        ports: vec![Port {
            name: "fio".into(),
            port: spec.fio_port,
            protocol: PortProtocol::TCP,
        }],
        ready_when: Readiness::Listening(spec.fio_port),
        waits_for: Vec::new(),
        lifetime: Lifetime::Serve,
        uses_devices: true,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: vec![volume],
    };

    let hosts: String = (0..spec.num_workers)
        .map(|i| format!("{{peer:worker:{i}}},{}\n", spec.fio_port))
        .collect();
    let mut files = vec![
        PlanFile {
            path: HOSTS_FILE.into(),
            contents: hosts,
        },
        PlanFile {
            path: JOB_FILE.into(),
            contents: job_file(spec),
        },
    ];
    let mut setup = Vec::new();
    if spec.prefill && spec.job_file.is_none() {
        files.push(PlanFile {
            path: PREFILL_FILE.into(),
            contents: prefill_file(spec),
        });
        setup.push(Command {
            program: "fio".into(),
            package: PACKAGE.into(),
            args: vec![
                Arg::Literal(format!("--client={HOSTS_FILE}")),
                Arg::lit(PREFILL_FILE),
            ],
        });
    }
    let client = Role {
        name: "client".into(),
        replicas: 1,
        setup,
        command: Command {
            program: "fio".into(),
            package: PACKAGE.into(),
            args: vec![
                Arg::lit("--output-format=json"),
                Arg::Literal(format!("--client={HOSTS_FILE}")),
                Arg::lit(JOB_FILE),
            ],
        },
        files,
        ports: Vec::new(),
        ready_when: Readiness::Started,
        waits_for: vec!["worker".into()],
        lifetime: Lifetime::RunToCompletion,
        // The client only sends jobs and collects statistics.
        uses_devices: false,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    Plan {
        kind: "Fio".into(),
        roles: vec![worker, client],
        result_role: "client".into(),
        timeout_seconds: 0,
        pod_overrides: BTreeMap::default(),
    }
}

/// One claim per worker, unless the claim can be shared (ReadWriteMany); an existing
/// claim as is; otherwise the node's ephemeral storage.
fn volume_source(spec: &FioSpec) -> VolumeSource {
    if let Some(template) = &spec.volume_claim_template {
        return VolumeSource::NewClaim {
            spec: Box::new(template.clone()),
            scope: if shared(template) {
                ClaimScope::Shared
            } else {
                ClaimScope::PerReplica
            },
        };
    }
    match &spec.existing_claim {
        Some(name) => VolumeSource::ExistingClaim {
            claim_name: name.clone(),
        },
        None => VolumeSource::Scratch,
    }
}

fn shared(template: &PersistentVolumeClaimSpec) -> bool {
    template
        .access_modes
        .iter()
        .flatten()
        .any(|m| m == "ReadWriteMany")
}

fn directory_line() -> String {
    format!("directory={{volume:{VOLUME}}}\n")
}

/// The measured job, from the spec's fields (or its `jobFile`, with `directory` forced).
pub fn job_file(spec: &FioSpec) -> String {
    if let Some(raw) = &spec.job_file {
        return force_directory(raw);
    }
    let mut global = common_options(spec);
    global.push(("rw", spec.rw.as_fio().to_owned()));
    global.push(("bs", spec.bs.clone()));
    if matches!(spec.rw, super::ReadWrite::Rw | super::ReadWrite::RandRw) {
        global.push(("rwmixread", spec.rwmixread.to_string()));
    }
    global.push(("percentage_random", spec.percentage_random.to_string()));
    global.push(("runtime", spec.runtime.clone()));
    global.push(("time_based", "1".into()));
    if let Some(ramp) = &spec.ramp_time {
        global.push(("ramp_time", ramp.clone()));
    }
    if spec.group_reporting {
        global.push(("group_reporting", "1".into()));
    }
    let percentiles: Vec<String> = spec
        .percentiles
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    global.push(("percentile_list", percentiles.join(":")));
    render(&global)
}

/// A sequential write of the same files as the measured job.
pub fn prefill_file(spec: &FioSpec) -> String {
    let mut global = common_options(spec);
    global.push(("rw", "write".into()));
    global.push(("bs", "1M".into()));
    render(&global)
}

/// What the measured job and the prefill pass share: which files, how.
fn common_options(spec: &FioSpec) -> Vec<(&'static str, String)> {
    let mut options = vec![
        ("ioengine", serde_plain(spec.ioengine)),
        ("iodepth", spec.iodepth.to_string()),
        ("direct", spec.direct.to_string()),
        ("size", spec.size.clone()),
        ("nrfiles", spec.nrfiles.to_string()),
        ("numjobs", spec.num_jobs.to_string()),
    ];
    if spec.thread {
        options.push(("thread", "1".into()));
    }
    options
}

fn render(global: &[(&str, String)]) -> String {
    let mut text = String::from("[global]\n");
    for (key, value) in global {
        text.push_str(&format!("{key}={value}\n"));
    }
    text.push_str(&directory_line());
    text.push_str(&format!("\n[{JOB_NAME}]\n"));
    text
}

/// The ioengine as fio spells it (the serde name, e.g. `io_uring`).
fn serde_plain(engine: super::IoEngine) -> String {
    serde_json::to_value(engine)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{engine:?}").to_lowercase())
}

/// A user's job file with every section's `directory` set to the workers' volume: any
/// `directory=` line is dropped and one is added at the end of every section (where it
/// wins over the section's other lines and `[global]`).
pub fn force_directory(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 64);
    let mut in_section = false;
    for line in raw.lines() {
        let trimmed = line.trim();
        let is_header = trimmed.starts_with('[') && trimmed.ends_with(']');
        if is_header && in_section {
            out.push_str(&directory_line());
        }
        if is_header {
            in_section = true;
        }
        let key = trimmed.split('=').next().unwrap_or_default().trim();
        if key == "directory" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if in_section {
        out.push_str(&directory_line());
    } else {
        // No section at all: fio would run nothing; keep the directory for the error.
        out.insert_str(0, &format!("[global]\n{}", directory_line()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, fill, resolve_args};

    fn spec(json: serde_json::Value) -> FioSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    fn peers() -> PeerAddresses {
        let mut peers = PeerAddresses::from([(
            "worker".to_owned(),
            vec!["10.0.0.1".to_owned(), "10.0.0.2".to_owned()],
        )]);
        peers.insert("self".into(), vec!["10.0.0.9".into()]);
        peers
    }

    #[test]
    fn workers_serve_and_the_client_drives_them_all() {
        let spec = spec(serde_json::json!({"numWorkers": 2, "fioPort": 9000}));
        let plan = plan(&spec);
        let worker = plan.role("worker").expect("worker role");
        assert_eq!(worker.replicas, 2);
        assert_eq!(worker.lifetime, Lifetime::Serve);
        assert_eq!(worker.ready_when, Readiness::Listening(9000));
        assert!(worker.uses_devices);
        let mut peers = peers();
        peers.extend(plan.volume_paths(None));
        assert_eq!(
            resolve_args(&worker.command.args, &peers).expect("resolvable"),
            ["--server=10.0.0.9,9000"]
        );
        assert_eq!(worker.volumes[0].source, VolumeSource::Scratch);

        let client = plan.role("client").expect("client role");
        assert_eq!(client.waits_for, ["worker"]);
        assert_eq!(plan.result_role, "client");
        assert!(client.setup.is_empty(), "no prefill");
        assert_eq!(
            resolve_args(&client.command.args, &peers).expect("resolvable"),
            ["--output-format=json", "--client=fio-hosts.list", "job.fio"]
        );
        let hosts = &client.files[0];
        assert_eq!(hosts.path, HOSTS_FILE);
        assert_eq!(
            fill(&hosts.contents, &peers).expect("fillable"),
            "10.0.0.1,9000\n10.0.0.2,9000\n"
        );
        let job = fill(&client.files[1].contents, &peers).expect("fillable");
        assert!(job.contains("directory=/data\n"), "{job}");
    }

    #[test]
    fn the_job_file_carries_every_field() {
        let full = spec(serde_json::json!({
            "rw": "randrw", "bs": "64k", "iodepth": 8, "ioengine": "io_uring", "direct": 0,
            "size": "1G", "nrfiles": 2, "numJobs": 4, "rwmixread": 70,
            "percentageRandom": 50, "runtime": "10s", "rampTime": "2s", "thread": true,
            "percentiles": [50, 99.9]
        }));
        let job = job_file(&full);
        for line in [
            "[global]",
            "rw=randrw",
            "bs=64k",
            "iodepth=8",
            "ioengine=io_uring",
            "direct=0",
            "size=1G",
            "nrfiles=2",
            "numjobs=4",
            "rwmixread=70",
            "percentage_random=50",
            "runtime=10s",
            "time_based=1",
            "ramp_time=2s",
            "thread=1",
            "group_reporting=1",
            "percentile_list=50:99.9",
            "directory={volume:data}",
            "[perfsweep]",
        ] {
            assert!(job.lines().any(|l| l == line), "{line} missing in\n{job}");
        }
        // rwmixread only means something for mixed workloads.
        let job = job_file(&spec(serde_json::json!({"rw": "read"})));
        assert!(!job.contains("rwmixread"), "{job}");
    }

    #[test]
    fn prefill_writes_the_same_files_first() {
        let spec = spec(
            serde_json::json!({"prefill": true, "rw": "randread", "numJobs": 3, "nrfiles": 2, "size": "1G"}),
        );
        let plan = plan(&spec);
        let client = plan.role("client").expect("client");
        assert_eq!(client.setup.len(), 1);
        let prefill = client
            .files
            .iter()
            .find(|f| f.path == PREFILL_FILE)
            .expect("prefill job");
        for line in [
            "rw=write",
            "numjobs=3",
            "nrfiles=2",
            "size=1G",
            "[perfsweep]",
        ] {
            assert!(prefill.contents.lines().any(|l| l == line), "{line}");
        }
        assert!(!prefill.contents.contains("time_based"));
        assert_eq!(
            resolve_args(&client.setup[0].args, &peers()).expect("resolvable"),
            ["--client=fio-hosts.list", "prefill.fio"]
        );
    }

    #[test]
    fn storage_follows_the_spec() {
        let rwo = spec(serde_json::json!({
            "volumeClaimTemplate": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
        }));
        let rwx = spec(serde_json::json!({
            "volumeClaimTemplate": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs", "resources": {"requests": {"storage": "10Gi"}}}
        }));
        let existing = spec(serde_json::json!({"existingClaim": "fast-nvme"}));
        let source = |s: &FioSpec| {
            plan(s).role("worker").expect("worker").volumes[0]
                .source
                .clone()
        };
        assert!(matches!(
            source(&rwo),
            VolumeSource::NewClaim {
                scope: ClaimScope::PerReplica,
                ..
            }
        ));
        assert!(matches!(
            source(&rwx),
            VolumeSource::NewClaim {
                scope: ClaimScope::Shared,
                ..
            }
        ));
        assert_eq!(
            source(&existing),
            VolumeSource::ExistingClaim {
                claim_name: "fast-nvme".into()
            }
        );
    }

    #[test]
    fn a_raw_job_file_gets_the_volume_as_directory() {
        let raw = "[global]\nrw=read\ndirectory=/somewhere/else\n\n[a]\nbs=4k\n[b]\nbs=1M\ndirectory=/x\n";
        let forced = force_directory(raw);
        assert!(!forced.contains("/somewhere/else") && !forced.contains("/x"));
        assert_eq!(
            forced.matches("directory={volume:data}").count(),
            3,
            "{forced}"
        );
        // The forced line ends each section, after the section's own lines.
        let b = forced.split("[b]").nth(1).expect("section b");
        assert_eq!(b.trim(), "bs=1M\ndirectory={volume:data}");
        let spec = spec(serde_json::json!({"jobFile": raw}));
        let plan = plan(&spec);
        let client = plan.role("client").expect("client");
        assert_eq!(client.files[1].contents, forced);
    }
}
