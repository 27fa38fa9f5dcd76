//! Leader election on a `coordination.k8s.io/v1` Lease, so that several replicas of the
//! operator can run and only one of them reconciles (kube-runtime has none).
//!
//! The protocol is client-go's: a candidate takes the Lease when it names no holder, or
//! when its record has not changed for `leaseDurationSeconds` **as measured on the
//! candidate's own clock** (the holder's `renewTime` is never compared with local time,
//! so clock skew between nodes cannot make a live leader look expired). Every write
//! carries the `resourceVersion` it was decided on, so of two candidates racing for the
//! same Lease exactly one wins and the other gets a 409. The leader renews every
//! `renew_interval`; if it cannot renew for `renew_deadline` (shorter than the lease
//! duration) or finds another holder, it stops its controllers, so it has stopped acting
//! before any other replica can consider the Lease expired. On a graceful shutdown it
//! clears `holderIdentity` once its controllers have stopped, so a standby takes over at
//! once instead of after the lease duration.
//!
//! A replica that is not leading serves `/healthz` and `/readyz` (it is healthy, just
//! waiting), so the kubelet does not restart standbys.
//!
//! The Lease is owned by the operator's ServiceAccount when one is named
//! (`--leader-election-owner`, which the chart sets): `helm uninstall` deletes the
//! ServiceAccount, and the garbage collector then deletes the Lease, even one that a
//! replica still shutting down wrote again after Helm's deletes (its owner is gone).
//!
//! Why not a lease crate. kube-runtime has no leader election; the two maintained crates
//! were read before this was written. kube-lease-manager (`LeaseState::sync`/`lock`)
//! takes the Lease as expired when the holder's `renewTime` plus `leaseDurationSeconds`
//! is before the candidate's `SystemTime::now()`, so a candidate whose clock runs ahead
//! of the leader's takes over a live Lease; and its renewal is a strategic-merge patch
//! without the `resourceVersion` it decided on. kubert's `LeaseManager` also derives the
//! expiry from the holder's timestamps, and brings kubert's runtime with it. Both would
//! also still need what this module adds around the election: stopping the controllers
//! before the Lease can look expired to others (`renew_deadline`), readiness for
//! standbys, and handing over on shutdown. The rules above are client-go's, which every
//! Kubernetes controller manager runs; the unit tests below hold the decision (a Lease
//! unchanged for its duration on this replica's clock, timing that lets the leader stop
//! first) and `operator/tests/controller/leader_election.rs` the takeovers (a leader that
//! shuts down, dies, or finds another holder). Adopting a crate is worth it once one
//! measures expiry on the candidate's own clock.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::Settings;
use crate::health::{self, Readiness};

/// How a replica takes part in leader election.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Name of the Lease, e.g. `perfsweep-operator`.
    pub lease_name: String,
    /// Namespace of the Lease (the operator's own namespace).
    pub lease_namespace: String,
    /// This replica's name in `holderIdentity` (the pod name in a cluster).
    pub identity: String,
    /// `leaseDurationSeconds`: how long others wait after the last renewal before taking
    /// the Lease. Whole seconds on the wire; at least one second.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down; shorter than
    /// `lease_duration`, so it stops before others may take over.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub renew_interval: Duration,
    /// How often a candidate tries to take the Lease, and the leader retries a failed
    /// renewal.
    pub retry_interval: Duration,
    /// What the Lease is owned by (the operator's ServiceAccount), so that it goes when
    /// the installation goes.
    pub owner: Option<OwnerReference>,
}

impl LeaderElection {
    /// The defaults: a 15 s lease renewed every 5 s, given up after 10 s without a
    /// renewal; candidates try every 2 s.
    pub fn new(lease_name: &str, lease_namespace: &str, identity: &str) -> Self {
        Self {
            lease_name: lease_name.to_owned(),
            lease_namespace: lease_namespace.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            renew_interval: Duration::from_secs(5),
            retry_interval: Duration::from_secs(2),
            owner: None,
        }
    }

    /// The Lease owned by `owner` (see the module's comment).
    #[must_use]
    pub fn owned_by(mut self, owner: OwnerReference) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The timing must leave the leader time to stop before the Lease can expire.
    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.identity.is_empty(),
            "leader election needs an identity"
        );
        anyhow::ensure!(
            self.lease_duration >= Duration::from_secs(1),
            "the lease duration must be at least one second (the Lease counts whole seconds)"
        );
        anyhow::ensure!(
            self.renew_interval < self.renew_deadline && self.renew_deadline < self.lease_duration,
            "leader election needs renew interval ({:?}) < renew deadline ({:?}) < lease duration ({:?})",
            self.renew_interval,
            self.renew_deadline,
            self.lease_duration
        );
        anyhow::ensure!(
            !self.retry_interval.is_zero(),
            "the retry interval must not be zero"
        );
        Ok(())
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// What a candidate does with a Lease it has read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It holds the Lease: write a new `renewTime`.
    Renew,
    /// The Lease is free or expired: take it.
    Acquire,
    /// Someone else holds it and has renewed recently enough.
    Wait,
}

