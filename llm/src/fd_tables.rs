//! More sockets than the open-file limit allows, in one process.
//!
//! `RLIMIT_NOFILE` bounds the descriptor numbers of one file table, and a thread can have
//! a table of its own (`unshare(CLONE_FILES)`), so a process that must hold more sockets
//! than the limit (50,000 streams where the hard limit is 20,000 and raising it needs
//! `CAP_SYS_RESOURCE`) spreads them over threads that each have their own table and run
//! their own single-threaded event loop. A descriptor opened on such a thread means
//! nothing on any other, which is why each runs its own runtime and keeps its sockets to
//! itself; everything else (state, locks, counters) is shared as usual.
//!
//! One rule follows: a runtime's waker is a descriptor too, so a task on such a thread
//! may only be woken from that thread. Waking the other way is safe: a table is a copy
//! of the process's table at the time, so runtimes that existed before the thread
//! started (the one awaiting its result) are reachable from it.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::oneshot;

/// Descriptors left free in every table for what is not a stream: the runtime's own,
/// files, name lookups, the agent's connections.
pub const RESERVED: u64 = 256;

/// This process's open-file limit (the soft one: what `open` and `accept` obey).
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// How many file tables `sockets` sockets need under a per-table `limit`.
pub fn tables_needed(sockets: u64, limit: u64) -> usize {
    let per_table = limit.saturating_sub(RESERVED).max(1);
    sockets.div_ceil(per_table).max(1) as usize
}

/// `total` split into `parts` near-equal shares (the first ones larger).
pub fn split(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// Runs `work` on a new thread with a file table of its own and a single-threaded
/// runtime (whose idle waits are coalesced by `window`, see
/// [`crate::loadgen::http::coalesce_wakeups`]); its result arrives on the receiver.
pub fn spawn<T, F, Fut>(
    name: String,
    window: Duration,
    work: F,
) -> anyhow::Result<oneshot::Receiver<anyhow::Result<T>>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<T>>,
{
    create_process_wide_descriptors()?;
    let (sender, receiver) = oneshot::channel();
    let thread_name = name.clone();
    std::thread::Builder::new()
        .name(thread_name.clone())
        .spawn(move || {
            let result = own_file_table()
                .with_context(|| format!("{name}: cannot get a file table of its own"))
                .and_then(|()| {
                    let mut builder = tokio::runtime::Builder::new_current_thread();
                    crate::loadgen::http::coalesce_wakeups(builder.enable_all(), window);
                    builder
                        .build()
                        .with_context(|| format!("{name}: cannot start its event loop"))
                })
                .and_then(|runtime| runtime.block_on(work()));
            let _ = sender.send(result);
        })
        .with_context(|| format!("cannot start thread {thread_name}"))?;
    Ok(receiver)
}

/// Runs `work(index)` for every index below `tables`, each on a thread of its own
/// ([`spawn`], named `{name}-{index}`), and returns their results in index order.
pub async fn run_on_tables<T, W, Fut>(
    name: &str,
    tables: usize,
    window: Duration,
    work: impl Fn(usize) -> W,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    W: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let threads = (0..tables)
        .map(|index| spawn(format!("{name}-{index}"), window, work(index)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut results = Vec::with_capacity(tables);
    for (index, thread) in threads.into_iter().enumerate() {
        results.push(
            thread
                .await
                .with_context(|| format!("thread {name}-{index} ended abruptly"))??,
        );
    }
    Ok(results)
}

/// Every tokio runtime with I/O clones one process-wide socket (its signal pipe), which
/// the first such runtime creates. Created on a thread with a private table, it would be
/// a bad descriptor on every other thread, so it is created here, in the caller's table,
/// before any thread takes a copy of it.
fn create_process_wide_descriptors() -> anyhow::Result<()> {
    static CREATED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    CREATED
        .get_or_init(|| {
            // On a thread of its own (which shares the caller's table): a runtime may
            // not be dropped inside another.
            std::thread::spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                    .map(drop)
                    .map_err(|error| error.to_string())
            })
            .join()
            .unwrap_or_else(|_| Err("the thread starting it panicked".into()))
        })
        .clone()
        .map_err(|error| anyhow::anyhow!("cannot start an event loop: {error}"))
}

/// Gives the calling thread a private copy of the process's file table.
fn own_file_table() -> std::io::Result<()> {
    // SAFETY: unshare(CLONE_FILES) only replaces this thread's descriptor table with a
    // copy; descriptors other threads hold stay open and valid for them.
    if unsafe { libc::unshare(libc::CLONE_FILES) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_cover_the_sockets_with_room_to_spare() {
        assert_eq!(tables_needed(0, 20_000), 1);
        assert_eq!(tables_needed(19_744, 20_000), 1);
        assert_eq!(tables_needed(19_745, 20_000), 2);
        assert_eq!(tables_needed(50_000, 20_000), 3);
        assert_eq!(tables_needed(50_000, 1_048_576), 1);
        // A limit below the reserve still gives an answer, not a division by zero.
        assert_eq!(tables_needed(10, 100), 10);
    }

    #[test]
    fn split_shares_add_up_and_differ_by_at_most_one() {
        let shares = split(50_000, 3);
        assert_eq!(shares, vec![16_667, 16_667, 16_666]);
        assert_eq!(split(2, 3), vec![1, 1, 0]);
        assert_eq!(split(7, 0), vec![7]);
    }

    /// Three threads hold more descriptors together than one table may: the point of it.
    #[test]
    fn threads_with_own_tables_hold_more_sockets_than_the_limit() {
        let limit = open_file_limit();
        let per_thread = (limit.saturating_sub(RESERVED)).min(30_000);
        if per_thread < 100 {
            eprintln!("skipped: open-file limit {limit} leaves no room to test with");
            return;
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        // Every thread keeps its descriptors until all three hold theirs (or one gave
        // up: then the test fails instead of waiting forever).
        let holding = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let held: u64 = runtime.block_on(async {
            let mut receivers = Vec::new();
            for i in 0..3 {
                let holding = holding.clone();
                let receiver = spawn(format!("table-{i}"), Duration::ZERO, move || async move {
                    use std::sync::atomic::Ordering;
                    let mut files = Vec::new();
                    let opened = (0..per_thread).try_for_each(|_| {
                        files.push(std::fs::File::open("/dev/null")?);
                        Ok::<_, std::io::Error>(())
                    });
                    holding.fetch_add(1, Ordering::SeqCst);
                    opened.with_context(|| format!("after {} files", files.len()))?;
                    let deadline = std::time::Instant::now() + Duration::from_secs(30);
                    while holding.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Ok(files.len() as u64)
                })
                .expect("thread");
                receivers.push(receiver);
            }
            let mut held = 0;
            for (i, receiver) in receivers.into_iter().enumerate() {
                held += receiver
                    .await
                    .expect("thread ended")
                    .unwrap_or_else(|error| panic!("table-{i}: {error:#}"));
            }
            held
        });
        assert_eq!(held, 3 * per_thread);
        assert!(
            held > limit,
            "{held} sockets should exceed the limit {limit}"
        );
    }
}
