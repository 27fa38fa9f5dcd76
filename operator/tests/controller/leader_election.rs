//! Two operator replicas with leader election against the API double: only the holder
//! of the Lease reconciles, and when it goes away — shut down gracefully (it releases
//! the Lease) or killed (the Lease expires) — the other takes over within about two
//! lease durations. Who acted is read from the `reportingInstance` of the events the
//! controllers record, which is the replica's identity.

use crate::support;

use std::time::{Duration, Instant};

use perfsweep::controller::leader::{LeaderElection, run_with_leader_election};
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::Value;
use support::{
    NS, WAIT, children, create_set, events_about, iperf_set, name_of, set_phase, wait_until,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const LEASE: &str = "perfsweep-operator";
/// Short timings so the test runs in seconds; the production defaults are 15 s / 10 s /
/// 5 s / 2 s.
const LEASE_DURATION: Duration = Duration::from_secs(1);

fn election(identity: &str) -> LeaderElection {
    LeaderElection {
        renew_deadline: Duration::from_millis(700),
        renew_interval: Duration::from_millis(200),
        retry_interval: Duration::from_millis(100),
        lease_duration: LEASE_DURATION,
        ..LeaderElection::new(LEASE, NS, identity)
    }
}

/// One replica running `run_with_leader_election` in a task.
struct Replica {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Replica {
    fn start(double: &ApiDouble, identity: &str) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let settings = support::settings(identity, 0);
        let task = tokio::spawn(run_with_leader_election(
            double.client(),
            settings,
            election(identity),
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Graceful shutdown: completes the shutdown future and waits for `Ok`.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("the replica stops within the wait")
            .expect("the replica task did not panic");
        if let Err(error) = result {
            panic!("the replica returned an error: {error:#}");
        }
    }

    /// A crash: the task is gone without releasing anything.
    async fn kill(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn holder(double: &ApiDouble) -> Option<String> {
    double
        .get(&Gvr::LEASES, Some(NS), LEASE)
        .and_then(|lease| lease["spec"]["holderIdentity"].as_str().map(str::to_owned))
}

async fn wait_for_holder(double: &ApiDouble, identity: &str, within: Duration) -> Duration {
    let start = Instant::now();
    wait_until(
        within,
        format_args!("{identity} to hold the lease"),
        || match holder(double) {
            Some(h) if h == identity => Ok(()),
            other => Err(format!("holder {other:?}")),
        },
    )
    .await;
    start.elapsed()
}

/// `reportingInstance` of every event about the set, with its reason.
fn reporters(double: &ApiDouble, set: &str) -> Vec<(String, String)> {
    events_about(double, set)
        .iter()
        .map(|e| {
            (
                e["reportingInstance"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn wait_for_children(double: &ApiDouble, set: &str, count: usize) -> Vec<Value> {
    wait_until(WAIT, format_args!("{count} children of {set}"), || {
        let children = children(double, set);
        if children.len() == count {
            Ok(children)
        } else {
            Err(format!("{} children", children.len()))
        }
    })
    .await
}

/// Marks the child `name` Succeeded, as its benchmark controller would.
fn succeed(double: &ApiDouble, name: &str) {
    set_phase(double, name, "Succeeded");
}

/// Both replicas run; only `a`, the first to take the Lease, acts. Then `a` leaves by
/// `leave`, `b` takes over within two lease durations and carries the sweep on.
async fn takeover(leave: impl AsyncFnOnce(Replica)) {
    let double = support::double_with_crds().await;
    let a = Replica::start(&double, "a");
    wait_for_holder(&double, "a", WAIT).await;
    let b = Replica::start(&double, "b");

    // Three children, one at a time: `a` creates the first.
    create_set(
        &double,
        iperf_set(
            "ha",
            serde_json::json!({"streams": [1, 2, 3]}),
            1,
            1,
            "Continue",
        ),
    )
    .await;
    let first = wait_for_children(&double, "ha", 1).await;
    // Long enough for b to have tried many times (and to have reconciled, had it run).
    tokio::time::sleep(LEASE_DURATION * 2).await;
    assert_eq!(holder(&double).as_deref(), Some("a"), "a keeps renewing");
    let events = reporters(&double, "ha");
    assert!(!events.is_empty(), "a recorded events about the set");
    assert!(
        events.iter().all(|(who, _)| who == "a"),
        "only the leader acts: {events:?}"
    );
    assert_eq!(children(&double, "ha").len(), 1, "maxParallel 1 holds");

    leave(a).await;
    let took = wait_for_holder(
        &double,
        "b",
        LEASE_DURATION * 2 + Duration::from_millis(500),
    )
    .await;
    eprintln!("b took over {took:?} after a left");

    // b reconciles from here on: the next child appears once the first succeeds.
    succeed(&double, name_of(&first[0]));
    let both = wait_for_children(&double, "ha", 2).await;
    let second = both
        .iter()
        .map(name_of)
        .find(|n| *n != name_of(&first[0]))
        .expect("a second child")
        .to_owned();
    wait_until(WAIT, "an event from b", || {
        let events = reporters(&double, "ha");
        if events
            .iter()
            .any(|(who, reason)| who == "b" && reason == "Created")
        {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    assert!(
        reporters(&double, "ha")
            .iter()
            .all(|(who, _)| who == "a" || who == "b"),
        "events come from the replicas only"
    );
    assert!(!second.is_empty());
    let lease = double
        .get(&Gvr::LEASES, Some(NS), LEASE)
        .expect("the lease exists");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1, "{lease}");
    assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
    b.stop().await;
    assert_eq!(holder(&double), None, "b released the lease on shutdown");
}

#[tokio::test]
async fn a_standby_takes_over_when_the_leader_shuts_down() {
    takeover(async |a: Replica| {
        a.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_standby_takes_over_when_the_leader_dies() {
    takeover(async |a: Replica| {
        a.kill().await;
    })
    .await;
}

#[tokio::test]
async fn a_leader_that_finds_another_holder_steps_down() {
    let double = support::double_with_crds().await;
    let a = Replica::start(&double, "a");
    wait_for_holder(&double, "a", WAIT).await;
    // An administrator, or a replica that judged the lease expired, takes it.
    double
        .patch(
            &Gvr::LEASES,
            Some(NS),
            LEASE,
            serde_json::json!({"spec": {"holderIdentity": "intruder"}}),
        )
        .expect("patching the lease");
    let taken = Instant::now();
    // Two renew intervals: `a` has tried to renew, seen the intruder and stopped.
    tokio::time::sleep(Duration::from_millis(400)).await;
    create_set(
        &double,
        iperf_set(
            "quiet",
            serde_json::json!({"streams": [1]}),
            1,
            1,
            "Continue",
        ),
    )
    .await;
    // While the intruder holds the lease nobody reconciles; once it has not been
    // renewed for a lease duration, `a` takes it back and creates the child.
    loop {
        match holder(&double).as_deref() {
            Some("intruder") => assert!(
                children(&double, "quiet").is_empty(),
                "a reconciled while another replica held the lease"
            ),
            Some("a") => break,
            other => panic!("unexpected holder {other:?}"),
        }
        assert!(taken.elapsed() < WAIT, "a never took the lease back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        taken.elapsed() >= LEASE_DURATION,
        "a took the lease back after {:?}, before it could expire",
        taken.elapsed()
    );
    wait_for_children(&double, "quiet", 1).await;
    a.stop().await;
}
