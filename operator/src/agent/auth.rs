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

fn message<S: AsRef<str>>(nonce: &str, words: &[S]) -> Vec<u8> {
    let mut message = nonce.as_bytes().to_vec();
    for word in words {
        message.push(0);
        message.extend_from_slice(word.as_ref().as_bytes());
    }
    message
}

/// The proof that the sender of `words` holds `token`, for the challenge `nonce`.
pub fn sign<S: AsRef<str>>(token: &[u8], nonce: &str, words: &[S]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token);
    hex(hmac::sign(&key, &message(nonce, words)).as_ref())
}

/// Whether `mac` proves the token for `nonce` and `words` (constant-time). An empty
/// token proves nothing: an agent started without one refuses every request.
pub fn verify<S: AsRef<str>>(token: &[u8], nonce: &str, words: &[S], mac: &str) -> bool {
    if token.is_empty() {
        return false;
    }
    let Some(tag) = unhex(mac) else {
        return false;
    };
    let key = hmac::Key::new(hmac::HMAC_SHA256, token);
    hmac::verify(&key, &message(nonce, words), &tag).is_ok()
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

    #[test]
    fn the_mac_binds_token_nonce_and_words() {
        let words = ["BARRIER", "done", "1"];
        let mac = sign(b"secret", "n1", &words);
        assert!(verify(b"secret", "n1", &words, &mac));
        assert!(!verify(b"other", "n1", &words, &mac));
        assert!(!verify(b"secret", "n2", &words, &mac), "no replay");
        assert!(!verify(b"secret", "n1", &["STOP"], &mac));
        assert!(!verify(b"secret", "n1", &words, "zz"));
        assert!(
            !verify(b"", "n1", &words, &sign(b"", "n1", &words)),
            "an empty token proves nothing"
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
