//! When a late read of the first content event distorts the time to first token.
//!
//! Token times are the kernel's arrival times of the bytes read, so reading the first
//! content event late does not move its timestamp by itself. It does when the same read
//! also carried later content events: the kernel stamps a read with the arrival of its
//! last bytes, so the first token then takes a later token's time (all of them share one
//! instant). Only then is the first-read delay part of the TTFT's client delay; counting
//! every late read flagged runs at 1,024–4,096 streams whose TTFT was within 0.02 ms.

use std::time::Duration;

use tokio::time::Instant;

/// The client's delay that may have lengthened the time to first token: `common`
/// (late send, slow write) always, plus `first_read` (arrival of the first content
/// event → reading it) when that read merged later content events into the first
/// one's timestamp. Without streamed tokens the first token is the end (`e2e`).
pub(super) fn ttft_client_delay(
    common: Duration,
    first_read: Duration,
    token_times: &[Instant],
    e2e: Duration,
) -> Duration {
    match token_times {
        [] => e2e,
        [first, second, ..] if first == second => common + first_read,
        _ => common,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_late_first_read_that_merged_later_tokens_counts() {
        let t = Instant::now();
        // The first read delivered three events: they share its timestamp.
        let times = [t, t, t, t + 5 * MS];
        assert_eq!(ttft_client_delay(2 * MS, 40 * MS, &times, 90 * MS), 42 * MS);
    }

    #[test]
    fn a_late_first_read_of_the_first_token_alone_does_not_count() {
        let t = Instant::now();
        // The first token came alone: its kernel timestamp is right however late the read.
        let times = [t, t + MS, t + 2 * MS];
        assert_eq!(ttft_client_delay(2 * MS, 40 * MS, &times, 90 * MS), 2 * MS);
        // A single token is alone too.
        assert_eq!(ttft_client_delay(2 * MS, 40 * MS, &[t], 90 * MS), 2 * MS);
    }

    #[test]
    fn merged_tokens_later_in_the_stream_do_not_touch_the_first_token() {
        let t = Instant::now();
        let times = [t, t + MS, t + MS, t + MS];
        assert_eq!(
            ttft_client_delay(Duration::ZERO, 40 * MS, &times, 90 * MS),
            Duration::ZERO
        );
    }

    #[test]
    fn without_streamed_tokens_the_end_is_the_first_token() {
        assert_eq!(ttft_client_delay(2 * MS, 40 * MS, &[], 90 * MS), 90 * MS);
    }
}
