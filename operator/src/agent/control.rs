//! The control endpoint every agent serves, so peers can learn its data address, wait
//! until it is ready, and tell it to stop. A line protocol over TCP: the client sends
//! `STATUS` or `STOP`, the agent answers one JSON line.
//!
//! The agent of replica 0 of a role with several replicas also holds barriers for the
//! role's commands (`BARRIER <name> <index>`): each replica's command connects, and all
//! are answered at the same instant, once the last has arrived — how distributed load
//! generators start every iteration together. A replica whose agent reports it finished
//! before it arrived fails the barrier for the others instead of leaving them waiting.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// What an agent tells its peers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The address benchmark traffic should be sent to, once known.
    pub address: Option<String>,
    /// Whether the role's readiness condition holds.
    pub ready: bool,
    /// Whether the role's command has ended.
    pub finished: bool,
}

/// The agent's side: its current status and a stop signal.
#[derive(Clone, Default)]
pub struct Control {
    status: Arc<Mutex<Status>>,
    stop: Arc<Notify>,
    /// Set once the agent runs commands for a launcher (`EXEC`, see `super::exec`).
    exec: Arc<Mutex<Option<super::exec::ExecConfig>>>,
    /// Set when this agent holds its role's barriers.
    barriers: Arc<Mutex<Option<Barriers>>>,
}

/// The barriers an agent holds: the control endpoints of its role's replicas (the
/// parties, by index) and the barriers in progress, by name.
struct Barriers {
    parties: Vec<String>,
    gates: std::collections::BTreeMap<String, Gate>,
}

/// One barrier: who has arrived, and how it ended (`None` while waiting).
struct Gate {
    arrived: std::collections::BTreeSet<u32>,
    outcome: tokio::sync::watch::Sender<Option<Result<(), String>>>,
}

/// How a barrier ended: `None` while it waits.
type BarrierWatch = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

/// How often a barrier checks whether a missing party has ended.
const BARRIER_CHECK: Duration = Duration::from_millis(500);

impl Control {
    pub fn update(&self, change: impl FnOnce(&mut Status)) {
        let mut status = self
            .status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        change(&mut status);
    }

    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// From now on, answer `EXEC` requests authenticated with `config.token`.
    pub fn enable_exec(&self, config: super::exec::ExecConfig) {
        *self
            .exec
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(config);
    }

