//! Go-style durations (`90s`, `15m`, `1h30m`, `1.5h`), as Kubernetes users write them.

use std::time::Duration;

/// A duration string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason} (expected e.g. 90s, 15m, 1h30m)")]
pub struct DurationError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a sequence of `<number><unit>` terms with units `ms`, `s`, `m` and `h`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let fail = |reason| DurationError {
        text: text.to_owned(),
        reason,
    };
    if text.is_empty() {
        return Err(fail("empty"));
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| fail("number without a unit"))?;
        if number_len == 0 {
            return Err(fail("unit without a number"));
        }
        let number: f64 = rest[..number_len]
            .parse()
            .map_err(|_| fail("malformed number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(fail("unknown unit")),
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| fail("out of range"))
}

/// Formats a duration the way [`parse`] reads it, in the largest exact units: the one
/// formatter of durations a user wrote (timeouts in messages, specs), so what is printed
/// can be pasted back (`30m`, `1h30m`, `1500ms`).
pub fn format(duration: Duration) -> String {
    let secs = duration.as_secs();
    let millis = duration.subsec_millis();
    if millis != 0 {
        return format!("{}ms", duration.as_millis());
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compound_durations() {
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_mins(90));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_mins(90));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn formats_what_parse_reads_back() {
        for (duration, text) in [
            (Duration::from_secs(2), "2s"),
            (Duration::from_mins(30), "30m"),
            (Duration::from_mins(90), "1h30m"),
            (Duration::from_millis(500), "500ms"),
            // Sub-second parts are kept, never rounded away.
            (Duration::from_millis(1500), "1500ms"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format(duration), text);
            assert_eq!(parse(text).unwrap(), duration, "{text} reads back");
        }
    }

    #[test]
    fn rejects_malformed_durations() {
        for bad in ["", "10", "s", "10x", "1..5s", "-5s"] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn format_round_trips() {
        for secs in [0, 1, 59, 60, 61, 3600, 5400, 86461] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse(&format(d)).unwrap(), d);
        }
    }
}
