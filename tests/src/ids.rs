//! UIDs and `generateName` suffixes: unique within a server and unpredictable enough
//! that tests cannot come to depend on their exact values.

/// splitmix64, seeded from the clock, so no RNG dependency is needed.
#[derive(Debug)]
pub(crate) struct Ids {
    state: u64,
}

impl Ids {
    pub fn new() -> Self {
        let seed = jiff::Timestamp::now().as_nanosecond() as u64;
        Self { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A version-4-shaped UUID string.
    pub fn uid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    /// Five characters from the alphabet the apiserver uses for `generateName`.
    pub fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.next();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
                n /= ALPHABET.len() as u64;
                char::from(c)
            })
            .collect()
    }
}
