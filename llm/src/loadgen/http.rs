//! A minimal HTTP/1.1 client over one keep-alive connection (plain TCP or TLS): exactly
//! what a load generator needs (write a request, read the head, stream the body with an
//! arrival time per read) and nothing else, so that the CPU spent per request stays small.
//!
//! Arrival times come from the kernel (`SO_TIMESTAMPNS`: when the bytes reached the
//! socket), not from when this process got around to reading them, so a busy or
//! deliberately lazy event loop (see [`coalesce_wakeups`]) does not inflate latencies.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use bytes::{Buf, BytesMut};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;
use tokio_rustls::rustls;

/// Where requests go: `http://host:port/prefix` or `https://...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path before `/v1`, without a trailing slash (often empty).
    pub base_path: String,
    /// `https://`.
    pub tls: bool,
}

impl Target {
    /// Reads `url` with `http::Uri` (RFC 3986): scheme, host (IPv6 in brackets), port,
    /// path. Credentials in the URL are refused: they would be sent nowhere and printed
    /// everywhere the URL is; an API key belongs in a Secret (`apiKeySecretRef`).
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let uri: http::Uri = url.parse().with_context(|| format!("{url}: not a URL"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => bail!("{url}: the URL must start with http:// or https://"),
        };
        let Some(authority) = uri.authority() else {
            bail!("{url}: no host");
        };
        if authority.as_str().contains('@') {
            bail!("{url}: credentials in the URL are not supported; put the key in a Secret");
        }
        let host = authority.host();
        if host.is_empty() {
            bail!("{url}: no host");
        }
        // `http::Uri` keeps a port that is not a number as text (`port_u16` is then
        // `None`): read it here so a typo is an error, not the default port.
        let port = match authority.as_str()[host.len()..].strip_prefix(':') {
            Some(text) if !text.is_empty() => text
                .parse::<u16>()
                .with_context(|| format!("{url}: invalid port {text:?}"))?,
            _ => {
                if tls {
                    443
                } else {
                    80
                }
            }
        };
        let path = uri.path().trim_end_matches('/');
        let base_path = path.strip_suffix("/v1").unwrap_or(path);
        Ok(Self {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            base_path: base_path.to_owned(),
            tls,
        })
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// `http://host:port/prefix` or `https://...` (for messages).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}{path}", self.host_header(), self.base_path)
    }
}

/// How a TLS endpoint is trusted.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// PEM file of extra CA certificates, trusted besides the system's.
    pub ca_file: Option<std::path::PathBuf>,
    /// Accept any server certificate (test endpoints with self-signed certificates).
    pub insecure_skip_verify: bool,
}

/// Everything a connection needs: the address and, for `https://`, the TLS setup.
#[derive(Clone)]
pub struct Endpoint {
    pub target: Target,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl Endpoint {
    pub fn new(target: Target, options: &TlsOptions) -> anyhow::Result<Self> {
        let tls = if target.tls {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .with_context(|| format!("{}: not a valid TLS server name", target.host))?;
            let config = tls_config(options)?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
        } else {
            None
        };
        Ok(Self { target, tls })
    }

    /// A plain-HTTP endpoint (no TLS settings needed).
    pub fn plain(target: Target) -> anyhow::Result<Self> {
        Self::new(target, &TlsOptions::default())
    }
}

fn tls_config(options: &TlsOptions) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS: no usable protocol version")?;
    let mut config = if options.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for certificate in rustls_native_certs::load_native_certs().certs {
            // A system certificate rustls cannot use is skipped, as browsers do.
            let _ = roots.add(certificate);
        }
        if let Some(path) = &options.ca_file {
            use rustls::pki_types::pem::PemObject as _;
            let pem = std::fs::read(path)
                .with_context(|| format!("--ca-file {}: cannot read", path.display()))?;
            let mut added = 0;
            for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let certificate = certificate.with_context(|| {
                    format!("--ca-file {}: malformed PEM certificate", path.display())
                })?;
                roots.add(certificate).with_context(|| {
                    format!("--ca-file {}: unusable CA certificate", path.display())
                })?;
                added += 1;
            }
            if added == 0 {
                bail!("--ca-file {}: no PEM certificate in it", path.display());
            }
        }
        if roots.is_empty() {
            bail!("TLS: no trusted CA certificate (none in the system store; give --ca-file)");
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// `--insecure-skip-verify`: any certificate is accepted, but handshake signatures are
/// still checked (so the connection is at least consistent with the certificate sent).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Tells the runtime of the calling thread's builder to wait `window` before it sleeps
/// in the kernel for I/O: readiness that arrives within the window is then handled in
/// one wakeup instead of one each. Latencies are unaffected because arrival times come
/// from the kernel; what it costs is up to `window` of delay before reacting (sending
/// the next request of a closed loop a little later).
pub fn coalesce_wakeups(
    builder: &mut tokio::runtime::Builder,
    window: Duration,
) -> &mut tokio::runtime::Builder {
    if window.is_zero() {
        return builder;
    }
    builder.on_thread_park(move || std::thread::sleep(window))
}

/// Raises this process's open-file limit to its hard limit (one socket per stream);
/// returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) == 0 {
                return raised.rlim_cur;
            }
        }
        limit.rlim_cur
    }
}

