//! Whether something listens on a TCP port in this network namespace, read from
//! `/proc/net/tcp{,6}`. Connecting to find out would count as a client to servers that
//! take exactly one (iperf3 --one-off, perftest) and spoil the measurement.

/// Whether a socket in LISTEN state is bound to `port`.
pub fn is_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .any(|table| table_has_listener(&table, port))
}

/// Parses one `/proc/net/tcp` table: `sl local_address rem_address st ...`, addresses as
/// `HEXIP:HEXPORT`, state `0A` meaning LISTEN.
pub fn table_has_listener(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1);
        let state = fields.nth(1);
        let local_port = local
            .and_then(|l| l.rsplit_once(':'))
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
        state == Some("0A") && local_port == Some(port)
    })
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
    fn sees_a_real_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(is_listening(port));
        drop(listener);
    }
}