/// Pure: what `me` does with a Lease held by `holder` whose record has not changed for
/// `unchanged_for` (by the candidate's clock) and that lasts `lease_duration`.
pub fn decide(
    holder: Option<&str>,
    me: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> Decision {
    match holder {
        Some(holder) if holder == me => Decision::Renew,
        None => Decision::Acquire,
        Some(_) if unchanged_for >= lease_duration => Decision::Acquire,
        Some(_) => Decision::Wait,
    }
}

/// The last version of the Lease record seen, and when it was first seen.
struct Observed {
    resource_version: Option<String>,
    since: Instant,
}

/// One replica's view of the Lease and the writes it makes to it.
struct Elector {
    api: Api<Lease>,
    config: LeaderElection,
    /// The Lease as this replica last wrote or read it.
    lease: Option<Lease>,
    observed: Option<Observed>,
}

impl Elector {
    fn new(client: Client, config: LeaderElection) -> Self {
        Self {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            lease: None,
            observed: None,
        }
    }

    fn describe(&self) -> String {
        format!(
            "Lease {}/{}",
            self.config.lease_namespace, self.config.lease_name
        )
    }

    /// Reads the Lease and takes or renews it if [`decide`] says so. `Ok(true)`: this
    /// replica holds it now.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let Some(lease) = self.api.get_opt(&self.config.lease_name).await? else {
            return self.create(now).await;
        };
        let resource_version = lease.resource_version();
        // Expiry is judged by how long the record has stayed the same on our clock.
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.resource_version != resource_version);
        if changed {
            self.observed = Some(Observed {
                resource_version,
                since: Instant::now(),
            });
        }
        let unchanged_for = self
            .observed
            .as_ref()
            .map_or(Duration::ZERO, |o| o.since.elapsed());
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.config.lease_duration, Duration::from_secs);
        let decision = decide(holder, &self.config.identity, unchanged_for, duration);
        if decision == Decision::Wait {
            self.lease = Some(lease);
            return Ok(false);
        }
        let mut new_spec = spec.clone();
        new_spec.holder_identity = Some(self.config.identity.clone());
        new_spec.lease_duration_seconds = Some(self.config.lease_duration_seconds());
        new_spec.renew_time = Some(MicroTime(now));
        if decision == Decision::Acquire {
            new_spec.acquire_time = Some(MicroTime(now));
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            if let Some(previous) = holder {
                tracing::info!(lease = %self.describe(), %previous, "taking over an expired lease");
            }
        }
        let mut updated = lease;
        updated.spec = Some(new_spec);
        if let Some(owner) = &self.config.owner {
            // A Lease made by an older operator, or by hand, joins the installation.
            add_owner(&mut updated.metadata, owner);
        }
        self.replace(updated).await
    }

    /// Renews from the copy this replica last wrote: one request while nobody else
    /// touches the Lease. After a conflict, reads it again and decides.
    async fn renew(&mut self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.lease.clone() else {
            return self.try_acquire_or_renew().await;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return self.try_acquire_or_renew().await;
        }
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if self.replace(lease).await? {
            Ok(true)
        } else {
            self.try_acquire_or_renew().await
        }
    }

    /// Clears `holderIdentity` if this replica still holds the Lease, so a standby need
    /// not wait for it to expire. Best effort: failing that, it expires.
    async fn release(&mut self) {
        for _ in 0..2 {
            let lease = match self.api.get_opt(&self.config.lease_name).await {
                Ok(Some(lease)) => lease,
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(lease = %self.describe(), %error, "cannot release the lease; it will expire");
                    return;
                }
            };
            let mut lease = lease;
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return;
            }
            spec.holder_identity = None;
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            match self
                .api
                .replace(&self.config.lease_name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => {
                    tracing::info!(lease = %self.describe(), "released the lease");
                    return;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => {
                    tracing::warn!(lease = %self.describe(), %error, "cannot release the lease; it will expire");
                    return;
                }
            }
        }
    }

    async fn create(&mut self, now: Timestamp) -> Result<bool, kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.lease_namespace.clone()),
                labels: Some(
                    [(
                        perfsweep_benchmarks::api::labels::MANAGED_BY.to_owned(),
                        perfsweep_benchmarks::api::labels::MANAGER.to_owned(),
                    )]
                    .into(),
                ),
                owner_references: self.config.owner.clone().map(|owner| vec![owner]),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.config.lease_duration_seconds()),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.remember(created);
                Ok(true)
            }
            // Another candidate created it first.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Writes `lease` on the resourceVersion it was read with. `Ok(false)`: it changed
    /// meanwhile (another replica wrote first).
    async fn replace(&mut self, lease: Lease) -> Result<bool, kube::Error> {
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.remember(written);
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                self.lease = None;
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    fn remember(&mut self, lease: Lease) {
        self.observed = Some(Observed {
            resource_version: lease.resource_version(),
            since: Instant::now(),
        });
        self.lease = Some(lease);
    }
}

