//! Finding a peer's address by its DNS name the moment the record is published.
//!
//! A benchmark's pods start together, and each agent looks its peers up by their names
//! under the benchmark's headless Service. A lookup made a few milliseconds before the
//! peer's record is published gets "no such name", and the cluster DNS caches that
//! answer: CoreDNS for the zone's negative TTL (5 s by default), during which every
//! retry of the system resolver gets the same cached answer. Measured on the e2e
//! cluster, that was a 5 s stall in most rounds of a node-pair sweep.
//!
//! So the agent asks the system resolver first (which also knows /etc/hosts and IP
//! literals), and after a miss asks the DNS server itself in cache slots the miss did
//! not fill ([`wire::Slot`]), spread over the next seconds. Whatever fails here falls
//! back to the system resolver's answer: this only ever finds a record sooner.

mod wire;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

pub use wire::Slot;
use wire::{Answer, WireError};

/// How long one question to the DNS server may take.
const QUERY_TIMEOUT: Duration = Duration::from_millis(500);
/// The negative TTL the slots are spread over: CoreDNS's default for its zones.
const NEGATIVE_TTL: Duration = Duration::from_secs(5);

/// The address to connect to for `endpoint` (`host:port`).
pub async fn resolve(endpoint: &str) -> std::io::Result<SocketAddr> {
    let system = match tokio::net::lookup_host(endpoint).await {
        Ok(mut addresses) => match addresses.next() {
            Some(address) => return Ok(address),
            None => std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{endpoint}: no address"),
            ),
        },
        Err(error) => error,
    };
    let Some((host, port)) = split(endpoint) else {
        return Err(system);
    };
    let slot = misses().slot_after_miss(host, Instant::now());
    if slot == Slot::System {
        return Err(system);
    }
    let config = resolv_conf();
    let Some(server) = config.nameserver else {
        return Err(system);
    };
    match ask_server(config, SocketAddr::new(server, 53), host, slot).await {
        Ok(Some(ip)) => {
            tracing::debug!(%host, ?slot, %ip, "found in a fresh cache slot");
            let found = SocketAddr::new(IpAddr::V4(ip), port);
            remember(endpoint, found);
            Ok(found)
        }
        Ok(None) => Err(system),
        Err(error) => {
            tracing::debug!(%host, ?slot, %error, "asking the DNS server directly failed");
            Err(system)
        }
    }
}

/// `endpoint` as `ip:port` when this process found it in a fresh slot: the processes it
/// starts (an MPI launcher's `perfsweep rsh`, a load generator's barrier) would ask the
/// system resolver, whose slot may still hold the miss. A pod keeps its IP for life.
pub fn known(endpoint: &str) -> String {
    found()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(endpoint)
        .map_or_else(|| endpoint.to_owned(), ToString::to_string)
}

fn found() -> &'static Mutex<HashMap<String, SocketAddr>> {
    static FOUND: OnceLock<Mutex<HashMap<String, SocketAddr>>> = OnceLock::new();
    FOUND.get_or_init(Mutex::default)
}

fn remember(endpoint: &str, address: SocketAddr) {
    found()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(endpoint.to_owned(), address);
}

