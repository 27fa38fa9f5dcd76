//! Number formatting shared by tables, reports and verdict messages.

/// A number in a short engineering form: `9.41e9` → `9.410G`, `0.00012` → `120.0µ`.
pub fn si(value: f64) -> String {
    const PREFIXES: [(f64, &str); 10] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
        (1e-9, "n"),
    ];
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    // Past the largest prefix a fixed-point form would print hundreds of digits
    // (1e200 / 1e12); scientific notation keeps every cell short.
    if magnitude >= 1e21 {
        return format!("{value:.3e}");
    }
    for (scale, prefix) in PREFIXES {
        if magnitude >= scale {
            let digits = format!("{:.4}", value / scale);
            let digits = if digits.contains('.') {
                digits.trim_end_matches('0').trim_end_matches('.')
            } else {
                &digits
            };
            return format!("{digits}{prefix}");
        }
    }
    format!("{value:.3e}")
}
