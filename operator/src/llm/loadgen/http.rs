//! A minimal HTTP/1.1 client over one keep-alive TCP connection: exactly what a load
//! generator needs (write a request, read the head, stream the body with a timestamp per
//! read) and nothing else, so that the CPU spent per request stays small and the clock is
//! read where the bytes arrive.

use std::io;

use anyhow::{Context as _, bail};
use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Where requests go: `http://host:port/prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path before `/v1`, without a trailing slash (often empty).
    pub base_path: String,
}

impl Target {
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            bail!(
                "{url}: https is not supported by this version of the load generator; use the \
                 endpoint's plain-HTTP address (inside the cluster, the Service)"
            );
        } else {
            bail!("{url}: the URL must start with http://");
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => (
                host,
                port.parse::<u16>()
                    .with_context(|| format!("{url}: invalid port {port:?}"))?,
            ),
            _ => (authority, 80),
        };
        if host.is_empty() {
            bail!("{url}: no host");
        }
        let base_path = path.trim_end_matches('/');
        let base_path = base_path.strip_suffix("/v1").unwrap_or(base_path);
        Ok(Self {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            base_path: base_path.to_owned(),
        })
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// The status line and the headers that matter for framing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    framing: Framing,
    pub close: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
}

/// One keep-alive connection.
pub struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    /// The server asked to close, or a body could not be read to its end.
    pub reusable: bool,
}

impl Connection {
    pub async fn open(target: &Target) -> io::Result<Self> {
        let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buffer: BytesMut::with_capacity(16 * 1024),
            reusable: true,
        })
    }

    pub async fn send(&mut self, request: &[u8]) -> io::Result<()> {
        self.stream.write_all(request).await
    }

    async fn fill(&mut self) -> io::Result<usize> {
        if self.buffer.capacity() - self.buffer.len() < 4096 {
            self.buffer.reserve(16 * 1024);
        }
        self.stream.read_buf(&mut self.buffer).await
    }

    /// Reads the response head.
    pub async fn read_head(&mut self) -> anyhow::Result<Head> {
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                let head = parse_head(&self.buffer[..end])?;
                self.buffer.advance(end + 4);
                if head.close {
                    self.reusable = false;
                }
                return Ok(head);
            }
            if self.buffer.len() > 64 * 1024 {
                bail!("the response head is larger than 64 KiB");
            }
            if self.fill().await? == 0 {
                self.reusable = false;
                bail!("the server closed the connection before responding");
            }
        }
    }

    /// Streams the body to `on_data`, with the time the bytes were read.
    pub async fn read_body(
        &mut self,
        head: &Head,
        mut on_data: impl FnMut(&[u8], Instant),
    ) -> anyhow::Result<()> {
        let mut at = Instant::now();
        match head.framing {
            Framing::Length(mut remaining) => loop {
                let take = remaining.min(self.buffer.len() as u64) as usize;
                if take > 0 {
                    on_data(&self.buffer[..take], at);
                    self.buffer.advance(take);
                    remaining -= take as u64;
                }
                if remaining == 0 {
                    return Ok(());
                }
                at = self.fill_or_fail().await?;
            },
            Framing::UntilClose => {
                self.reusable = false;
                loop {
                    if !self.buffer.is_empty() {
                        on_data(&self.buffer, at);
                        self.buffer.clear();
                    }
                    if self.fill().await? == 0 {
                        return Ok(());
                    }
                    at = Instant::now();
                }
            }
            Framing::Chunked => {
                let mut state = Chunk::Size;
                loop {
                    match state {
                        Chunk::Size | Chunk::Trailer => {
                            if let Some(end) = find(&self.buffer, b"\r\n") {
                                let line = &self.buffer[..end];
                                if state == Chunk::Trailer {
                                    let last = line.is_empty();
                                    self.buffer.advance(end + 2);
                                    if last {
                                        return Ok(());
                                    }
                                    continue;
                                }
                                let size = parse_chunk_size(line)?;
                                self.buffer.advance(end + 2);
                                state = if size == 0 {
                                    Chunk::Trailer
                                } else {
                                    Chunk::Data(size)
                                };
                                continue;
                            }
                        }
                        Chunk::Data(remaining) => {
                            let take = remaining.min(self.buffer.len() as u64) as usize;
                            if take > 0 {
                                on_data(&self.buffer[..take], at);
                                self.buffer.advance(take);
                                let left = remaining - take as u64;
                                state = if left == 0 {
                                    Chunk::DataEnd
                                } else {
                                    Chunk::Data(left)
                                };
                                continue;
                            }
                        }
                        Chunk::DataEnd => {
                            if self.buffer.len() >= 2 {
                                if &self.buffer[..2] != b"\r\n" {
                                    self.reusable = false;
                                    bail!("malformed chunked encoding: no CRLF after a chunk");
                                }
                                self.buffer.advance(2);
                                state = Chunk::Size;
                                continue;
                            }
                        }
                    }
                    at = self.fill_or_fail().await?;
                }
            }
        }
    }

    async fn fill_or_fail(&mut self) -> anyhow::Result<Instant> {
        match self.fill().await {
            Ok(0) => {
                self.reusable = false;
                bail!("the server closed the connection mid-response")
            }
            Ok(_) => Ok(Instant::now()),
            Err(error) => {
                self.reusable = false;
                Err(error).context("reading the response")
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_chunk_size(line: &[u8]) -> anyhow::Result<u64> {
    let text = std::str::from_utf8(line).context("malformed chunk size")?;
    let hex = text.split(';').next().unwrap_or("").trim();
    u64::from_str_radix(hex, 16).with_context(|| format!("malformed chunk size {hex:?}"))
}

fn parse_head(bytes: &[u8]) -> anyhow::Result<Head> {
    let text = std::str::from_utf8(bytes).context("the response head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        bail!("not an HTTP/1 response: {status_line:?}");
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("malformed status line {status_line:?}"))?;
    let mut framing = Framing::UntilClose;
    let mut close = version == "HTTP/1.0";
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            if framing != Framing::Chunked {
                framing = Framing::Length(
                    value
                        .parse()
                        .with_context(|| format!("malformed Content-Length {value:?}"))?,
                );
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if value.to_ascii_lowercase().contains("chunked") {
                framing = Framing::Chunked;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    // Responses without a body.
    if status == 204 || status == 304 || (100..200).contains(&status) {
        framing = Framing::Length(0);
    }
    Ok(Head {
        status,
        framing,
        close,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let target = Target::parse("http://vllm.models:8000/v1").expect("valid");
        assert_eq!(target.host, "vllm.models");
        assert_eq!(target.port, 8000);
        assert_eq!(target.base_path, "");
        let target = Target::parse("http://gw/openai/").expect("valid");
        assert_eq!(target.port, 80);
        assert_eq!(target.base_path, "/openai");
        assert_eq!(target.host_header(), "gw");
        assert!(Target::parse("https://x").is_err());
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://x:notaport").is_err());
    }

    #[test]
    fn parses_heads() {
        let head = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-type: x")
            .expect("valid");
        assert_eq!(
            (head.status, head.framing, head.close),
            (200, Framing::Chunked, false)
        );
        let head = parse_head(b"HTTP/1.1 500 Oops\r\nContent-Length: 12\r\nConnection: close")
            .expect("valid");
        assert_eq!(
            (head.status, head.framing, head.close),
            (500, Framing::Length(12), true)
        );
        assert!(parse_head(b"SSH-2.0").is_err());
        assert!(parse_chunk_size(b"1a;ext=1").is_ok_and(|n| n == 26));
    }

    #[tokio::test]
    async fn reads_chunked_bodies_split_anywhere() {
        use tokio::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let response: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
            for piece in response.chunks(3) {
                socket.write_all(piece).await.expect("write");
                socket.flush().await.expect("flush");
                tokio::task::yield_now().await;
            }
        });
        let target = Target::parse(&format!("http://127.0.0.1:{port}")).expect("valid");
        let mut connection = Connection::open(&target).await.expect("connect");
        let head = connection.read_head().await.expect("head");
        let mut body = Vec::new();
        connection
            .read_body(&head, |data, _| body.extend_from_slice(data))
            .await
            .expect("body");
        assert_eq!(body, b"hello, world");
        let head = connection.read_head().await.expect("second head");
        let mut body = Vec::new();
        connection
            .read_body(&head, |data, _| body.extend_from_slice(data))
            .await
            .expect("second body");
        assert_eq!(body, b"abc");
        assert!(connection.reusable);
        server.await.expect("server");
    }
}