/// [`resolve`], tried again until `patience` has passed: for a process that starts
/// after its parent found the peer, and whose own first look may hit the cached miss.
pub async fn resolve_patiently(endpoint: &str, patience: Duration) -> std::io::Result<SocketAddr> {
    let started = Instant::now();
    loop {
        match resolve(endpoint).await {
            Ok(address) => return Ok(address),
            Err(error) if started.elapsed() >= patience => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// `host` and `port` of a `host:port` whose host is a name (not an IP literal).
fn split(endpoint: &str) -> Option<(&str, u16)> {
    let (host, port) = endpoint.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    (literal.parse::<IpAddr>().is_err() && !host.is_empty()).then_some((host, port))
}

#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// The first A record of the first search candidate of `host` that has one, asked of
/// `server` in `slot`.
async fn ask_server(
    config: &ResolvConf,
    server: SocketAddr,
    host: &str,
    slot: Slot,
) -> Result<Option<std::net::Ipv4Addr>, AskError> {
    for name in config.candidates(host) {
        let id = question_id();
        let question = wire::query(id, &name, slot)?;
        let socket = UdpSocket::bind(match server {
            SocketAddr::V4(_) => "0.0.0.0:0",
            SocketAddr::V6(_) => "[::]:0",
        })
        .await?;
        socket.connect(server).await?;
        socket.send(&question).await?;
        let mut buffer = [0u8; 1500];
        let received = tokio::time::timeout(QUERY_TIMEOUT, socket.recv(&mut buffer))
            .await
            .map_err(|_| AskError::Timeout(QUERY_TIMEOUT))??;
        if let Answer::Addresses(addresses) = wire::answer(id, &buffer[..received])? {
            return Ok(addresses.first().copied());
        }
    }
    Ok(None)
}

/// A random question id: an answer that does not carry it is not the answer.
fn question_id() -> u16 {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 2];
    match ring::rand::SystemRandom::new().fill(&mut bytes) {
        Ok(()) => u16::from_be_bytes(bytes),
        Err(_) => std::process::id() as u16,
    }
}

/// What /etc/resolv.conf says (read once: the kubelet writes it before the agent starts).
fn resolv_conf() -> &'static ResolvConf {
    static CONF: OnceLock<ResolvConf> = OnceLock::new();
    CONF.get_or_init(|| {
        std::fs::read_to_string("/etc/resolv.conf")
            .map(|text| ResolvConf::parse(&text))
            .unwrap_or_default()
    })
}

#[derive(Debug, Default, PartialEq)]
struct ResolvConf {
    nameserver: Option<IpAddr>,
    search: Vec<String>,
    ndots: usize,
}

impl ResolvConf {
    fn parse(text: &str) -> Self {
        let mut conf = ResolvConf {
            ndots: 1,
            ..ResolvConf::default()
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") if conf.nameserver.is_none() => {
                    conf.nameserver = words.next().and_then(|w| w.parse().ok());
                }
                Some("search") => conf.search = words.map(str::to_owned).collect(),
                Some("options") => {
                    for option in words {
                        if let Some(n) = option.strip_prefix("ndots:").and_then(|n| n.parse().ok())
                        {
                            conf.ndots = n;
                        }
                    }
                }
                _ => {}
            }
        }
        conf
    }

    /// The names the system resolver would try for `host`, in its order.
    fn candidates(&self, host: &str) -> Vec<String> {
        if let Some(absolute) = host.strip_suffix('.') {
            return vec![absolute.to_owned()];
        }
        let searched = self.search.iter().map(|domain| format!("{host}.{domain}"));
        if host.matches('.').count() >= self.ndots {
            std::iter::once(host.to_owned()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(host.to_owned())).collect()
        }
    }
}

/// When each name was first not found, to spread the fresh slots over the negative TTL.
#[derive(Default)]
struct Misses(Mutex<HashMap<String, Instant>>);

fn misses() -> &'static Misses {
    static MISSES: OnceLock<Misses> = OnceLock::new();
    MISSES.get_or_init(Misses::default)
}

impl Misses {
    /// The slot to ask in after the system resolver missed `host` at `now`.
    fn slot_after_miss(&self, host: &str, now: Instant) -> Slot {
        let mut first = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let since = now.saturating_duration_since(*first.entry(host.to_owned()).or_insert(now));
        slot_at(since)
    }
}

