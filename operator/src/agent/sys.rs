//! Safe wrappers over the few process-level system calls std does not offer, for the
//! local backend's process tree and the binary's start. The operator crate denies
//! `unsafe` everywhere but the agent module (lib.rs); the agent's own calls stay beside
//! their use (`interface`, `mpi`), these are shared with the rest of the crate.

/// Makes this process the subreaper of everything it starts (Linux 3.4+): orphaned
/// descendants are re-parented to it rather than to init.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer and touches no memory.
    let done = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks the kernel to send `command`'s process SIGTERM when the thread that started it
/// dies (PR_SET_PDEATHSIG, set between fork and exec).
pub fn terminate_with_parent_thread(command: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // which is async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` to process group `group`; a group that is gone is ignored (ESRCH).
pub fn signal_group(group: i32, signal: libc::c_int) {
    // SAFETY: sending a signal touches no memory.
    unsafe { libc::killpg(group, signal) };
}

/// Sends `signal` to process `pid`; a process that is gone is ignored (ESRCH).
pub fn signal_process(pid: i32, signal: libc::c_int) {
    // SAFETY: as above, for one process.
    unsafe { libc::kill(pid, signal) };
}

/// Reaps child `pid` if it has ended, without waiting.
pub fn reap_if_ended(pid: i32) {
    let mut status = 0;
    // SAFETY: waitpid writes the status into our local integer only.
    unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
}

/// The user and system CPU time this process has used, in seconds.
pub fn own_cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } != 0 {
        return None;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Restores SIGPIPE's default disposition (Rust ignores it). Call first thing in main,
/// before any thread exists.
pub fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; setting a signal's
    // disposition to its default has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_uid_is_the_owner_of_what_this_process_creates() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = std::env::temp_dir().join(format!("perfsweep-sys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let owner = std::fs::metadata(&dir).map(|m| m.uid());
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(owner.ok(), Some(effective_uid()));
    }

    #[test]
    fn signalling_a_process_that_is_gone_is_harmless() {
        // No process has pid i32::MAX (pid_max is at most 2^22).
        signal_process(i32::MAX, 0);
        signal_group(i32::MAX, 0);
        reap_if_ended(i32::MAX);
    }
}

/// The memory this process's container may use, in bytes: the cgroup's limit (v2's
/// `memory.max`, v1's `memory.limit_in_bytes`) when it has one below the machine's
/// memory, else the machine's (`MemTotal`). What a benchmark sizing its problem to the
/// node (HPL's N) must stay within, or the kernel's OOM killer ends it.
pub fn memory_limit_bytes() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| meminfo_total(&text))
        .unwrap_or(u64::MAX);
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .find_map(|text| text.trim().parse::<u64>().ok());
    cgroup.map_or(machine, |limit| limit.min(machine))
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod memory_tests {
    #[test]
    fn memtotal_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(super::meminfo_total(text), Some(24_576_000 * 1024));
        assert_eq!(super::meminfo_total("MemFree: 1 kB\n"), None);
        assert!(super::memory_limit_bytes() > 0);
    }
}