    /// From now on, hold barriers for the role whose replicas' control endpoints are
    /// `parties` (in replica order).
    pub fn enable_barriers(&self, parties: Vec<String>) {
        *self
            .barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Barriers {
            parties,
            gates: std::collections::BTreeMap::default(),
        });
    }

    /// Registers replica `index` at barrier `name`; the receiver reports its end.
    fn arrive(&self, name: &str, index: u32) -> Result<BarrierWatch, String> {
        let mut barriers = self
            .barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(barriers) = barriers.as_mut() else {
            return Err("this agent holds no barriers (it is not replica 0 of a role with several replicas)".into());
        };
        let parties = barriers.parties.clone();
        if index as usize >= parties.len() {
            return Err(format!(
                "replica {index} is not one of the {} parties",
                parties.len()
            ));
        }
        let gate = barriers
            .gates
            .entry(name.to_owned())
            .or_insert_with(|| Gate {
                arrived: std::collections::BTreeSet::default(),
                outcome: tokio::sync::watch::channel(None).0,
            });
        gate.arrived.insert(index);
        let receiver = gate.outcome.subscribe();
        if gate.arrived.len() == parties.len() {
            gate.outcome.send_replace(Some(Ok(())));
        }
        Ok(receiver)
    }

    /// Ends barrier `name` with `error` (a party ended without arriving).
    fn fail_barrier(&self, name: &str, error: String) {
        let barriers = self
            .barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(gate) = barriers.as_ref().and_then(|b| b.gates.get(name)) {
            gate.outcome.send_if_modified(|outcome| {
                if outcome.is_none() {
                    *outcome = Some(Err(error));
                    true
                } else {
                    false
                }
            });
        }
    }

    /// The answer to `BARRIER name index`, once the barrier is passed or has failed.
    async fn barrier(&self, name: &str, index: u32) -> String {
        let mut outcome = match self.arrive(name, index) {
            Ok(arrival) => arrival,
            Err(error) => return serde_json::json!({ "error": error }).to_string(),
        };
        loop {
            if let Some(result) = outcome.borrow_and_update().clone() {
                return match result {
                    Ok(()) => r#"{"released":true}"#.to_owned(),
                    Err(error) => serde_json::json!({ "error": error }).to_string(),
                };
            }
            tokio::select! {
                changed = outcome.changed() => {
                    if changed.is_err() {
                        return r#"{"error":"the barrier was dropped"}"#.to_owned();
                    }
                }
                () = tokio::time::sleep(BARRIER_CHECK) => self.check_missing(name).await,
            }
        }
    }

    /// Fails barrier `name` if a party that has not arrived has ended.
    async fn check_missing(&self, name: &str) {
        let missing: Vec<(u32, String)> = {
            let barriers = self
                .barriers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(barriers) = barriers.as_ref() else {
                return;
            };
            let arrived = barriers
                .gates
                .get(name)
                .map(|g| g.arrived.clone())
                .unwrap_or_default();
            barriers
                .parties
                .iter()
                .enumerate()
                .filter(|(i, _)| !arrived.contains(&(*i as u32)))
                .map(|(i, endpoint)| (i as u32, endpoint.clone()))
                .collect()
        };
        for (index, endpoint) in missing {
            if let Ok(status) = query(&endpoint).await
                && status.finished
            {
                self.fail_barrier(
                    name,
                    format!("replica {index} ended before reaching barrier {name}"),
                );
                return;
            }
        }
    }

    /// Completes when a peer sends `STOP`.
    pub async fn stopped(&self) {
        self.stop.notified().await;
    }

    /// Serves the control endpoint on `listener` until the task is dropped.
    pub async fn serve(self, listener: TcpListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let control = self.clone();
            tokio::spawn(async move {
                let _ = control.answer(stream).await;
            });
        }
    }

    async fn answer(&self, stream: TcpStream) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        let mut read = BufReader::new(read);
        read.read_line(&mut line).await?;
        if line.trim() == "EXEC" {
            let config = self
                .exec
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            return super::exec::serve(config, read, write).await;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["BARRIER", name, index] = words.as_slice() {
            let reply = match index.parse::<u32>() {
                Ok(index) => self.barrier(name, index).await,
                Err(_) => r#"{"error":"BARRIER takes a name and a replica index"}"#.to_owned(),
            };
            write.write_all(reply.as_bytes()).await?;
            write.write_all(b"\n").await?;
            return write.shutdown().await;
        }
        let reply = match line.trim() {
            "STATUS" => serde_json::to_string(&self.status()).unwrap_or_else(|_| "{}".into()),
            "STOP" => {
                // notify_one stores a permit, so a STOP that arrives before anyone waits
                // is not lost.
                self.stop.notify_one();
                r#"{"stopping":true}"#.to_owned()
            }
            other => format!(r#"{{"error":"unknown command {other:?}"}}"#),
        };
        write.write_all(reply.as_bytes()).await?;
        write.write_all(b"\n").await?;
        write.shutdown().await
    }
}

/// Asks the agent at `endpoint` (`host:port`) for its status.
pub async fn query(endpoint: &str) -> std::io::Result<Status> {
    let reply = request(endpoint, "STATUS").await?;
    serde_json::from_str(&reply)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Waits at barrier `name` held by the agent at `endpoint` until every replica of its
/// role has arrived; `index` is the caller's replica. Retries until the agent listens
/// (its pod may start later); waits as long as the barrier does. An error when the
/// barrier fails (a replica ended without arriving) or the agent goes away.
pub async fn barrier(endpoint: &str, name: &str, index: u32) -> std::io::Result<()> {
    let mut stream = loop {
        match TcpStream::connect(endpoint).await {
            Ok(stream) => break stream,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                ) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error),
        }
    };
    stream
        .write_all(format!("BARRIER {name} {index}\n").as_bytes())
        .await?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).await?;
    let value: serde_json::Value = serde_json::from_str(&reply).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("barrier {name} at {endpoint}: {e} in {reply:?}"),
        )
    })?;
    match value.get("error").and_then(|e| e.as_str()) {
        Some(error) => Err(std::io::Error::other(format!(
            "barrier {name} at {endpoint}: {error}"
        ))),
        None if value.get("released").is_some() => Ok(()),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("barrier {name} at {endpoint}: unexpected answer {reply:?}"),
        )),
    }
}

