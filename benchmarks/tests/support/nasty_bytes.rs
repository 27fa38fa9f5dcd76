//! Bytes likely to break parsers, for the property tests of the parsers' unit tests
//! (`parse_error::test_support`) and of `tests/mutated_outputs.rs`: one definition,
//! included by path from both.

use proptest::prelude::*;

/// Structure, signs, digits, exponent, comments and any byte at all.
pub fn nasty_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        Just(b'\n'),
        Just(b'-'),
        Just(b'{'),
        Just(b'}'),
        Just(b'"'),
        Just(b' '),
        Just(b'9'),
        Just(b'.'),
        Just(b'e'),
        Just(b'#'),
    ]
}
