//! The control endpoint every agent serves, so peers can learn its data address, wait
//! until it is ready, and tell it to stop. A line protocol over TCP: the client sends
//! `STATUS` or `STOP`, proves it holds the benchmark's token (the challenge-response of
//! `super::auth`), and the agent answers one JSON line. Anything else on the network —
//! a pod of another namespace, another benchmark — is refused before the agent acts.
//!
//! The agent of replica 0 of a role with several replicas also holds barriers for the
//! role's commands (`BARRIER <name> <index>`): each replica's command connects, and all
//! are answered at the same instant, once the last has arrived — how distributed load
//! generators start every iteration together. A replica whose agent reports it finished
//! before it arrived fails the barrier for the others instead of leaving them waiting.
//! Only the names a distributed run uses are accepted, and a barrier is forgotten once
//! it has ended.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::auth::{self, MAX_COMMAND_LINE, MAX_LINE, READ_TIMEOUT};

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
#[derive(Clone)]
pub struct Control {
    /// The benchmark's token: every request proves it holds it.
    token: Arc<Vec<u8>>,
    /// How long a request's lines may take (shorter in tests).
    read_timeout: Duration,
    status: Arc<Mutex<Status>>,
    stop: Arc<Notify>,
    /// Set once the agent runs commands for a launcher (`EXEC`, see `super::exec`).
    exec: Arc<Mutex<Option<super::exec::ExecConfig>>>,
    /// Set when this agent holds its role's barriers.
    barriers: Arc<Mutex<Option<Barriers>>>,
    /// Connections that have not proved the token yet, capped.
    unauthenticated: Arc<auth::Unauthenticated>,
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

/// Most barriers in progress at once: a distributed run has one at a time.
const MAX_GATES: usize = 16;

/// A request, as its first line names it.
#[derive(Debug, PartialEq)]
enum Request {
    Status,
    Stop,
    Barrier { name: String, index: u32 },
    Exec,
}

impl Request {
    fn parse(line: &str) -> Result<Self, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["STATUS"] => Ok(Self::Status),
            ["STOP"] => Ok(Self::Stop),
            ["EXEC"] => Ok(Self::Exec),
            ["BARRIER", name, index] => {
                let index = index
                    .parse()
                    .map_err(|_| "BARRIER takes a name and a replica index".to_owned())?;
                if !perfsweep_llm::loadgen::hooks::is_barrier_name(name) {
                    return Err(format!(
                        "no barrier {name:?}: a distributed run passes \"iteration-N\" and \"done\""
                    ));
                }
                Ok(Self::Barrier {
                    name: (*name).to_owned(),
                    index,
                })
            }
            _ => Err(format!("unknown command {line:?}")),
        }
    }
}

/// The words the client signs: the command line as sent.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[derive(Serialize, Deserialize)]
struct Challenge {
    nonce: String,
}

/// The client's proof, with a nonce of its own for the agent to sign its answer with:
/// the answer is believed only from an agent that holds the token, so a pod squatting
/// on a peer's name cannot feed a false address or readiness.
#[derive(Serialize, Deserialize)]
struct Proof {
    mac: String,
    nonce: String,
}

/// The agent's answer, signed for the client's nonce.
#[derive(Serialize, Deserialize)]
struct Signed {
    reply: String,
    mac: String,
}

fn error_line(error: impl std::fmt::Display) -> String {
    serde_json::json!({ "error": error.to_string() }).to_string()
}

impl Control {
    /// An agent whose requests must prove they hold `token` (the benchmark's).
    pub fn new(token: Vec<u8>) -> Self {
        Self {
            token: Arc::new(token),
            read_timeout: READ_TIMEOUT,
            status: Arc::default(),
            stop: Arc::default(),
            exec: Arc::default(),
            barriers: Arc::default(),
            unauthenticated: Arc::default(),
        }
    }

