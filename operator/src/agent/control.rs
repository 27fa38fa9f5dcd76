//! The control endpoint every agent serves, so peers can learn its data address, wait
//! until it is ready, and tell it to stop. A line protocol over TCP: the client sends
//! `STATUS` or `STOP`, the agent answers one JSON line.

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
}

impl Control {
    pub fn update(&self, change: impl FnOnce(&mut Status)) {
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut status);
    }

    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// From now on, answer `EXEC` requests authenticated with `config.token`.
    pub fn enable_exec(&self, config: super::exec::ExecConfig) {
        *self.exec.lock().unwrap_or_else(|p| p.into_inner()) = Some(config);
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
            let config = self.exec.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return super::exec::serve(config, read, write).await;
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
