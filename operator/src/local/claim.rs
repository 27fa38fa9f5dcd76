//! Loopback addresses of one local run. Each run claims a block of its own, 127.B.0.0/16
//! (B from 1 to 254), by holding a lock on a file named after it, so that two runs on
//! one machine never give their processes the same address: servers that bind their own
//! data address can all use the plan's port, in one run and across runs. The kernel drops
//! the lock when the run ends however it ends, so a killed run leaves no stale claim.
//! The file names the holder, for the message when every block is taken.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The second octets a run may claim; 127.0.0.0/16 is left to everything else.
const BLOCKS: std::ops::RangeInclusive<u8> = 1..=254;

/// Who holds a block: written into its lock file.
#[derive(Clone, Debug)]
pub struct Holder {
    pub run_id: String,
    pub pid: u32,
    pub directory: String,
}

impl Holder {
    /// This process, running `run_id`.
    pub fn this_process(run_id: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            pid: std::process::id(),
            directory: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        }
    }

    fn line(&self) -> String {
        format!(
            "run {} (pid {}, in {})",
            self.run_id, self.pid, self.directory
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("cannot use the lock directory {dir}: {source}")]
    Directory {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "every loopback block is taken by other local runs (the first: {first}); wait for one to end"
    )]
    Exhausted { first: String },
}

/// A claimed block, held until dropped.
#[derive(Debug)]
pub struct LoopbackBlock {
    octet: u8,
    _lock: File,
}

impl LoopbackBlock {
    /// Claims the first free block, with its lock files in `dir`.
    pub fn claim(dir: &Path, holder: &Holder) -> Result<Self, ClaimError> {
        let directory = |source| ClaimError::Directory {
            dir: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(directory)?;
        let mut first_holder = None;
        for octet in BLOCKS {
            let path = dir.join(format!("127.{octet}.lock"));
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(directory)?;
            match file.try_lock() {
                Ok(()) => {
                    // Best effort: the name only serves messages.
                    let _ = file.set_len(0);
                    let _ = file.rewind();
                    let _ = file.write_all(holder.line().as_bytes());
                    return Ok(Self { octet, _lock: file });
                }
                Err(TryLockError::WouldBlock) => {
                    if first_holder.is_none() {
                        let mut text = String::new();
                        let _ = file.read_to_string(&mut text);
                        first_holder = Some(text);
                    }
                }
                Err(TryLockError::Error(error)) => return Err(directory(error)),
            }
        }
        Err(ClaimError::Exhausted {
            first: first_holder.unwrap_or_default(),
        })
    }

    /// Where the lock files live: one directory per user, beside other temporary files.
    pub fn default_dir() -> PathBuf {
        let uid = crate::agent::sys::effective_uid();
        std::env::temp_dir().join(format!("perfsweep-loopback-{uid}"))
    }

    /// The block's second octet (B in 127.B.0.0/16).
    pub fn octet(&self) -> u8 {
        self.octet
    }

    /// The address of the `number`th process of a plan.
    pub fn address(&self, number: usize) -> Option<Ipv4Addr> {
        block_address(self.octet, number)
    }
}

/// The `number`th address of block 127.`octet`.0.0/16: 127.B.0.2 onwards, short of the
/// block's last address (Linux routes all of 127.0.0.0/8 to the loopback interface).
pub fn block_address(octet: u8, number: usize) -> Option<Ipv4Addr> {
    let first = u32::from(Ipv4Addr::new(127, octet, 0, 2));
    let last = u32::from(Ipv4Addr::new(127, octet, 255, 254));
    let address = first.checked_add(u32::try_from(number).ok()?)?;
    (address <= last).then(|| Ipv4Addr::from(address))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_claims_get_different_blocks_and_a_dropped_claim_is_free_again() {
        let dir = std::env::temp_dir().join(format!("perfsweep-claim-test-{}", std::process::id()));
        let holder = Holder::this_process("r1");
        let first = LoopbackBlock::claim(&dir, &holder).expect("a block");
        let second = LoopbackBlock::claim(&dir, &holder).expect("another block");
        assert_ne!(first.octet(), second.octet());
        assert_ne!(first.address(0), second.address(0));
        let octet = first.octet();
        drop(first);
        let third = LoopbackBlock::claim(&dir, &holder).expect("the freed block");
        assert_eq!(third.octet(), octet);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn addresses_stay_inside_their_block() {
        assert_eq!(block_address(7, 0), Some(Ipv4Addr::new(127, 7, 0, 2)));
        assert_eq!(block_address(7, 254), Some(Ipv4Addr::new(127, 7, 1, 0)));
        assert_eq!(
            block_address(7, 65532),
            Some(Ipv4Addr::new(127, 7, 255, 254))
        );
        assert_eq!(block_address(7, 65533), None);
    }
}
