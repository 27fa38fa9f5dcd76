//! Exponential backoff per object for failed reconciles: a broken object is retried less
//! and less often, without slowing the others down.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

const BASE: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_mins(5);

#[derive(Default)]
pub struct PerObjectBackoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl PerObjectBackoff {
    /// Records a failure of `key` and returns how long to wait before the next try.
    pub fn next_delay(&self, key: &str) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        BASE.saturating_mul(factor).min(MAX)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let backoff = PerObjectBackoff::default();
        let delays: Vec<u64> = (0..10).map(|_| backoff.next_delay("a").as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(
            backoff.next_delay("b").as_secs(),
            1,
            "other objects are unaffected"
        );
        backoff.reset("a");
        assert_eq!(backoff.next_delay("a").as_secs(), 1);
    }
}
