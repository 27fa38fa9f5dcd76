//! S3 servers for export tests: moto's server mode (PyPI `moto[server]`, installed by
//! `.ci/run`), and a stand-in that answers every request with 503.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use perfsweep::export::{self, Credentials, Destination, Retry, Store};

/// A moto server, killed on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket: one plain, unsigned request (moto accepts it).
    pub fn create_bucket(&self, bucket: &str) {
        Self::create_bucket_at(self.port, bucket);
    }

    /// Creates a bucket on the moto listening on `port`.
    pub fn create_bucket_at(port: u16, bucket: &str) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        write!(
            stream,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("receive");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
}

/// Starts moto on a free port, or skips (prints why, returns `None`) when it is not
/// installed and CI is unset; under CI (where `.ci/run` installs it) a missing moto fails.
pub fn moto() -> Option<Moto> {
    let installed = Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "moto_server is missing under CI: .ci/run installs moto[server] from PyPI"
        );
        eprintln!(
            "SKIPPED: moto_server is not installed (python3 -m pip install 'moto[server]'); .ci/run installs it"
        );
        return None;
    }
    let port = free_port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let moto = Moto { child, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto_server did not listen within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(moto)
}

/// `s3://{bucket}/{prefix}` on the moto listening on `port`, through perfsweep's own
/// object_store client, with access key `testing` and `secret`.
pub fn store(port: u16, bucket: &str, prefix: &str, secret: &str) -> Store {
    let parameters = [("endpoint".to_owned(), format!("http://127.0.0.1:{port}"))].into();
    let Destination::Bucket(location) =
        export::parse(&format!("s3://{bucket}/{prefix}"), &parameters).expect("a location")
    else {
        panic!("not a bucket")
    };
    let credentials = Credentials::Aws {
        access_key_id: "testing".into(),
        secret_access_key: secret.into(),
        session_token: None,
    };
    Store::bucket(&location, &credentials, &Retry::default()).expect("a store")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A server that answers every request with 503 Service Unavailable; its port, and how
/// many requests it answered.
pub fn always_unavailable() -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listens");
    let port = listener.local_addr().expect("address").port();
    let answered = Arc::new(AtomicU32::new(0));
    let counter = answered.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            read_request(&mut client);
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = client.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (port, answered)
}

/// Reads one request (headers and a Content-Length body) so the answer is not sent into
/// a half-written request.
pub fn read_request(stream: &mut TcpStream) {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let Ok(n) = stream.read(&mut buffer) else {
            return;
        };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buffer[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return;
            }
        }
    }
}