    /// The same agent, waiting at most `timeout` for each line of a request.
    #[must_use]
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

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
        if !barriers.gates.contains_key(name) && barriers.gates.len() >= MAX_GATES {
            return Err(format!(
                "{MAX_GATES} barriers are in progress already; no more are started"
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
            // Every party holds its receiver: the barrier itself is done.
            barriers.gates.remove(name);
        }
        Ok(receiver)
    }

    /// Ends barrier `name` with `error` (a party ended without arriving).
    fn fail_barrier(&self, name: &str, error: String) {
        let mut barriers = self
            .barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Forgotten as it ends: whoever waits holds a receiver.
        if let Some(gate) = barriers.as_mut().and_then(|b| b.gates.remove(name)) {
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

    /// How many barriers are in progress (for tests).
    #[cfg(test)]
    fn gates_in_progress(&self) -> usize {
        self.barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or(0, |b| b.gates.len())
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
            let Some(gate) = barriers.gates.get(name) else {
                // Ended while this check waited for the lock.
                return;
            };
            let arrived = gate.arrived.clone();
            barriers
                .parties
                .iter()
                .enumerate()
                .filter(|(i, _)| !arrived.contains(&(*i as u32)))
                .map(|(i, endpoint)| (i as u32, endpoint.clone()))
                .collect()
        };
        for (index, endpoint) in missing {
            if let Ok(status) = query(&endpoint, &self.token).await
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
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let Some(pending) = self.unauthenticated.admit(peer.ip()) else {
                tracing::debug!(%peer, "closed a control connection: too many unauthenticated ones");
                drop(stream);
                continue;
            };
            let control = self.clone();
            tokio::spawn(async move {
                let _ = control.answer(stream, pending).await;
            });
        }
    }

    /// One request: its command line, the challenge-response, then the command.
    async fn answer(&self, stream: TcpStream, pending: auth::Pending) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let line = auth::read_line(&mut read, MAX_COMMAND_LINE, self.read_timeout).await?;
        let request = match Request::parse(&line) {
            Ok(request) => request,
            Err(error) => return reply(&mut write, &error_line(error)).await,
        };
        if request == Request::Exec {
            let config = self
                .exec
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            return super::exec::serve(config, &self.token, read, write, pending).await;
        }
        let nonce = auth::random_token().map_err(std::io::Error::other)?;
        let challenge = serde_json::to_string(&Challenge {
            nonce: nonce.clone(),
        })
        .map_err(std::io::Error::other)?;
        write.write_all(format!("{challenge}\n").as_bytes()).await?;
        let proof = auth::read_line(&mut read, MAX_LINE, self.read_timeout).await?;
        let Some(proof) = serde_json::from_str::<Proof>(&proof).ok().filter(|proof| {
            auth::verify(
                &self.token,
                auth::Context::Request,
                &nonce,
                &words(&line),
                &proof.mac,
            )
        }) else {
            tracing::warn!(request = %line, "refused a control request without the benchmark's token");
            return reply(
                &mut write,
                &error_line("authentication failed: not signed with this benchmark's token"),
            )
            .await;
        };
        // Proved: a barrier's waiter may stay as long as the barrier, outside the cap.
        drop(pending);
        let answer = match request {
            Request::Barrier { name, index } => self.barrier(&name, index).await,
            Request::Status => {
                serde_json::to_string(&self.status()).unwrap_or_else(|_| "{}".into())
            }
            Request::Stop => {
                // notify_one stores a permit, so a STOP that arrives before anyone waits
                // is not lost.
                self.stop.notify_one();
                r#"{"stopping":true}"#.to_owned()
            }
            Request::Exec => unreachable!("answered above"),
        };
        let signed = Signed {
            mac: auth::sign(&self.token, auth::Context::Reply, &proof.nonce, &[&answer]),
            reply: answer,
        };
        reply(
            &mut write,
            &serde_json::to_string(&signed).map_err(std::io::Error::other)?,
        )
        .await
    }
}

async fn reply(write: &mut (impl AsyncWriteExt + Unpin), line: &str) -> std::io::Result<()> {
    write.write_all(line.as_bytes()).await?;
    write.write_all(b"\n").await?;
    write.shutdown().await
}

/// Asks the agent at `endpoint` (`host:port`) for its status; `token` is the
/// benchmark's.
pub async fn query(endpoint: &str, token: &[u8]) -> std::io::Result<Status> {
    let reply = within(CLIENT_TIMEOUT, request(endpoint, token, "STATUS")).await?;
    serde_json::from_str(&reply)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// How long a `STATUS` or `STOP` exchange may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits at barrier `name` held by the agent at `endpoint` until every replica of its
/// role has arrived; `index` is the caller's replica. Retries until the agent listens
/// (its pod may start later); waits as long as the barrier does. An error when the
/// barrier fails (a replica ended without arriving) or the agent goes away.
pub async fn barrier(endpoint: &str, token: &[u8], name: &str, index: u32) -> std::io::Result<()> {
    let reply = loop {
        match request(endpoint, token, &format!("BARRIER {name} {index}")).await {
            Ok(reply) => break reply,
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

/// The load generator's `--sync` barrier: [`barrier`] with the benchmark's token from
/// the environment the agent gave its command, handed to perfsweep-llm (which does not
/// depend on the agent) through its hooks.
pub struct LoadgenBarrier;

impl perfsweep_llm::loadgen::hooks::Barrier for LoadgenBarrier {
    fn wait<'a>(
        &'a self,
        endpoint: &'a str,
        name: &'a str,
        worker: u32,
    ) -> perfsweep_llm::loadgen::hooks::BoxFuture<'a, std::io::Result<()>> {
        Box::pin(async move {
            let token = std::env::var(perfsweep_benchmarks::execution::agent_env::LAUNCH_TOKEN).map_err(|_| {
                std::io::Error::other(format!(
                    "{} is not set: --sync needs the benchmark's token, which the agent passes to its command",
                    perfsweep_benchmarks::execution::agent_env::LAUNCH_TOKEN
                ))
            })?;
            barrier(endpoint, token.as_bytes(), name, worker).await
        })
    }
}

/// Tells the agent at `endpoint` to stop its command.
pub async fn stop(endpoint: &str, token: &[u8]) -> std::io::Result<()> {
    within(CLIENT_TIMEOUT, request(endpoint, token, "STOP"))
        .await
        .map(|_| ())
}

async fn within<T>(
    limit: Duration,
    work: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(limit, work).await.map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "control request timed out")
    })?
}