/// Adds `owner` to `meta`'s owner references unless an owner with its UID is there.
/// Pure. `true` when it added one.
pub fn add_owner(meta: &mut ObjectMeta, owner: &OwnerReference) -> bool {
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    if owners.iter().any(|o| o.uid == owner.uid) {
        return false;
    }
    owners.push(owner.clone());
    true
}

/// The owner reference to a ServiceAccount as read from the API server; `None` when it
/// has no name or UID (it was not read from a server).
pub fn service_account_owner(
    account: &k8s_openapi::api::core::v1::ServiceAccount,
) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "ServiceAccount".into(),
        name: account.metadata.name.clone()?,
        uid: account.metadata.uid.clone()?,
        ..OwnerReference::default()
    })
}

/// The owner reference for the Lease: the ServiceAccount `name` in `namespace`, read
/// once at start (the chart grants get on it by name).
pub async fn owner_account(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<OwnerReference> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let account = accounts.get(name).await.with_context(|| {
        format!("reading ServiceAccount {namespace}/{name}, the leader election Lease's owner (RBAC: get serviceaccounts/{name})")
    })?;
    service_account_owner(&account)
        .with_context(|| format!("ServiceAccount {namespace}/{name} as read has no name or UID"))
}

/// Completes when `rx` has seen `true`.
async fn signalled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|set| *set).await;
}

/// How a term as leader ended.
enum Term {
    /// Shutdown was requested; the controllers have stopped.
    Shutdown,
    /// Another replica holds the Lease, or it could not be renewed in time.
    Lost,
}

/// Runs [`super::run`] only while this replica holds the Lease, until `shutdown`
/// completes. A replica that loses the Lease stops its controllers (in-flight reconciles
/// finish; they are aborted if they would outlast the lease) and becomes a candidate
/// again. On shutdown the leader stops its controllers, then releases the Lease.
pub async fn run_with_leader_election(
    client: Client,
    settings: Settings,
    election: LeaderElection,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    election.check()?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    });
    let mut elector = Elector::new(client.clone(), election);
    loop {
        if !campaign(&mut elector, &settings, shutdown_rx.clone()).await? {
            return Ok(());
        }
        tracing::info!(
            lease = %elector.describe(),
            identity = %elector.config.identity,
            "became the leader; starting the controllers"
        );
        let term = lead(&client, &settings, &mut elector, shutdown_rx.clone()).await;
        match term {
            Ok(Term::Lost) => {
                tracing::warn!(lease = %elector.describe(), "lost the lease; standing by");
            }
            Ok(Term::Shutdown) => {
                elector.release().await;
                return Ok(());
            }
            Err(error) => {
                elector.release().await;
                return Err(error);
            }
        }
    }
}

/// Tries to take the Lease every `retry_interval`, serving probes meanwhile. `false`:
/// shutdown came first.
async fn campaign(
    elector: &mut Elector,
    settings: &Settings,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    // A standby is healthy and ready: it is doing what it should.
    let readiness = Readiness::default();
    readiness.set_ready(true);
    let (stop_probes, probes_stopped) = watch::channel(false);
    let (addr, server) = health::serve(settings.health_addr, readiness, signalled(probes_stopped))
        .await
        .with_context(|| format!("serving health probes on {}", settings.health_addr))?;
    tracing::debug!(%addr, "serving health probes while standing by");
    let probes = tokio::spawn(server);
    let mut shutdown_requested = std::pin::pin!(signalled(shutdown));
    let acquired = loop {
        match elector.try_acquire_or_renew().await {
            Ok(true) => break true,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(lease = %elector.describe(), %error, "cannot read or take the lease");
            }
        }
        tokio::select! {
            () = &mut shutdown_requested => break false,
            () = tokio::time::sleep(elector.config.retry_interval) => {}
        }
    };
    // The controllers serve the probes from here on, on the same address.
    let _ = stop_probes.send(true);
    let _ = probes.await;
    Ok(acquired)
}

