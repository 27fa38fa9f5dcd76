//! Whether something listens on a TCP port in this network namespace, read from
//! `/proc/net/tcp{,6}`. Connecting to find out would count as a client to servers that
//! take exactly one (iperf3 --one-off, perftest) and spoil the measurement.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether a socket in LISTEN state is bound to `port`.
pub fn is_listening(port: u16) -> bool {
    is_listening_on(port, None)
}

/// Whether a socket in LISTEN state is bound to `port` on `address` (or on every
/// address). Several local processes have their own loopback addresses and may listen on
/// the same port; one's listener must not make another ready. `None`: any address.
pub fn is_listening_on(port: u16, address: Option<IpAddr>) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .any(|table| table_has_listener_on(&table, port, address))
}

/// Parses one `/proc/net/tcp` table: `sl local_address rem_address st ...`, addresses as
/// `HEXIP:HEXPORT`, state `0A` meaning LISTEN.
pub fn table_has_listener(table: &str, port: u16) -> bool {
    table_has_listener_on(table, port, None)
}

/// [`table_has_listener`], for listeners bound to `address` or to every address.
pub fn table_has_listener_on(table: &str, port: u16, address: Option<IpAddr>) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1);
        let state = fields.nth(1);
        let Some((ip, local_port)) = local.and_then(|l| l.rsplit_once(':')) else {
            return false;
        };
        let bound = parse_ip(ip);
        state == Some("0A")
            && u16::from_str_radix(local_port, 16).ok() == Some(port)
            && match (address, bound) {
                (None, _) => true,
                (Some(_), Some(bound)) if bound.is_unspecified() => true,
                (Some(wanted), Some(IpAddr::V6(bound))) => {
                    IpAddr::V6(bound) == wanted
                        || bound.to_ipv4_mapped().map(IpAddr::V4) == Some(wanted)
                }
                (Some(wanted), Some(bound)) => bound == wanted,
                (Some(_), None) => false,
            }
    })
}

/// The kernel prints addresses as 32-bit words in host byte order, in hex.
fn parse_ip(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| {
        hex.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut octets = [0u8; 16];
            for i in 0..4 {
                octets[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";

    #[test]
    fn finds_listeners_by_port_and_state() {
        assert!(
            table_has_listener(TABLE, 5201),
            "0x1451 = 5201 is listening"
        );
        assert!(
            !table_has_listener(TABLE, 8080),
            "0x1F90 = 8080 is an established connection"
        );
        assert!(!table_has_listener("garbage", 5201));
    }

    #[test]
    fn tells_listeners_on_different_addresses_apart() {
        // 127.0.0.2:8765 and [::]:9000 listening.
        let v4 = "  sl  local_address rem_address   st
   0: 0200007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
";
        let v6 = "  sl  local_address rem_address   st
   0: 00000000000000000000000000000000:2328 00000000000000000000000000000000:0000 0A 0
";
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert!(table_has_listener_on(v4, 8765, ip("127.0.0.2")));
        assert!(!table_has_listener_on(v4, 8765, ip("127.0.0.3")));
        assert!(table_has_listener_on(v4, 8765, None));
        assert!(table_has_listener_on(v6, 9000, ip("10.1.2.3")));
    }

    #[test]
    fn sees_a_real_listener_on_its_address() {
        let listener = std::net::TcpListener::bind("127.0.0.3:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(is_listening_on(port, "127.0.0.3".parse().ok()));
        assert!(!is_listening_on(port, "127.0.0.4".parse().ok()));
        drop(listener);
    }

    #[test]
    fn sees_a_real_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(is_listening(port));
        drop(listener);
    }
}
