//! `perfsweep operator`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::controller::{self, Settings};

#[derive(Debug, clap::Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "PERFSWEEP_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of the health probe endpoint.
    #[arg(long, default_value = "0.0.0.0:8080", env = "PERFSWEEP_HEALTH_ADDR")]
    pub health_addr: SocketAddr,
    /// Merge reconcile requests for one object within this many milliseconds.
    #[arg(long, default_value_t = 500)]
    pub debounce_ms: u64,
    /// This replica's name, for events (the pod name in a cluster).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
}

pub async fn run(args: OperatorArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the Kubernetes API (in-cluster config or kubeconfig)")?;
    let settings = Settings {
        namespace: args.namespace,
        health_addr: args.health_addr,
        debounce: Duration::from_millis(args.debounce_ms),
        instance: args.instance,
    };
    controller::run(client, settings, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
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