/// Connections opened by this process; beyond what one source address can open to one
/// destination (~28,000 ephemeral ports), loopback connections use further 127.0.0.x
/// source addresses.
static OPENED: AtomicU64 = AtomicU64::new(0);
const CONNECTIONS_PER_SOURCE: u64 = 20_000;

/// A TCP socket whose reads report when the kernel received the bytes.
pub struct Socket {
    fd: AsyncFd<std::net::TcpStream>,
    /// When the bytes of the latest read reached the socket.
    arrival: Instant,
    /// Where a reader that does not own the socket (an HTTP server handler) finds it.
    shared_arrival: Option<Arc<std::sync::Mutex<Instant>>>,
}

/// The arrival time of the latest bytes read from a [`Socket`], for whoever does not own
/// it (the simulator's handler, while hyper owns the connection).
pub type SharedArrival = Arc<std::sync::Mutex<Instant>>;

impl Socket {
    async fn connect(target: &Target) -> io::Result<Self> {
        let addresses = tokio::net::lookup_host((target.host.as_str(), target.port)).await?;
        let mut last_error = None;
        for address in addresses {
            match Self::connect_to(address).await {
                Ok(socket) => return Ok(socket),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the host name has no address")
        }))
    }

    async fn connect_to(address: SocketAddr) -> io::Result<Self> {
        let socket = match address {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        let opened = OPENED.fetch_add(1, Ordering::Relaxed);
        if let IpAddr::V4(ip) = address.ip()
            && ip.is_loopback()
            && opened >= CONNECTIONS_PER_SOURCE
        {
            let source = 1 + (opened / CONNECTIONS_PER_SOURCE % 250) as u8;
            set_option(&socket, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT)?;
            socket.bind(SocketAddr::new(Ipv4Addr::new(127, 0, 0, source).into(), 0))?;
        }
        let stream = socket.connect(address).await?;
        Self::from_tokio(stream)
    }

    fn from_tokio(stream: tokio::net::TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let stream = stream.into_std()?;
        set_option(&stream, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)?;
        // SAFETY: the TcpStream owns its descriptor, which stays open and the same until
        // the AsyncFd (which owns the stream) is dropped.
        let fd = unsafe { AsyncFd::register(stream) }.map_err(io::Error::from)?;
        Ok(Self {
            fd,
            arrival: Instant::now(),
            shared_arrival: None,
        })
    }

    /// An accepted connection, and where the arrival time of its latest read is kept.
    pub fn accepted(stream: tokio::net::TcpStream) -> io::Result<(Self, SharedArrival)> {
        let mut socket = Self::from_tokio(stream)?;
        let shared = Arc::new(std::sync::Mutex::new(socket.arrival));
        socket.shared_arrival = Some(shared.clone());
        Ok((socket, shared))
    }
}

/// One `recvmsg`: how many bytes and, from the control message, when they arrived.
fn receive(fd: std::os::fd::RawFd, buffer: &mut [u8]) -> io::Result<(usize, Instant)> {
    {
        let mut iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // Room for one cmsghdr and a timespec (SCM_TIMESTAMPNS), 8-byte aligned.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data; every pointer set below outlives the call.
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_iov = &raw mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: the descriptor is open for the lifetime of self; iov points into
        // `buffer` and msg_control into `control`, both valid for their lengths.
        let n = unsafe { libc::recvmsg(fd, &raw mut message, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let now = Instant::now();
        let mut arrival = now;
        // SAFETY: CMSG_* walk the control buffer the kernel filled in, within
        // msg_controllen; the timestamp is copied out unaligned.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&raw const message);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    let stamp: libc::timespec =
                        std::ptr::read_unaligned(libc::CMSG_DATA(header).cast());
                    arrival = arrival_from_realtime(stamp, now);
                }
                header = libc::CMSG_NXTHDR(&raw const message, header);
            }
        }
        Ok((n as usize, arrival))
    }
}

