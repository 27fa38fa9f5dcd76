//! The challenge-response every request to an agent's control endpoint passes, and the
//! bounded reads that keep an unauthenticated peer from holding the agent's memory or
//! its connections.
//!
//! A benchmark's agents share one random token (on Kubernetes a Secret owned by the
//! benchmark, mounted only into its pods; locally random per run). A request names its
//! command; the agent answers with a fresh random nonce; the client proves it holds the
//! token with `HMAC-SHA256(token, nonce ‖ 0 ‖ words joined by 0)`. The token never
//! crosses the network, a recorded request cannot be replayed (the nonce is new each
//! time), and the MAC binds the command's words, so a proof for `STATUS` does not stop
//! anything. The comparison is `ring`'s constant-time `hmac::verify`.
//!
//! Every MAC is made in a [`Context`] whose label leads the signed message: a client's
//! proof for a request, an agent's answer, a remote command and each frame of its
//! output are signed apart, so a MAC obtained in one (a client tricked into proving a
//! nonce an impostor chose) never verifies as another (an answer the impostor forges).

use std::time::Duration;

use ring::hmac;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// Longest command line (`BARRIER <name> <index>` and the like).
pub const MAX_COMMAND_LINE: usize = 256;
/// Longest request or answer line after the command (an `EXEC` argument vector, a
/// status): Open MPI's daemon command lines are a few KiB.
pub const MAX_LINE: usize = 64 * 1024;
/// How long the agent waits for each line of a request before it hangs up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A new random token, hex-encoded (256 bits): [`crate::token::random`].
pub fn random_token() -> Result<String, crate::token::RandomUnavailable> {
    crate::token::random()
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What a MAC vouches for (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// A client's proof for an agent's challenge: the request's words.
    Request,
    /// An agent's answer, for the client's nonce.
    Reply,
    /// A launcher's remote command: the argument vector.
    Exec,
    /// One frame of a remote command's output: its sequence number, kind and payload.
    ExecFrame,
}

impl Context {
    fn label(self) -> &'static [u8] {
        match self {
            Self::Request => b"perfsweep control request v1",
            Self::Reply => b"perfsweep control reply v1",
            Self::Exec => b"perfsweep exec request v1",
            Self::ExecFrame => b"perfsweep exec frame v1",
        }
    }
}

fn message<S: AsRef<[u8]>>(context: Context, nonce: &str, words: &[S]) -> Vec<u8> {
    let mut message = context.label().to_vec();
    message.push(0);
    message.extend_from_slice(nonce.as_bytes());
    for word in words {
        message.push(0);
        message.extend_from_slice(word.as_ref());
    }
    message
}

/// The proof, in `context`, that the sender of `words` holds `token`, for `nonce`.
pub fn sign<S: AsRef<[u8]>>(token: &[u8], context: Context, nonce: &str, words: &[S]) -> String {
    hex(&sign_raw(token, context, nonce, words))
}

/// [`sign`], as the tag's bytes.
pub fn sign_raw<S: AsRef<[u8]>>(
    token: &[u8],
    context: Context,
    nonce: &str,
    words: &[S],
) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token);
    hmac::sign(&key, &message(context, nonce, words))
        .as_ref()
        .to_vec()
}

/// Whether `mac` proves the token for `context`, `nonce` and `words` (constant-time). An
/// empty token proves nothing: an agent started without one refuses every request.
pub fn verify<S: AsRef<[u8]>>(
    token: &[u8],
    context: Context,
    nonce: &str,
    words: &[S],
    mac: &str,
) -> bool {
    unhex(mac).is_some_and(|tag| verify_raw(token, context, nonce, words, &tag))
}

/// [`verify`] of the tag's bytes.
pub fn verify_raw<S: AsRef<[u8]>>(
    token: &[u8],
    context: Context,
    nonce: &str,
    words: &[S],
    tag: &[u8],
) -> bool {
    if token.is_empty() {
        return false;
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, token);
    hmac::verify(&key, &message(context, nonce, words), tag).is_ok()
}

/// How many connections that have not yet proved the token an agent holds at once, in
/// all and from one address: beyond that, a new one is closed at once, so that idle
/// connections cannot take the agent's memory or file descriptors (each waits at most
/// [`READ_TIMEOUT`] per line). Authenticated ones (a barrier's waiters) do not count.
pub const MAX_UNAUTHENTICATED: usize = 128;
pub const MAX_UNAUTHENTICATED_PER_ADDRESS: usize = 16;