/// The slot for a retry `since` the first miss. Each fresh slot is spent once, later
/// ones further apart (a record is usually published within a second); when the first
/// miss's cached answer has expired the system resolver's own slot is fresh again.
fn slot_at(since: Duration) -> Slot {
    let within = Duration::from_nanos((since.as_nanos() % NEGATIVE_TTL.as_nanos()) as u64);
    match within.as_millis() {
        0..300 => Slot::System,
        300..1000 => Slot::CheckingDisabled,
        1000..2000 => Slot::DnssecOk,
        _ => Slot::Both,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBELET_RESOLV_CONF: &str = "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n";

    #[test]
    fn the_kubelets_resolv_conf_is_read() {
        let conf = ResolvConf::parse(KUBELET_RESOLV_CONF);
        assert_eq!(conf.nameserver, Some("10.96.0.10".parse().expect("ip")));
        assert_eq!(conf.ndots, 5);
        assert_eq!(
            conf.candidates("server-0.bench"),
            [
                "server-0.bench.default.svc.cluster.local",
                "server-0.bench.svc.cluster.local",
                "server-0.bench.cluster.local",
                "server-0.bench",
            ]
        );
        assert_eq!(conf.candidates("a.example."), ["a.example"]);
    }

    #[test]
    fn a_name_with_enough_dots_is_tried_as_it_is_first() {
        let conf = ResolvConf::parse("search corp\nnameserver 192.0.2.1\n");
        assert_eq!(conf.ndots, 1);
        assert_eq!(conf.candidates("a.b"), ["a.b", "a.b.corp"]);
        assert_eq!(conf.candidates("a"), ["a.corp", "a"]);
    }

    #[test]
    fn the_fresh_slots_are_spread_over_the_negative_ttl_then_start_again() {
        use Slot::*;
        let ms = Duration::from_millis;
        let slots: Vec<Slot> = [0, 299, 300, 999, 1000, 1999, 2000, 4999, 5000, 5300]
            .into_iter()
            .map(|n| slot_at(ms(n)))
            .collect();
        assert_eq!(
            slots,
            [
                System,
                System,
                CheckingDisabled,
                CheckingDisabled,
                DnssecOk,
                DnssecOk,
                Both,
                Both,
                System,
                CheckingDisabled
            ]
        );
    }

    #[test]
    fn the_slot_counts_from_the_first_miss_of_each_name() {
        let misses = Misses::default();
        let start = Instant::now();
        assert_eq!(misses.slot_after_miss("a", start), Slot::System);
        let later = start + Duration::from_millis(400);
        assert_eq!(misses.slot_after_miss("a", later), Slot::CheckingDisabled);
        assert_eq!(misses.slot_after_miss("b", later), Slot::System);
    }

    /// A DNS server with a cached miss for every question in the system resolver's slot
    /// (no CD, no OPT record), and the record itself for questions in any other slot.
    async fn server_with_a_cached_miss(address: [u8; 4]) -> SocketAddr {
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let local = socket.local_addr().expect("address");
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            while let Ok((n, peer)) = socket.recv_from(&mut buffer).await {
                let question = &buffer[..n];
                let fresh = question[3] & 0x10 != 0 || question[11] == 1;
                let mut reply = question.to_vec();
                reply[2] |= 0x80;
                reply[3] = if fresh { 0 } else { 3 };
                reply[10..12].copy_from_slice(&[0, 0]);
                // Drop a question's OPT record from the echo: header + name + type/class.
                let name_end = 12 + reply[12..].iter().position(|b| *b == 0).expect("root") + 1;
                reply.truncate(name_end + 4);
                if fresh {
                    reply[6..8].copy_from_slice(&[0, 1]);
                    reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
                    reply.extend_from_slice(&address);
                }
                let _ = socket.send_to(&reply, peer).await;
            }
        });
        local
    }

    #[tokio::test]
    async fn a_record_a_cached_miss_hides_is_found_in_a_fresh_slot() {
        let server = server_with_a_cached_miss([10, 77, 1, 44]).await;
        let conf = ResolvConf::parse(KUBELET_RESOLV_CONF);
        let cached = ask_server(&conf, server, "server-0.bench", Slot::System).await;
        assert_eq!(cached.expect("answered"), None, "the cached miss");
        for slot in [Slot::CheckingDisabled, Slot::DnssecOk, Slot::Both] {
            let fresh = ask_server(&conf, server, "server-0.bench", slot).await;
            assert_eq!(
                fresh.expect("answered"),
                Some(std::net::Ipv4Addr::new(10, 77, 1, 44)),
                "{slot:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_silent_server_is_an_error_within_the_query_timeout() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let server = silent.local_addr().expect("address");
        let conf = ResolvConf::parse(KUBELET_RESOLV_CONF);
        let started = Instant::now();
        let error = ask_server(&conf, server, "server-0.bench", Slot::Both).await;
        assert!(matches!(error, Err(AskError::Timeout(_))), "{error:?}");
        assert!(started.elapsed() < QUERY_TIMEOUT * 2);
    }

    #[test]
    fn an_endpoint_found_in_a_fresh_slot_is_handed_on_as_its_address() {
        let endpoint = "worker-0.handed-on:7470";
        assert_eq!(known(endpoint), endpoint, "not found yet: the name");
        remember(endpoint, "10.77.2.9:7470".parse().expect("address"));
        assert_eq!(known(endpoint), "10.77.2.9:7470");
    }

    #[test]
    fn ip_literals_and_malformed_endpoints_are_not_asked_for() {
        assert_eq!(split("server-0.bench:7470"), Some(("server-0.bench", 7470)));
        assert_eq!(split("10.0.0.1:7470"), None);
        assert_eq!(split("[::1]:7470"), None);
        assert_eq!(split("name-without-port"), None);
        assert_eq!(split(":7470"), None);
    }
}