/// A kernel receive time (wall clock) as an `Instant`: `now` minus how long ago it was,
/// so that only the (short) age depends on the wall clock.
fn arrival_from_realtime(stamp: libc::timespec, now: Instant) -> Instant {
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let stamp = Duration::new(
        stamp.tv_sec.max(0) as u64,
        stamp.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    match wall.checked_sub(stamp) {
        // An age over a second means the wall clock stepped: trust the read time.
        Some(age) if age < Duration::from_secs(1) => now.checked_sub(age).unwrap_or(now),
        _ => now,
    }
}

fn set_option(socket: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int from a valid pointer of the given length.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_read_ready(cx))?;
            // SAFETY: recvmsg only writes initialised bytes into the unfilled part,
            // and we mark exactly the bytes it reported as filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            let space = unfilled.len();
            let slice = unsafe {
                std::slice::from_raw_parts_mut(unfilled.as_mut_ptr().cast::<u8>(), space)
            };
            match receive(this.fd.as_raw_fd(), slice) {
                Ok((n, arrival)) => {
                    this.arrival = arrival;
                    if let Some(shared) = &this.shared_arrival
                        && let Ok(mut shared) = shared.lock()
                    {
                        *shared = arrival;
                    }
                    // A short read drained the socket (epoll is edge-triggered): wait
                    // for the next readiness instead of trying a read that would block.
                    if n < space {
                        guard.clear_ready();
                    }
                    // SAFETY: recvmsg initialised n bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    guard.clear_ready();
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        use std::io::Write as _;
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_write_ready(cx))?;
            // std's TcpStream sends with MSG_NOSIGNAL: a closed peer is an error, not
            // a SIGPIPE.
            match guard.try_io(|inner| inner.get_ref().write(buf)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.fd.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

/// Plain TCP or TLS over it.
enum Transport {
    Plain(Socket),
    Tls(Box<tokio_rustls::client::TlsStream<Socket>>),
}

impl Transport {
    fn arrival(&self) -> Instant {
        match self {
            Transport::Plain(socket) => socket.arrival,
            Transport::Tls(stream) => stream.get_ref().0.arrival,
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
    transport: Transport,
    buffer: BytesMut,
    /// The server asked to close, or a body could not be read to its end.
    pub reusable: bool,
}

impl Connection {
    pub async fn open(endpoint: &Endpoint) -> anyhow::Result<Self> {
        let socket = Socket::connect(&endpoint.target).await.with_context(|| {
            format!(
                "cannot connect to {}:{}",
                endpoint.target.host, endpoint.target.port
            )
        })?;
        let transport = match &endpoint.tls {
            None => Transport::Plain(socket),
            Some((connector, name)) => Transport::Tls(Box::new(
                connector
                    .connect(name.clone(), socket)
                    .await
                    .with_context(|| format!("TLS handshake with {}", endpoint.target.host))?,
            )),
        };
        Ok(Self {
            transport,
            buffer: BytesMut::with_capacity(16 * 1024),
            reusable: true,
        })
    }

    pub async fn send(&mut self, request: &[u8]) -> io::Result<()> {
        match &mut self.transport {
            Transport::Plain(socket) => socket.write_all(request).await,
            Transport::Tls(stream) => {
                stream.write_all(request).await?;
                stream.flush().await
            }
        }
    }

    async fn fill(&mut self) -> io::Result<usize> {
        if self.buffer.capacity() - self.buffer.len() < 4096 {
            self.buffer.reserve(16 * 1024);
        }
        match &mut self.transport {
            Transport::Plain(socket) => socket.read_buf(&mut self.buffer).await,
            Transport::Tls(stream) => stream.read_buf(&mut self.buffer).await,
        }
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
        let mut at = self.transport.arrival();
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
                    at = self.transport.arrival();
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
            Ok(_) => Ok(self.transport.arrival()),
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
        assert!(!target.tls);
        let target = Target::parse("https://x").expect("valid");
        assert_eq!(
            (target.port, target.tls, target.host_header()),
            (443, true, "x".into())
        );
        assert_eq!(target.url("/v1/models"), "https://x/v1/models");
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://x:notaport").is_err());
        assert!(
            Target::parse("http://x:70000").is_err(),
            "a port beyond u16"
        );
        let v6 = Target::parse("http://[::1]:8000/v1").expect("valid");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8000));
        assert_eq!(v6.host_header(), "[::1]:8000");
        // Userinfo was once read as host `user` and port `pw@host`.
        let error = Target::parse("http://user:pw@gw:8080/v1").expect_err("credentials");
        assert!(
            error.to_string().contains("credentials in the URL"),
            "{error:#}"
        );
        let error = Target::parse("http://user@gw/v1").expect_err("a user name");
        assert!(!error.to_string().contains("pw"), "{error:#}");
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
        let endpoint = Endpoint::plain(target).expect("plain endpoint");
        let mut connection = Connection::open(&endpoint).await.expect("connect");
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

    #[test]
    fn kernel_arrival_times_are_mapped_onto_the_monotonic_clock() {
        let now = Instant::now();
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970");
        let age = Duration::from_millis(3);
        let stamp = wall.checked_sub(age).unwrap();
        let stamp = libc::timespec {
            tv_sec: stamp.as_secs() as _,
            tv_nsec: stamp.subsec_nanos().into(),
        };
        let arrival = arrival_from_realtime(stamp, now);
        let off = now - arrival;
        assert!(
            off >= age && off < age + Duration::from_millis(50),
            "{off:?}"
        );
        // A stamp from the future or long ago (a stepped clock) falls back to `now`.
        let future = libc::timespec {
            tv_sec: (wall.as_secs() + 60) as _,
            tv_nsec: 0,
        };
        assert_eq!(arrival_from_realtime(future, now), now);
        let past = libc::timespec {
            tv_sec: (wall.as_secs() - 60) as _,
            tv_nsec: 0,
        };
        assert_eq!(arrival_from_realtime(past, now), now);
    }
}