/// The agent's count of connections that have not proved the token yet.
#[derive(Debug, Default)]
pub struct Unauthenticated {
    by_address: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// A connection's place among the unauthenticated; given back when dropped (on proof,
/// refusal or hang-up).
#[derive(Debug)]
pub struct Pending {
    count: std::sync::Arc<Unauthenticated>,
    address: std::net::IpAddr,
}

impl Unauthenticated {
    /// A place for a new connection from `address`, or `None` when the caps are reached.
    pub fn admit(self: &std::sync::Arc<Self>, address: std::net::IpAddr) -> Option<Pending> {
        let mut counts = self
            .by_address
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let total: usize = counts.values().sum();
        let mine = counts.get(&address).copied().unwrap_or(0);
        if total >= MAX_UNAUTHENTICATED || mine >= MAX_UNAUTHENTICATED_PER_ADDRESS {
            return None;
        }
        counts.insert(address, mine + 1);
        Some(Pending {
            count: self.clone(),
            address,
        })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut counts = self
            .count
            .by_address
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// Reads one line of at most `max` bytes (newline excluded) within `timeout`. Longer
/// lines, silence and bytes that are not UTF-8 are errors: the connection is dropped
/// with at most `max + 1` bytes read.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    read: &mut R,
    max: usize,
    timeout: Duration,
) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    tokio::time::timeout(
        timeout,
        (&mut *read).take(limit).read_until(b'\n', &mut bytes),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no complete line within {timeout:?}"),
        )
    })??;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    } else if bytes.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("line longer than {max} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: Context = Context::Request;

    #[test]
    fn the_mac_binds_token_nonce_and_words() {
        let words = ["BARRIER", "done", "1"];
        let mac = sign(b"secret", REQUEST, "n1", &words);
        assert!(verify(b"secret", REQUEST, "n1", &words, &mac));
        assert!(!verify(b"other", REQUEST, "n1", &words, &mac));
        assert!(!verify(b"secret", REQUEST, "n2", &words, &mac), "no replay");
        assert!(!verify(b"secret", REQUEST, "n1", &["STOP"], &mac));
        assert!(!verify(b"secret", REQUEST, "n1", &words, "zz"));
        assert!(
            !verify(
                b"",
                REQUEST,
                "n1",
                &words,
                &sign(b"", REQUEST, "n1", &words)
            ),
            "an empty token proves nothing"
        );
    }

    /// Issue 34, finding 5: requests and replies were signed alike, so an impostor at
    /// a peer's name could have a real client prove a nonce of its choosing and pass
    /// that proof off as an agent's answer. A MAC verifies only in its own context.
    #[test]
    fn a_mac_made_in_one_context_never_verifies_in_another() {
        let contexts = [
            Context::Request,
            Context::Reply,
            Context::Exec,
            Context::ExecFrame,
        ];
        for made in contexts {
            let mac = sign(b"secret", made, "chosen", &["STATUS"]);
            for checked in contexts {
                assert_eq!(
                    verify(b"secret", checked, "chosen", &["STATUS"], &mac),
                    made == checked,
                    "made as {made:?}, checked as {checked:?}"
                );
            }
        }
    }

    #[test]
    fn unauthenticated_connections_are_capped_in_all_and_per_address() {
        let count = std::sync::Arc::new(Unauthenticated::default());
        let one: std::net::IpAddr = "10.0.0.1".parse().expect("an address");
        let held: Vec<Pending> = (0..MAX_UNAUTHENTICATED_PER_ADDRESS)
            .map(|_| count.admit(one).expect("within the cap"))
            .collect();
        assert!(count.admit(one).is_none(), "one address is capped");
        let mut others = Vec::new();
        for index in 0..(MAX_UNAUTHENTICATED - MAX_UNAUTHENTICATED_PER_ADDRESS) {
            let address = std::net::IpAddr::from([10, 1, (index / 250) as u8, (index % 250) as u8]);
            others.push(count.admit(address).expect("within the cap"));
        }
        assert!(
            count
                .admit("10.9.9.9".parse().expect("an address"))
                .is_none(),
            "all are capped"
        );
        drop(held);
        assert!(
            count.admit(one).is_some(),
            "a place given back is free again"
        );
    }

    #[tokio::test]
    async fn lines_are_bounded_in_length_and_time() {
        let flood = b"x".repeat(1000);
        let mut long = tokio::io::BufReader::new(&flood[..]);
        let error = read_line(&mut long, 100, READ_TIMEOUT)
            .await
            .expect_err("too long");
        assert!(error.to_string().contains("longer than 100"), "{error}");

        let mut fine = tokio::io::BufReader::new(&b"STATUS\nrest"[..]);
        assert_eq!(
            read_line(&mut fine, 100, READ_TIMEOUT).await.unwrap(),
            "STATUS"
        );

        let (_client, server) = tokio::io::duplex(64);
        let mut silent = tokio::io::BufReader::new(server);
        let error = read_line(&mut silent, 100, Duration::from_millis(50))
            .await
            .expect_err("silence");
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    }
}
