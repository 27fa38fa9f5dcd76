//! Latency histograms as they travel between load generator workers and the merge:
//! HDR histograms of microseconds, serialized in the HdrHistogram V2 + DEFLATE encoding
//! (the one HdrHistogram's interval logs use) as base64 text. The encoding keeps every
//! bucket count, so a decoded histogram — and the sum of several — yields exactly the
//! percentiles the original would have.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};

use super::result::Distribution;

/// Lowest trackable value: 1 µs.
pub const LOWEST_MICROS: u64 = 1;
/// Highest trackable value: one hour in µs.
pub const HIGHEST_MICROS: u64 = 3_600_000_000;
/// Significant decimal digits of every bucket.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Why a serialized histogram cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistogramError {
    #[error("not base64: {0}")]
    Base64(String),
    #[error("not an HDR histogram in V2 encoding: {0}")]
    Decode(String),
    #[error("the histograms cannot be added: {0}")]
    Add(String),
    #[error("the histogram cannot be serialized: {0}")]
    Encode(String),
}

/// An empty histogram with perfsweep's bounds (1 µs to 1 h, 3 significant digits).
pub fn empty() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_MICROS, HIGHEST_MICROS, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|_| unreachable!("the bounds are constants known to be valid"))
}

/// `histogram` as base64 text of its V2 + DEFLATE encoding.
pub fn encode(histogram: &Histogram<u64>) -> Result<String, HistogramError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(histogram, &mut bytes)
        .map_err(|e| HistogramError::Encode(format!("{e:?}")))?;
    Ok(STANDARD.encode(bytes))
}

/// The histogram `text` ([`encode`]'s output) holds.
pub fn decode(text: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| HistogramError::Base64(e.to_string()))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HistogramError::Decode(format!("{e:?}")))
}

/// The sum of the histograms `texts` hold, as one histogram (empty for none).
pub fn merge<'a>(
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<Histogram<u64>, HistogramError> {
    let mut sum = empty();
    for text in texts {
        sum.add(decode(text)?)
            .map_err(|e| HistogramError::Add(format!("{e:?}")))?;
    }
    Ok(sum)
}

/// The summary statistics of a histogram of microseconds, in milliseconds.
pub fn distribution(histogram: &Histogram<u64>) -> Distribution {
    if histogram.is_empty() {
        return Distribution::default();
    }
    let ms = |micros: f64| micros / 1000.0;
    let at = |q: f64| ms(histogram.value_at_quantile(q) as f64);
    Distribution {
        count: histogram.len(),
        mean: ms(histogram.mean()),
        stddev: ms(histogram.stdev()),
        min: ms(histogram.min() as f64),
        max: ms(histogram.max() as f64),
        p50: at(0.5),
        p90: at(0.9),
        p95: at(0.95),
        p99: at(0.99),
        p999: at(0.999),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = empty();
        for v in values {
            h.record(*v).expect("in range");
        }
        h
    }

    #[test]
    fn a_round_trip_keeps_every_statistic() {
        let original = histogram(&[1, 7, 950, 12_345, 12_346, 49_999, 50_001, 3_000_000]);
        let text = encode(&original).expect("encodes");
        let decoded = decode(&text).expect("decodes");
        assert_eq!(distribution(&decoded), distribution(&original));
        assert_eq!(decoded, original);
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let a = [10, 20, 30, 40_000];
        let b = [15, 25, 2_000_000];
        let texts = [
            encode(&histogram(&a)).expect("a"),
            encode(&histogram(&b)).expect("b"),
        ];
        let merged = merge(texts.iter().map(String::as_str)).expect("merges");
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        assert_eq!(distribution(&merged), distribution(&histogram(&all)));
        assert_eq!(merged.len(), 7);
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        assert!(matches!(decode("%%%"), Err(HistogramError::Base64(_))));
        assert!(matches!(decode("AAAA"), Err(HistogramError::Decode(_))));
        let text = encode(&histogram(&[5, 6, 7])).expect("encodes");
        assert!(decode(&text[..text.len() / 2]).is_err());
    }
}
