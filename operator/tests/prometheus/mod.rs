//! A real Prometheus (Debian's `prometheus`) for tests, scraping one target every
//! second, with its data in a scratch directory; killed on drop, its log printed when
//! the test fails. Outside CI a missing Prometheus skips the test with the reason; in CI
//! (which installs it) it fails.

// Included by two test binaries (controller, cli), each of which uses only part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Prometheus {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

/// A port nothing listens on now, on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `GET <path>` on 127.0.0.1:`port` over HTTP/1.0: the response's head and body.
pub fn http_get(port: u16, path: &str) -> Result<(String, String), String> {
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP response: {response}"))?;
    Ok((head.to_owned(), body.to_owned()))
}

impl Prometheus {
    /// Prometheus scraping `target` (`host:port`) every second, its series labelled with
    /// `labels`; `None` (with the reason printed) when Prometheus is not installed
    /// outside CI.
    pub fn scraping(target: &str, labels: &[(&str, &str)]) -> Option<Self> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("perfsweep-prometheus-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let config = dir.join("prometheus.yml");
        let labels: String = labels
            .iter()
            .map(|(k, v)| format!("\n          {k}: '{v}'"))
            .collect();
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("\n        labels:{labels}")
        };
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: perfsweep\n    static_configs:\n      - targets: ['{target}']{labels}\n"
            ),
        )
        .expect("writing the Prometheus config");
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("a log file");
        let spawned = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        match spawned {
            Ok(child) => Some(Self { child, port, dir }),
            Err(error) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "prometheus is missing in CI ({error}); .ci/run installs the Debian package prometheus"
                );
                eprintln!(
                    "SKIPPED the Prometheus part: prometheus is not installed ({error}); apt-get install --no-install-recommends prometheus"
                );
                None
            }
        }
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET <path>` on Prometheus' API, as JSON.
    pub fn get(&self, path: &str) -> Result<serde_json::Value, String> {
        let (_, body) = http_get(self.port, path)?;
        serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
    }

    /// An instant query (a bare metric name: nothing to URL-encode).
    pub fn query(&self, metric: &str) -> Result<serde_json::Value, String> {
        self.get(&format!("/api/v1/query?query={metric}"))
    }

    pub fn targets(&self) -> Result<serde_json::Value, String> {
        self.get("/api/v1/targets")
    }

    /// Whether its one target was scraped and is up.
    pub fn target_up(&self) -> Result<(), String> {
        let targets = self.targets()?;
        let target = &targets["data"]["activeTargets"][0];
        if target["health"] == "up" && target["lastError"] == "" {
            Ok(())
        } else {
            Err(format!("{targets}"))
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
            eprintln!("Prometheus' log:\n{log}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