/// The load generator's `--sync` barrier: [`barrier`], handed to perfsweep-llm (which
/// does not depend on the agent) through its hooks.
pub struct LoadgenBarrier;

impl perfsweep_llm::loadgen::hooks::Barrier for LoadgenBarrier {
    fn wait<'a>(
        &'a self,
        endpoint: &'a str,
        name: &'a str,
        worker: u32,
    ) -> perfsweep_llm::loadgen::hooks::BoxFuture<'a, std::io::Result<()>> {
        Box::pin(barrier(endpoint, name, worker))
    }
}

/// Tells the agent at `endpoint` to stop its command.
pub async fn stop(endpoint: &str) -> std::io::Result<()> {
    request(endpoint, "STOP").await.map(|_| ())
}

async fn request(endpoint: &str, command: &str) -> std::io::Result<String> {
    let exchange = async {
        let mut stream = TcpStream::connect(endpoint).await?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await?;
        Ok(reply)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "control request timed out")
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn serve_barriers(parties: usize) -> (Control, String, Vec<Control>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        let host = Control::default();
        tokio::spawn(host.clone().serve(listener));
        // Every party has an agent of its own whose status the barrier can check.
        let mut endpoints = vec![endpoint.clone()];
        let mut others = Vec::new();
        for _ in 1..parties {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            endpoints.push(listener.local_addr().unwrap().to_string());
            let control = Control::default();
            tokio::spawn(control.clone().serve(listener));
            others.push(control);
        }
        host.enable_barriers(endpoints);
        (host, endpoint, others)
    }

    #[tokio::test]
    async fn a_barrier_releases_everyone_once_the_last_arrives() {
        let (_host, endpoint, _others) = serve_barriers(3).await;
        let early = {
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                let (a, b) = tokio::join!(
                    barrier(&endpoint, "iteration-0", 0),
                    barrier(&endpoint, "iteration-0", 2)
                );
                a.and(b).map(|()| tokio::time::Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !early.is_finished(),
            "released before the last party arrived"
        );
        let arrived = tokio::time::Instant::now();
        barrier(&endpoint, "iteration-0", 1).await.unwrap();
        let released = early.await.unwrap().unwrap();
        assert!(released >= arrived);
        // A barrier of another name starts afresh; unknown parties are refused.
        assert!(barrier(&endpoint, "iteration-1", 7).await.is_err());
    }

    #[tokio::test]
    async fn a_party_that_ends_without_arriving_fails_the_barrier() {
        let (_host, endpoint, others) = serve_barriers(2).await;
        let waiting = {
            let endpoint = endpoint.clone();
            tokio::spawn(async move { barrier(&endpoint, "iteration-3", 0).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        others[0].update(|s| s.finished = true);
        let error = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the barrier fails instead of waiting forever")
            .unwrap()
            .expect_err("fails");
        assert!(error.to_string().contains("replica 1 ended"), "{error}");
    }

    #[tokio::test]
    async fn an_agent_without_barriers_refuses_them() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        tokio::spawn(Control::default().serve(listener));
        let error = barrier(&endpoint, "x", 0).await.expect_err("refused");
        assert!(error.to_string().contains("holds no barriers"), "{error}");
    }

    #[tokio::test]
    async fn status_and_stop_round_trip() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        let control = Control::default();
        tokio::spawn(control.clone().serve(listener));
        assert_eq!(query(&endpoint).await.unwrap(), Status::default());
        control.update(|s| {
            s.address = Some("10.0.0.1".into());
            s.ready = true;
        });
        let status = query(&endpoint).await.unwrap();
        assert_eq!(status.address.as_deref(), Some("10.0.0.1"));
        assert!(status.ready);
        stop(&endpoint).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), control.stopped())
            .await
            .expect("stop is delivered");
    }
}
