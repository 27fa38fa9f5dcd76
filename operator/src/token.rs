//! Random tokens: the per-benchmark launch token the operator (or a local run) makes,
//! and the agents' challenge nonces. One place, shared by the controller, the local
//! runner and the agent, so none of them reaches into another for it.

use ring::rand::{SecureRandom, SystemRandom};

/// The system's random number generator failed (it does not, short of a broken kernel;
/// the error still says so rather than passing for something else).
#[derive(Debug, thiserror::Error)]
#[error("the system's random number generator failed")]
pub struct RandomUnavailable;

/// A new random token, hex-encoded (256 bits).
pub fn random() -> Result<String, RandomUnavailable> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| RandomUnavailable)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_digits_and_differ() {
        let (a, b) = (random().expect("a token"), random().expect("a token"));
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