/// One request: the command line, the proof for the agent's challenge, the answer.
async fn request(endpoint: &str, token: &[u8], command: &str) -> std::io::Result<String> {
    let stream = TcpStream::connect(super::peer_dns::resolve(endpoint).await?).await?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(format!("{command}\n").as_bytes()).await?;
    let line = auth::read_line(&mut read, MAX_LINE, CLIENT_TIMEOUT).await?;
    let challenge: Challenge = serde_json::from_str(&line).map_err(|_| {
        // A refusal instead of a challenge (an unknown command).
        std::io::Error::other(format!(
            "the agent at {endpoint} refused {command:?}: {line}"
        ))
    })?;
    let nonce = auth::random_token().map_err(std::io::Error::other)?;
    let proof = serde_json::to_string(&Proof {
        mac: auth::sign(
            token,
            auth::Context::Request,
            &challenge.nonce,
            &words(command),
        ),
        nonce: nonce.clone(),
    })
    .map_err(std::io::Error::other)?;
    write.write_all(format!("{proof}\n").as_bytes()).await?;
    // A barrier's answer comes when the last party arrives: as long as the barrier takes.
    let line = auth::read_line(&mut read, MAX_LINE, Duration::MAX).await?;
    let Ok(signed) = serde_json::from_str::<Signed>(&line) else {
        // A refusal (a wrong token) is not signed.
        return Err(std::io::Error::other(format!(
            "the agent at {endpoint} refused {command:?}: {line}"
        )));
    };
    if !auth::verify(
        token,
        auth::Context::Reply,
        &nonce,
        &[&signed.reply],
        &signed.mac,
    ) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the answer from {endpoint} is not signed with the benchmark's token: it is not this benchmark's agent"
            ),
        ));
    }
    Ok(signed.reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const TOKEN: &[u8] = b"the benchmark's token";

    async fn serve(control: &Control) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        tokio::spawn(control.clone().serve(listener));
        endpoint
    }

    async fn serve_barriers(parties: usize) -> (Control, String, Vec<Control>) {
        let host = Control::new(TOKEN.to_vec());
        let endpoint = serve(&host).await;
        // Every party has an agent of its own whose status the barrier can check.
        let mut endpoints = vec![endpoint.clone()];
        let mut others = Vec::new();
        for _ in 1..parties {
            let control = Control::new(TOKEN.to_vec());
            endpoints.push(serve(&control).await);
            others.push(control);
        }
        host.enable_barriers(endpoints);
        (host, endpoint, others)
    }

    /// What a client without the token gets: the request as raw lines, the answer.
    async fn raw(endpoint: &str, lines: &[&str]) -> String {
        let mut stream = TcpStream::connect(endpoint).await.unwrap();
        for line in lines {
            stream
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
        }
        let mut answer = String::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
        answer
    }

    #[tokio::test]
    async fn a_barrier_releases_everyone_once_the_last_arrives() {
        let (host, endpoint, _others) = serve_barriers(3).await;
        let early = {
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                let (a, b) = tokio::join!(
                    barrier(&endpoint, TOKEN, "iteration-0", 0),
                    barrier(&endpoint, TOKEN, "iteration-0", 2)
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
        barrier(&endpoint, TOKEN, "iteration-0", 1).await.unwrap();
        let released = early.await.unwrap().unwrap();
        assert!(released >= arrived);
        assert_eq!(host.gates_in_progress(), 0, "a passed barrier is forgotten");
        // A barrier of another name starts afresh; unknown parties are refused.
        assert!(barrier(&endpoint, TOKEN, "iteration-1", 7).await.is_err());
    }

    #[tokio::test]
    async fn a_party_that_ends_without_arriving_fails_the_barrier() {
        let (host, endpoint, others) = serve_barriers(2).await;
        let waiting = {
            let endpoint = endpoint.clone();
            tokio::spawn(async move { barrier(&endpoint, TOKEN, "iteration-3", 0).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        others[0].update(|s| s.finished = true);
        let error = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the barrier fails instead of waiting forever")
            .unwrap()
            .expect_err("fails");
        assert!(error.to_string().contains("replica 1 ended"), "{error}");
        assert_eq!(host.gates_in_progress(), 0, "a failed barrier is forgotten");
    }

    #[tokio::test]
    async fn an_agent_without_barriers_refuses_them() {
        let endpoint = serve(&Control::new(TOKEN.to_vec())).await;
        let error = barrier(&endpoint, TOKEN, "done", 0)
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("holds no barriers"), "{error}");
    }

    #[tokio::test]
    async fn status_and_stop_round_trip() {
        let control = Control::new(TOKEN.to_vec());
        let endpoint = serve(&control).await;
        assert_eq!(query(&endpoint, TOKEN).await.unwrap(), Status::default());
        control.update(|s| {
            s.address = Some("10.0.0.1".into());
            s.ready = true;
        });
        let status = query(&endpoint, TOKEN).await.unwrap();
        assert_eq!(status.address.as_deref(), Some("10.0.0.1"));
        assert!(status.ready);
        stop(&endpoint, TOKEN).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), control.stopped())
            .await
            .expect("stop is delivered");
    }

    /// Issue 24, finding 1: STOP, STATUS and BARRIER were answered to anyone who could
    /// reach the port.
    #[tokio::test]
    async fn requests_without_the_token_are_refused_and_change_nothing() {
        let (host, endpoint, _others) = serve_barriers(2).await;
        host.update(|s| s.address = Some("10.0.0.9".into()));

        for (command, what) in [
            ("STOP", "stop"),
            ("STATUS", "status"),
            ("BARRIER done 1", "barrier"),
        ] {
            // Without a proof, and with a proof made with another token.
            let answer = raw(&endpoint, &[command]).await;
            assert!(
                !answer.contains("stopping")
                    && !answer.contains("10.0.0.9")
                    && !answer.contains("released"),
                "{what} without proof: {answer}"
            );
            let error = match command {
                "STOP" => stop(&endpoint, b"another benchmark's token")
                    .await
                    .map(|()| String::new()),
                "STATUS" => query(&endpoint, b"another benchmark's token")
                    .await
                    .map(|s| format!("{s:?}")),
                _ => barrier(&endpoint, b"another benchmark's token", "done", 1)
                    .await
                    .map(|()| String::new()),
            };
            match error {
                Err(error) => assert!(
                    error.to_string().contains("authentication failed")
                        || error.kind() == std::io::ErrorKind::InvalidData,
                    "{what}: {error}"
                ),
                Ok(answer) => panic!("{what} with a wrong token was answered: {answer}"),
            }
        }
        // Nothing was stopped, and the barrier was not entered by the forgers.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), host.stopped())
                .await
                .is_err(),
            "a forged STOP stopped the agent"
        );
        assert_eq!(host.gates_in_progress(), 0);
        // The benchmark's own token still works.
        assert_eq!(
            query(&endpoint, TOKEN).await.unwrap().address.as_deref(),
            Some("10.0.0.9")
        );
    }

    /// Issue 24: a pod squatting on a peer's DNS name could answer STATUS with an
    /// address of its choosing; an answer not signed with the token is not believed.
    #[tokio::test]
    async fn answers_not_signed_with_the_token_are_not_believed() {
        let squatter = Control::new(b"the squatter's own token".to_vec());
        squatter.update(|s| {
            s.address = Some("10.6.6.6".into());
            s.ready = true;
        });
        let endpoint = serve(&squatter).await;
        // The squatter cannot check our proof either, and refuses; a squatter that
        // accepted any proof still could not sign its answer.
        let error = query(&endpoint, TOKEN).await.expect_err("not believed");
        assert!(
            error.to_string().contains("authentication failed"),
            "{error}"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut read = BufReader::new(read);
            let _ = auth::read_line(&mut read, MAX_LINE, READ_TIMEOUT).await;
            write.write_all(b"{\"nonce\":\"00\"}\n").await.unwrap();
            let _ = auth::read_line(&mut read, MAX_LINE, READ_TIMEOUT).await;
            let forged = serde_json::json!({
                "reply": r#"{"address":"10.6.6.6","ready":true,"finished":false}"#,
                "mac": "00".repeat(32),
            });
            write
                .write_all(format!("{forged}\n").as_bytes())
                .await
                .unwrap();
        });
        let error = query(&endpoint, TOKEN).await.expect_err("a forged answer");
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{error}"
        );
    }

    #[tokio::test]
    async fn barriers_the_plan_does_not_use_are_refused() {
        let (host, endpoint, _others) = serve_barriers(2).await;
        for name in ["x", "iteration-x", "a-long-name-no-run-uses"] {
            let error = barrier(&endpoint, TOKEN, name, 0).await.expect_err(name);
            assert!(error.to_string().contains("no barrier"), "{error}");
        }
        assert_eq!(host.gates_in_progress(), 0);
    }

    #[tokio::test]
    async fn long_lines_and_silence_are_cut_off() {
        let control = Control::new(TOKEN.to_vec()).with_read_timeout(Duration::from_millis(200));
        let endpoint = serve(&control).await;
        // A line of 1 MiB without a newline: the agent hangs up after MAX_COMMAND_LINE.
        let mut stream = TcpStream::connect(&endpoint).await.unwrap();
        let flood = vec![b'A'; 1024 * 1024];
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.write_all(&flood)).await;
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the agent kept reading a line without end");
        // Silence: the agent hangs up after its read timeout.
        let mut silent = TcpStream::connect(&endpoint).await.unwrap();
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "the agent waited for a silent client forever"
        );
        // And a silent client after the command line (no proof).
        let mut half = TcpStream::connect(&endpoint).await.unwrap();
        half.write_all(b"STOP\n").await.unwrap();
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), half.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the agent waited for a proof forever");
        assert!(
            tokio::time::timeout(Duration::from_millis(100), control.stopped())
                .await
                .is_err()
        );
    }
}
