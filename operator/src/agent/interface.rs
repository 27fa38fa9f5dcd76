//! The network interface that carries an address (for `{interface}`: tools such as
//! Open MPI select interfaces by name).

use std::ffi::CStr;
use std::net::IpAddr;

use perfsweep_benchmarks::execution::agent_report::Counters;

/// The name of the interface that has `address`; for a loopback address no interface
/// has (the local backend gives each process its own 127.0.0.N, all on `lo`), the
/// loopback interface.
pub fn interface_of(address: &str) -> Option<String> {
    let wanted: IpAddr = address.parse().ok()?;
    let interfaces = list();
    interfaces
        .iter()
        .find(|(_, ip, _)| *ip == wanted)
        .or_else(|| {
            wanted
                .is_loopback()
                .then(|| interfaces.iter().find(|(_, _, loopback)| *loopback))
                .flatten()
        })
        .map(|(name, _, _)| name.clone())
}

/// (name, address, is loopback) of every interface address.
fn list() -> Vec<(String, IpAddr, bool)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free once.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return out;
    }
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: cursor is a node of the list getifaddrs returned.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(entry.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let loopback = entry.ifa_flags & (libc::IFF_LOOPBACK as libc::c_uint) != 0;
        // SAFETY: sa_family tells which sockaddr type ifa_addr points to.
        // getifaddrs allocates each address as its family's type, so it is aligned for it.
        #[allow(clippy::cast_ptr_alignment)]
        let address = unsafe {
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let v4 = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
                }
                libc::AF_INET6 => {
                    let v6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(v6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if let Some(address) = address {
            out.push((name, address, loopback));
        }
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    #[test]
    fn counters_are_read_per_interface_and_unreadable_ones_are_left_out() {
        let root = std::env::temp_dir().join(format!("perfsweep-counters-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |iface: &str, mtu: &str, tx: &str, rx: &str| {
            let dir = root.join(iface);
            std::fs::create_dir_all(dir.join("statistics")).expect("dirs");
            std::fs::write(dir.join("mtu"), mtu).expect("mtu");
            std::fs::write(dir.join("statistics/tx_bytes"), tx).expect("tx");
            std::fs::write(dir.join("statistics/rx_bytes"), rx).expect("rx");
        };
        write("eth0", "1500\n", "100\n", "200\n");
        write("net1", "3000\n", "7\n", "9\n");
        write("lo", "65536\n", "1\n", "1\n");
        write("broken", "not a number\n", "1\n", "1\n");
        let found = counters_in(&root);
        assert_eq!(found.keys().collect::<Vec<_>>(), ["eth0", "lo", "net1"]);
        assert_eq!(
            found["net1"],
            Counters {
                mtu: 3000,
                tx_bytes: 7,
                rx_bytes: 9
            }
        );
        assert!(counters_in(&root.join("absent")).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_are_on_the_loopback_interface() {
        let lo = interface_of("127.0.0.1").expect("a loopback interface");
        assert_eq!(interface_of("127.0.0.7"), Some(lo));
        assert_eq!(interface_of("not an address"), None);
        assert_eq!(interface_of("192.0.2.254"), None, "TEST-NET-1 is nobody's");
    }
}

/// Every interface's MTU and byte counters from sysfs (`/sys/class/net`), loopback
/// included (a local run's data address is on it); an interface whose files cannot be
/// read is left out.
pub fn counters() -> std::collections::BTreeMap<String, Counters> {
    counters_in(std::path::Path::new("/sys/class/net"))
}

/// [`counters`] under `root` (a directory laid out like `/sys/class/net`).
pub fn counters_in(root: &std::path::Path) -> std::collections::BTreeMap<String, Counters> {
    let number = |path: std::path::PathBuf| -> Option<u64> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let Ok(entries) = std::fs::read_dir(root) else {
        return std::collections::BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let dir = entry.path();
            Some((
                name,
                Counters {
                    mtu: u32::try_from(number(dir.join("mtu"))?).ok()?,
                    tx_bytes: number(dir.join("statistics/tx_bytes"))?,
                    rx_bytes: number(dir.join("statistics/rx_bytes"))?,
                },
            ))
        })
        .collect()
}
