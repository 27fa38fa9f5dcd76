//! The simulator's prefix cache: what makes a shared prompt prefix cheaper, as vLLM's
//! automatic prefix caching and SGLang's radix cache do.
//!
//! A prompt is cut into blocks of `block_tokens` tokens (words, as the simulator counts
//! them); each full block is identified by a hash of its words chained to the hash of
//! the block before it, so a block hits only when the whole prefix up to it was seen.
//! The cache keeps the most recently used `capacity` blocks. A request's cached tokens
//! are the tokens of its leading blocks found in the cache; its prefill costs only the
//! others.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Block hashes, least recently used first out.
pub struct PrefixCache {
    block_tokens: usize,
    capacity: usize,
    /// Block hash → the tick it was last used at.
    last_used: HashMap<u64, u64>,
    /// Tick → block hash, oldest first.
    by_age: BTreeMap<u64, u64>,
    tick: u64,
}

impl PrefixCache {
    /// A cache of `capacity` blocks of `block_tokens` tokens each (both at least 1).
    pub fn new(capacity: usize, block_tokens: usize) -> Self {
        Self {
            block_tokens: block_tokens.max(1),
            capacity: capacity.max(1),
            last_used: HashMap::new(),
            by_age: BTreeMap::new(),
            tick: 0,
        }
    }

    /// The chained hashes of the full blocks of `words`.
    pub fn block_hashes<'a>(&self, words: impl Iterator<Item = &'a str>) -> Vec<u64> {
        let mut hashes = Vec::new();
        let mut hasher = DefaultHasher::new();
        let mut in_block = 0;
        for word in words {
            word.hash(&mut hasher);
            in_block += 1;
            if in_block == self.block_tokens {
                let hash = hasher.finish();
                hashes.push(hash);
                // The next block's hash starts from this one's: a chain.
                hasher = DefaultHasher::new();
                hash.hash(&mut hasher);
                in_block = 0;
            }
        }
        hashes
    }

    /// Looks the prompt's blocks up and caches them all; the tokens of its leading
    /// blocks that were already cached.
    pub fn admit(&mut self, blocks: &[u64]) -> u32 {
        let hits = blocks
            .iter()
            .take_while(|hash| self.last_used.contains_key(hash))
            .count();
        for &hash in blocks {
            self.touch(hash);
        }
        (hits * self.block_tokens).min(u32::MAX as usize) as u32
    }

    fn touch(&mut self, hash: u64) {
        self.tick += 1;
        if let Some(previous) = self.last_used.insert(hash, self.tick) {
            self.by_age.remove(&previous);
        }
        self.by_age.insert(self.tick, hash);
        while self.last_used.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.last_used.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }

    #[test]
    fn shared_leading_blocks_hit_and_a_different_start_does_not() {
        let mut cache = PrefixCache::new(100, 2);
        let first = cache.block_hashes(words("a b c d e").into_iter());
        assert_eq!(first.len(), 2, "the fifth word is no full block");
        assert_eq!(cache.admit(&first), 0);
        // Same four leading words: two blocks hit.
        let second = cache.block_hashes(words("a b c d x y").into_iter());
        assert_eq!(cache.admit(&second), 4);
        // The block "c d" after another start is another block (chained hashes).
        let third = cache.block_hashes(words("z z c d").into_iter());
        assert_eq!(cache.admit(&third), 0);
    }

    #[test]
    fn the_least_recently_used_blocks_are_evicted() {
        let mut cache = PrefixCache::new(2, 1);
        let a = cache.block_hashes(words("a").into_iter());
        let b = cache.block_hashes(words("b").into_iter());
        let c = cache.block_hashes(words("c").into_iter());
        cache.admit(&a);
        cache.admit(&b);
        assert_eq!(cache.admit(&a), 1, "a is used again: b is now the oldest");
        cache.admit(&c);
        assert_eq!(cache.admit(&a), 1);
        assert_eq!(cache.admit(&b), 0, "b was evicted");
    }
}
