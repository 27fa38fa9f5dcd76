//! Axis units for charts: each metric's declared unit
//! ([`crate::judging::metrics::MetricDef::unit`]) scaled to a readable magnitude (9.4e9
//! bit/s → 9.4 Gbit/s, 1.2e-4 s → 120 µs), and an axis title naming the quantity rather
//! than the snake_case metric name. Pure.

use crate::judging::metrics::MetricDef;

/// How values of a metric are shown: `shown = value × factor`, in `unit`.
#[derive(Clone, Debug, PartialEq)]
pub struct DisplayScale {
    pub factor: f64,
    pub unit: String,
}

/// Families of units one of which can replace another: (label, size in the family's
/// base unit). Bytes per second scale in binary steps (as fio and dd report them); IMB's
/// decimal megabytes stay decimal.
const FAMILIES: &[&[(&str, f64)]] = &[
    &[
        ("bit/s", 1.0),
        ("kbit/s", 1e3),
        ("Mbit/s", 1e6),
        ("Gbit/s", 1e9),
        ("Tbit/s", 1e12),
    ],
    &[
        ("B/s", 1.0),
        ("KiB/s", 1024.0),
        ("MiB/s", 1048576.0),
        ("GiB/s", 1073741824.0),
        ("TiB/s", 1099511627776.0),
    ],
    &[("kB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12)],
    &[("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)],
];

/// The scale that shows values up to `largest` (in `unit`) with one to three digits
/// before the point. An unknown unit (`count`, `%`, `tokens/s`) is kept as it is.
pub fn display_scale(unit: &str, largest: f64) -> DisplayScale {
    let keep = DisplayScale {
        factor: 1.0,
        unit: unit.to_owned(),
    };
    let Some(family) = FAMILIES
        .iter()
        .find(|family| family.iter().any(|(label, _)| *label == unit))
    else {
        return keep;
    };
    let Some(&(_, size)) = family.iter().find(|(label, _)| *label == unit) else {
        return keep;
    };
    let largest = largest.abs() * size;
    if !largest.is_finite() || largest == 0.0 {
        return keep;
    }
    // The biggest member the largest value still fills to at least 1; else the smallest.
    let chosen = family
        .iter()
        .rev()
        .find(|(_, member)| largest >= *member)
        .unwrap_or(&family[0]);
    DisplayScale {
        factor: size / chosen.1,
        unit: chosen.0.to_owned(),
    }
}

/// Name endings that spell the unit, and what the quantity is called without them.
const UNIT_SUFFIXES: &[(&str, &str)] = &[
    ("_bits_per_second", " throughput"),
    ("_gigabits_per_second", ""),
    ("_megabytes_per_second", ""),
    ("_bytes_per_second", ""),
    ("_per_second", " per second"),
    ("_microseconds", ""),
    ("_milliseconds", ""),
    ("_seconds", ""),
    ("_percent", ""),
];

/// `received_bits_per_second` in Gbit/s → `Received throughput (Gbit/s)`.
pub fn axis_title(metric: &str, unit: &str) -> String {
    let mut quantity = metric.to_owned();
    for (suffix, replacement) in UNIT_SUFFIXES {
        if let Some(stem) = metric.strip_suffix(suffix) {
            quantity = format!("{stem}{replacement}");
            break;
        }
    }
    // Acronyms read as acronyms: `ttft` is "TTFT", not "Ttft".
    let quantity = quantity
        .split('_')
        .map(|word| match word {
            "ttft" | "tpot" | "itl" | "iops" | "clat" => word.to_uppercase(),
            _ => word.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut chars = quantity.chars();
    let quantity = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => quantity,
    };
    if unit.is_empty() {
        quantity
    } else {
        format!("{quantity} ({unit})")
    }
}

/// The declaration of `metric` in `kind`, when both are known.
pub fn metric_def(kind: &str, metric: &str) -> Option<&'static MetricDef> {
    crate::kinds::registry::lookup(kind)?.metric_def(metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_to_a_readable_unit() {
        let bits = display_scale("bit/s", 9.41e9);
        assert_eq!(bits.unit, "Gbit/s");
        assert!((9.41e9 * bits.factor - 9.41).abs() < 1e-9);
        assert_eq!(display_scale("bit/s", 850e6).unit, "Mbit/s");
        let bytes = display_scale("B/s", 3.0 * 1048576.0);
        assert_eq!(bytes.unit, "MiB/s");
        assert!((3.0 * 1048576.0 * bytes.factor - 3.0).abs() < 1e-9);
        assert_eq!(display_scale("B/s", 2.5e9).unit, "GiB/s");
        let seconds = display_scale("s", 0.00012);
        assert_eq!(seconds.unit, "µs");
        assert!((0.00012 * seconds.factor - 120.0).abs() < 1e-6);
        assert_eq!(display_scale("s", 0.004).unit, "ms");
        assert_eq!(display_scale("µs", 2500.0).unit, "ms");
        assert_eq!(display_scale("µs", 1.7).unit, "µs");
        assert_eq!(display_scale("ms", 0.2).unit, "µs");
        assert_eq!(display_scale("Gbit/s", 0.4).unit, "Mbit/s");
        assert_eq!(display_scale("MB/s", 12000.0).unit, "GB/s");
        // Unknown units and degenerate values keep the declared unit.
        assert_eq!(
            display_scale("tokens/s", 1e6),
            DisplayScale {
                factor: 1.0,
                unit: "tokens/s".into()
            }
        );
        assert_eq!(display_scale("bit/s", 0.0).unit, "bit/s");
        assert_eq!(display_scale("bit/s", f64::NAN).unit, "bit/s");
    }

    #[test]
    fn titles_name_the_quantity_and_unit() {
        assert_eq!(
            axis_title("received_bits_per_second", "Gbit/s"),
            "Received throughput (Gbit/s)"
        );
        assert_eq!(
            axis_title("read_bandwidth_bytes_per_second", "MiB/s"),
            "Read bandwidth (MiB/s)"
        );
        assert_eq!(
            axis_title("p99_latency_microseconds", "ms"),
            "P99 latency (ms)"
        );
        assert_eq!(
            axis_title("output_tokens_per_second", "tokens/s"),
            "Output tokens per second (tokens/s)"
        );
        assert_eq!(axis_title("retransmits", "count"), "Retransmits (count)");
        assert_eq!(axis_title("ttft_mean_milliseconds", "ms"), "TTFT mean (ms)");
        assert_eq!(axis_title("read_iops", "IOPS"), "Read IOPS (IOPS)");
        assert_eq!(
            metric_def("IPerf", "received_bits_per_second").map(|d| d.unit),
            Some("bit/s")
        );
        assert!(metric_def("IPerf", "nope").is_none());
    }
}
