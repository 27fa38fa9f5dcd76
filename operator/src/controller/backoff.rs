//! Exponential backoff per object for failed reconciles: a broken object is retried less
//! and less often, without slowing the others down. Each delay is jittered (±20 %) so
//! that objects that failed together (an API server outage) do not all come back in the
//! same instant, and the failures of objects that stopped failing without a successful
//! reconcile (deleted meanwhile) are forgotten.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BASE: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_mins(5);
/// How much a delay is spread either way.
const JITTER: f64 = 0.2;
/// A key whose last failure is older than this is forgotten: an object still failing
/// is retried at most `MAX` (plus jitter) apart, so it has failed again by then.
const FORGET_AFTER: Duration = Duration::from_mins(15);

#[derive(Default)]
pub struct PerObjectBackoff {
    /// Key → (failures in a row, when the last one was).
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

impl PerObjectBackoff {
    /// Records a failure of `key` and returns how long to wait before the next try.
    pub fn next_delay(&self, key: &str) -> Duration {
        self.next_delay_at(key, Instant::now(), spread())
    }

    /// [`Self::next_delay`] at `now`, with `spread` in [0, 1) picking the jitter.
    fn next_delay_at(&self, key: &str, now: Instant, spread: f64) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.retain(|_, (_, last)| now.saturating_duration_since(*last) < FORGET_AFTER);
        let (count, last) = failures.entry(key.to_owned()).or_insert((0, now));
        *count = count.saturating_add(1);
        *last = now;
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        let delay = BASE.saturating_mul(factor).min(MAX);
        delay.mul_f64(1.0 - JITTER + 2.0 * JITTER * spread).min(MAX)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }

    /// How many keys have failures on record.
    pub fn len(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A number in [0, 1) that differs from call to call; jitter needs no more than the
/// clock's nanoseconds, spread by a multiplicative hash.
fn spread() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    #[allow(clippy::cast_precision_loss)]
    let unit = mixed as f64 / (1u64 << 53) as f64;
    unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let backoff = PerObjectBackoff::default();
        let now = Instant::now();
        // The middle of the spread: no jitter.
        let delays: Vec<u64> = (0..10)
            .map(|_| backoff.next_delay_at("a", now, 0.5).as_secs())
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(
            backoff.next_delay_at("b", now, 0.5).as_secs(),
            1,
            "other objects are unaffected"
        );
        backoff.reset("a");
        assert_eq!(backoff.next_delay_at("a", now, 0.5).as_secs(), 1);
    }

    #[test]
    fn delays_are_spread_by_a_fifth_either_way_and_never_past_the_cap() {
        let now = Instant::now();
        // The sixth failure in a row: 32 s before the jitter.
        let sixth = |spread: f64| {
            let backoff = PerObjectBackoff::default();
            for _ in 0..5 {
                backoff.next_delay_at("a", now, 0.5);
            }
            backoff.next_delay_at("a", now, spread).as_secs_f64()
        };
        assert!((sixth(0.0) - 25.6).abs() < 0.001, "{}", sixth(0.0));
        assert!(
            (sixth(0.999_999) - 38.4).abs() < 0.001,
            "{}",
            sixth(0.999_999)
        );
        let capped = PerObjectBackoff::default();
        for _ in 0..20 {
            assert!(capped.next_delay_at("a", now, 0.999) <= MAX);
        }
        let spreads: Vec<f64> = (0..100).map(|_| spread()).collect();
        assert!(
            spreads.iter().all(|s| (0.0..1.0).contains(s)),
            "{spreads:?}"
        );
    }

    #[test]
    fn failures_of_objects_that_stopped_failing_are_forgotten() {
        let backoff = PerObjectBackoff::default();
        let start = Instant::now();
        backoff.next_delay_at("deleted", start, 0.5);
        backoff.next_delay_at("deleted", start, 0.5);
        assert_eq!(backoff.len(), 1);
        let later = start + FORGET_AFTER + Duration::from_secs(1);
        assert_eq!(
            backoff.next_delay_at("other", later, 0.5).as_secs(),
            1,
            "a first failure"
        );
        assert_eq!(backoff.len(), 1, "only `other` is kept");
        assert_eq!(
            backoff.next_delay_at("deleted", later, 0.5).as_secs(),
            1,
            "forgotten: it starts again at the base delay"
        );
    }
}
