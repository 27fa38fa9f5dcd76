//! A local run owns every process it starts, and ends them all on every way out.
//!
//! The run makes itself a child subreaper, so a tool that outlives its agent (an agent
//! killed while `fio --server` still listens, a daemon that double-forks) is re-parented
//! to the run rather than to init, and stays findable as a descendant. Each agent starts
//! in its own process group and asks the kernel to end it should the run die without
//! cleaning up (SIGKILL). At the end of every benchmark, and on every exit path, the run
//! signals those groups and every descendant it can find in `/proc`: SIGTERM, a grace
//! period, then SIGKILL, and reaps what it inherited.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Makes this process the subreaper of everything it starts (Linux 3.4+).
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer and touches no memory.
    let done = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if done == 0 {
        OWNS_DESCENDANTS.store(true, Ordering::Relaxed);
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Configures `command` to start in a process group of its own (so one signal reaches
/// it and every tool it starts, and a Ctrl-C in the terminal reaches only the run, which
/// then stops it in order) and to end with its parent (see [`end_with_parent`]).
pub fn own(command: &mut tokio::process::Command) {
    command.process_group(0);
    end_with_parent(command);
}

/// Asks the kernel to send `command`'s process SIGTERM when the thread that started it
/// dies: when the run (or an agent) is killed outright and cannot clean up. Tokio's
/// worker threads, which start every process here, live as long as the process.
pub fn end_with_parent(command: &mut tokio::process::Command) {
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

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ppid pgrp session …`. The command name
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
        session,
    })
}

/// Every process on the machine (those that vanish while being read are left out).
pub fn processes() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|text| parse_stat(&text))
        .collect()
}

/// The living (not zombie) descendants of `root` among `processes`, and the members of
/// `groups`, whoever their parent now is.
pub fn members(processes: &[Stat], root: i32, groups: &BTreeSet<i32>) -> BTreeSet<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for process in processes {
        children.entry(process.ppid).or_default().push(process.pid);
    }
    let mut found = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if found.insert(child) {
                stack.push(child);
            }
        }
    }
    found.extend(
        processes
            .iter()
            .filter(|p| groups.contains(&p.pgrp))
            .map(|p| p.pid),
    );
    let zombies: BTreeSet<i32> = processes
        .iter()
        .filter(|p| p.state == 'Z')
        .map(|p| p.pid)
        .collect();
    found.retain(|pid| *pid != root && !zombies.contains(pid));
    found
}

/// Set once this process is a subreaper: then every descendant belongs to the run (the
/// `perfsweep run` command), and ending a benchmark may end them all. A library caller
/// (a test starting other children) keeps its own children: only the groups end then.
static OWNS_DESCENDANTS: AtomicBool = AtomicBool::new(false);

/// The process groups of one benchmark's agents. Dropped without [`Self::end_all`] (a
/// run stopped mid-benchmark by a signal), it kills them outright.
#[derive(Debug, Default)]
pub struct Groups {
    groups: BTreeSet<i32>,
}

impl Groups {
    /// Remembers the group led by the process `pid` (started with [`own`]).
    pub fn add(&mut self, pid: Option<u32>) {
        if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
            self.groups.insert(pid);
        }
    }

    /// Ends the groups (and, in a subreaper, every descendant): SIGTERM, up to `grace`
    /// for them to go, then SIGKILL. Returns how many processes had to be signalled.
    pub async fn end_all(&mut self, grace: Duration) -> usize {
        let groups = std::mem::take(&mut self.groups);
        end(&groups, grace).await
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        signal(&self.groups, &BTreeSet::new(), libc::SIGKILL);
    }
}

/// Ends `groups` and, when this process is a subreaper, every descendant of it (see
/// [`Groups::end_all`]).
pub async fn end(groups: &BTreeSet<i32>, grace: Duration) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let everything = OWNS_DESCENDANTS.load(Ordering::Relaxed);
    let alive = || {
        let table = processes();
        let mut found = members(&table, me, groups);
        if !everything {
            let in_groups: BTreeSet<i32> = table
                .iter()
                .filter(|p| groups.contains(&p.pgrp))
                .map(|p| p.pid)
                .collect();
            found.retain(|pid| in_groups.contains(pid));
        }
        found
    };
    let first = alive();
    if first.is_empty() {
        reap_inherited();
        return 0;
    }
    signal(groups, &first, libc::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        reap_inherited();
        let left = alive();
        if left.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            signal(groups, &left, libc::SIGKILL);
            // SIGKILL cannot be refused; give the kernel a moment to finish them.
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                reap_inherited();
                if alive().is_empty() {
                    break;
                }
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    first.len()
}

fn signal(groups: &BTreeSet<i32>, pids: &BTreeSet<i32>, signal: libc::c_int) {
    for &group in groups {
        // SAFETY: sending a signal touches no memory; a group that is gone is ESRCH.
        unsafe { libc::killpg(group, signal) };
    }
    for &pid in pids {
        // SAFETY: as above, for one process.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Reaps the zombies among this process's children that nobody waits for: tools
/// re-parented to the run (the subreaper) when their agent ended. Agents themselves are
/// waited for by their handles; reaping one here first only makes that wait end early.
fn reap_inherited() {
    if !OWNS_DESCENDANTS.load(Ordering::Relaxed) {
        return;
    }
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    for zombie in processes()
        .iter()
        .filter(|p| p.ppid == me && p.state == 'Z')
    {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local integer only.
        unsafe { libc::waitpid(zombie.pid, &raw mut status, libc::WNOHANG) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let stat =
            parse_stat("4242 (fio (server) x) S 17 4240 4000 0 -1 4194560 …").expect("parses");
        assert_eq!(
            stat,
            Stat {
                pid: 4242,
                state: 'S',
                ppid: 17,
                pgrp: 4240,
                session: 4000
            }
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("12 (x) S notanumber 1 1"), None);
    }

    #[test]
    fn members_are_descendants_and_group_members_but_not_zombies() {
        let p = |pid, state, ppid, pgrp| Stat {
            pid,
            state,
            ppid,
            pgrp,
            session: 1,
        };
        let table = [
            p(10, 'S', 1, 10),  // the run
            p(11, 'S', 10, 11), // an agent
            p(12, 'S', 11, 11), // its tool
            p(13, 'Z', 10, 13), // a dead agent
            p(14, 'S', 1, 11),  // a tool orphaned elsewhere, still in the group
            p(15, 'S', 1, 15),  // unrelated
        ];
        let found = members(&table, 10, &BTreeSet::from([11]));
        assert_eq!(found, BTreeSet::from([11, 12, 14]));
    }
}