/// Runs the controllers while renewing the Lease.
async fn lead(
    client: &Client,
    settings: &Settings,
    elector: &mut Elector,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Term> {
    let config = elector.config.clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut controllers = tokio::spawn(super::run(
        client.clone(),
        settings.clone(),
        signalled(stop_rx),
    ));
    let mut last_renewal = Instant::now();
    let mut next_renewal = last_renewal + config.renew_interval;
    let mut shutdown_requested = std::pin::pin!(signalled(shutdown));
    let mut stopping: Option<Term> = None;
    loop {
        // Once the lease is lost, the controllers must be gone before it can expire.
        let hard_stop = last_renewal + config.lease_duration;
        tokio::select! {
            joined = &mut controllers => {
                joined.context("the controllers panicked")??;
                return stopping.ok_or_else(|| anyhow::anyhow!("the controllers stopped unexpectedly"));
            }
            () = &mut shutdown_requested, if stopping.is_none() => {
                tracing::info!("shutting down: stopping the controllers, then releasing the lease");
                stopping = Some(Term::Shutdown);
                let _ = stop_tx.send(true);
            }
            () = sleep_until(next_renewal), if !matches!(stopping, Some(Term::Lost)) => {
                match elector.renew().await {
                    Ok(true) => {
                        last_renewal = Instant::now();
                        next_renewal = last_renewal + config.renew_interval;
                    }
                    Ok(false) => {
                        tracing::warn!(lease = %elector.describe(), "another replica holds the lease: stopping the controllers");
                        stopping = Some(Term::Lost);
                        let _ = stop_tx.send(true);
                    }
                    Err(error) if last_renewal.elapsed() >= config.renew_deadline => {
                        tracing::warn!(lease = %elector.describe(), %error, "cannot renew the lease within the renew deadline: stopping the controllers");
                        stopping = Some(Term::Lost);
                        let _ = stop_tx.send(true);
                    }
                    Err(error) => {
                        tracing::warn!(lease = %elector.describe(), %error, "cannot renew the lease; retrying");
                        next_renewal = Instant::now() + config.retry_interval;
                    }
                }
            }
            () = sleep_until(hard_stop), if matches!(stopping, Some(Term::Lost)) => {
                tracing::warn!("the controllers did not stop before the lease expired: aborting them");
                controllers.abort();
                let _ = (&mut controllers).await;
                return Ok(Term::Lost);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    #[test]
    fn an_owner_is_added_once() {
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            name: "perfsweep".into(),
            uid: "u-1".into(),
            ..OwnerReference::default()
        };
        let mut meta = ObjectMeta::default();
        assert!(add_owner(&mut meta, &owner));
        assert!(!add_owner(&mut meta, &owner), "the same owner twice");
        assert_eq!(meta.owner_references.as_deref(), Some(&[owner][..]));
    }

    #[test]
    fn a_service_account_not_read_from_a_server_owns_nothing() {
        let mut account = k8s_openapi::api::core::v1::ServiceAccount::default();
        account.metadata.name = Some("perfsweep".into());
        assert_eq!(service_account_owner(&account), None, "no UID");
        account.metadata.uid = Some("u-1".into());
        let owner = service_account_owner(&account).expect("an owner");
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ServiceAccount", "u-1")
        );
    }

    #[test]
    fn a_free_lease_is_taken() {
        assert_eq!(decide(None, "a", Duration::ZERO, LEASE), Decision::Acquire);
    }

    #[test]
    fn the_holder_renews() {
        assert_eq!(
            decide(Some("a"), "a", Duration::from_mins(1), LEASE),
            Decision::Renew
        );
    }

    #[test]
    fn a_lease_held_by_another_is_taken_only_once_unchanged_for_its_duration() {
        assert_eq!(
            decide(Some("b"), "a", Duration::from_secs(14), LEASE),
            Decision::Wait
        );
        assert_eq!(decide(Some("b"), "a", LEASE, LEASE), Decision::Acquire);
    }

    #[test]
    fn timing_must_let_the_leader_stop_before_the_lease_expires() {
        let mut election = LeaderElection::new("l", "ns", "a");
        election.check().expect("the defaults are consistent");
        election.renew_deadline = election.lease_duration;
        assert!(election.check().is_err());
        let mut election = LeaderElection::new("l", "ns", "");
        assert!(election.check().is_err());
        election.identity = "a".into();
        election.lease_duration = Duration::from_millis(500);
        assert!(election.check().is_err());
    }
}
