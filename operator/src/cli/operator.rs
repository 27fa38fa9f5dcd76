//! `perfsweep operator`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::controller::leader::{self, LeaderElection};
use crate::controller::{self, Settings};

#[derive(Debug, clap::Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "PERFSWEEP_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of the health probe and /metrics endpoint (unauthenticated, with every
    /// watched namespace's results): loopback unless set; the chart sets 0.0.0.0:8080
    /// for the kubelet's probes and Prometheus.
    #[arg(long, default_value = "127.0.0.1:8080", env = "PERFSWEEP_HEALTH_ADDR")]
    pub health_addr: SocketAddr,
    /// Merge reconcile requests for one object within this many milliseconds.
    #[arg(long, default_value_t = 500)]
    pub debounce_ms: u64,
    /// This replica's name, for events and as the leader election identity (the pod
    /// name in a cluster).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
    /// Reconcile only while holding a coordination.k8s.io Lease, so that several replicas
    /// can run and exactly one acts (the Helm chart turns this on).
    #[arg(long, env = "PERFSWEEP_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "perfsweep-operator")]
    pub leader_election_lease: String,
    /// Namespace of the leader election Lease (default: the operator's own namespace,
    /// from POD_NAMESPACE, else the kubeconfig's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// The ServiceAccount (in the Lease's namespace) that owns the Lease, so that
    /// uninstalling the operator removes it (the chart passes its own).
    #[arg(long)]
    pub leader_election_owner: Option<String>,
    /// Registry path benchmark images are pulled from when a spec names no image (a
    /// mirror of ghcr.io/perfsweep), e.g. registry.example.com/perfsweep.
    #[arg(long, env = "PERFSWEEP_DEFAULT_IMAGE_REGISTRY")]
    pub default_image_registry: Option<String>,
    /// Scheduler for benchmarks that set none: volcano or default.
    #[arg(long, env = "PERFSWEEP_DEFAULT_SCHEDULER", value_parser = parse_scheduler)]
    pub default_scheduler: Option<perfsweep_benchmarks::kinds::common::Scheduler>,
    /// Volcano queue for benchmarks that set none.
    #[arg(long, env = "PERFSWEEP_DEFAULT_QUEUE")]
    pub default_queue: Option<String>,
    /// An endpoint (`https://host[:port]`) benchmarks may export to with credentials
    /// the operator reads for them; repeat for several (comma-separated in the
    /// environment). A service's own endpoint (AWS S3, GCS, Azure, GitHub) needs none.
    #[arg(
        long = "export-endpoint",
        env = "PERFSWEEP_EXPORT_ENDPOINTS",
        value_delimiter = ','
    )]
    pub export_endpoints: Vec<String>,
    /// Let the allowed export endpoints be plain http:// (a store inside the cluster).
    #[arg(long, env = "PERFSWEEP_EXPORT_ALLOW_HTTP")]
    pub export_allow_http: bool,
    /// The most children a BenchmarkSet may expand to, whatever its maxChildren says.
    #[arg(long, env = "PERFSWEEP_MAX_CHILDREN_PER_SET", default_value_t = controller::DEFAULT_MAX_CHILDREN_PER_SET)]
    pub max_children_per_set: u32,
}

fn parse_scheduler(text: &str) -> Result<perfsweep_benchmarks::kinds::common::Scheduler, String> {
    match text {
        "volcano" => Ok(perfsweep_benchmarks::kinds::common::Scheduler::Volcano),
        "default" => Ok(perfsweep_benchmarks::kinds::common::Scheduler::Default),
        other => Err(format!(
            "unknown scheduler {other:?}: use volcano or default"
        )),
    }
}

pub async fn run(args: OperatorArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the Kubernetes API (in-cluster config or kubeconfig)")?;
    let identity = args.instance.clone().unwrap_or_else(fallback_identity);
    let settings = Settings {
        namespace: args.namespace,
        health_addr: args.health_addr,
        debounce: Duration::from_millis(args.debounce_ms),
        instance: Some(identity.clone()),
        defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults {
            image_registry: args
                .default_image_registry
                .clone()
                .filter(|r| !r.is_empty()),
            scheduler: args.default_scheduler,
            queue: args.default_queue.clone().filter(|q| !q.is_empty()),
        },
        export: crate::controller::benchmark::export::ExportPolicy {
            allowed: crate::export::allowed::AllowedDestinations {
                endpoints: args
                    .export_endpoints
                    .iter()
                    .filter(|e| !e.is_empty())
                    .cloned()
                    .collect(),
                plain_http: args.export_allow_http,
            },
            ..crate::controller::benchmark::export::ExportPolicy::default()
        },
        max_children_per_set: args.max_children_per_set,
        crd_recheck: crate::controller::served::DEFAULT_RECHECK,
    };
    if args.leader_election {
        let namespace = args
            .leader_election_namespace
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let mut election = LeaderElection::new(&args.leader_election_lease, &namespace, &identity);
        if let Some(account) = &args.leader_election_owner {
            // Only what uninstalling leaves depends on it: never a reason not to run.
            match leader::owner_account(&client, &namespace, account).await {
                Ok(owner) => election = election.owned_by(owner),
                Err(error) => tracing::warn!(
                    error = %format!("{error:#}"),
                    "the leader election Lease gets no owner, so uninstalling will leave it"
                ),
            }
        }
        tracing::info!(lease = %format!("{namespace}/{}", args.leader_election_lease), %identity, "leader election on");
        leader::run_with_leader_election(client, settings, election, shutdown_signal()).await?;
    } else {
        controller::run(client, settings, shutdown_signal()).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// An identity for a replica started without POD_NAME (outside a pod): host and process,
/// unique among replicas that can run at the same time.
fn fallback_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "perfsweep".to_owned());
    format!("{host}-{}", std::process::id())
}

/// SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
