//! Kubernetes resource quantities (`100m`, `64Mi`, `1.5`, `2e3`) as exact numbers, so a
//! gang's requests can be added up for its PodGroup's `minResources`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity in thousandths of its unit (millicores, millibytes): exact for every
/// quantity Kubernetes keeps (it rounds finer ones up to a thousandth).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Milli(pub i128);

/// Why a quantity could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a Kubernetes quantity ({why})")]
pub struct QuantityError {
    pub text: String,
    pub why: &'static str,
}

impl Milli {
    /// Reads a quantity: an optional sign, a decimal number, and a binary (`Ki`…`Ei`),
    /// decimal (`n`, `u`, `m`, `k`, `M`…`E`) or exponent (`e3`) suffix.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let error = |why| QuantityError {
            text: text.to_owned(),
            why,
        };
        let trimmed = text.trim();
        let (negative, rest) = match trimmed.as_bytes().first() {
            Some(b'-') => (true, &trimmed[1..]),
            Some(b'+') => (false, &trimmed[1..]),
            _ => (false, trimmed),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(error("no number"));
        }
        if fraction.contains('.') {
            return Err(error("two decimal points"));
        }
        let digits: i128 = format!("{whole}{fraction}")
            .parse()
            .map_err(|_| error("too many digits"))?;
        // value = digits × 10^-fraction × base^power; in thousandths: × 1000.
        let (base, power): (i128, i32) = match suffix {
            "" => (10, 0),
            "n" => (10, -9),
            "u" => (10, -6),
            "m" => (10, -3),
            "k" => (10, 3),
            "M" => (10, 6),
            "G" => (10, 9),
            "T" => (10, 12),
            "P" => (10, 15),
            "E" => (10, 18),
            "Ki" => (2, 10),
            "Mi" => (2, 20),
            "Gi" => (2, 30),
            "Ti" => (2, 40),
            "Pi" => (2, 50),
            "Ei" => (2, 60),
            exponent if exponent.starts_with(['e', 'E']) => (
                10,
                exponent[1..]
                    .parse()
                    .map_err(|_| error("an exponent that is not an integer"))?,
            ),
            _ => return Err(error("an unknown suffix")),
        };
        let scale = i32::try_from(fraction.len()).map_err(|_| error("too many digits"))?;
        let overflow = || error("too large");
        let (mut numerator, mut denominator) =
            (digits.checked_mul(1000).ok_or_else(overflow)?, 1i128);
        let pow = |exponent: i32| -> Result<i128, QuantityError> {
            base.checked_pow(exponent.unsigned_abs())
                .ok_or_else(overflow)
        };
        if power >= 0 {
            numerator = numerator.checked_mul(pow(power)?).ok_or_else(overflow)?;
        } else {
            denominator = pow(power)?;
        }
        denominator = denominator
            .checked_mul(
                10i128
                    .checked_pow(scale.unsigned_abs())
                    .ok_or_else(overflow)?,
            )
            .ok_or_else(overflow)?;
        // Rounded up, as Kubernetes rounds quantities finer than a thousandth.
        let milli = (numerator + denominator - 1) / denominator;
        Ok(Self(if negative { -milli } else { milli }))
    }

    /// The quantity in its shortest exact form: whole units (`3`, or `192Mi` for
    /// `binary` resources such as memory), or thousandths (`300m`).
    pub fn to_quantity(self, binary: bool) -> Quantity {
        let Self(milli) = self;
        if milli % 1000 != 0 {
            return Quantity(format!("{milli}m"));
        }
        let units = milli / 1000;
        if binary && units != 0 {
            for (suffix, size) in [
                ("Ei", 60),
                ("Pi", 50),
                ("Ti", 40),
                ("Gi", 30),
                ("Mi", 20),
                ("Ki", 10),
            ] {
                let size = 1i128 << size;
                if units % size == 0 {
                    return Quantity(format!("{}{suffix}", units / size));
                }
            }
        }
        Quantity(units.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_exactly() {
        for (text, milli) in [
            ("100m", 100),
            ("1", 1000),
            ("1.5", 1500),
            ("0.1", 100),
            (".5", 500),
            ("2k", 2_000_000),
            ("64Mi", 64 * 1024 * 1024 * 1000),
            ("1Gi", 1024 * 1024 * 1024 * 1000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("250u", 1),
            ("-2", -2000),
            ("+3", 3000),
        ] {
            assert_eq!(Milli::parse(text), Ok(Milli(milli)), "{text}");
        }
        for bad in [
            "",
            "m",
            "1.2.3",
            "1x",
            "1Ki2",
            "1e",
            "1e99999",
            "99999999999999999999999999999999999999999",
            "--1",
        ] {
            assert!(Milli::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sums_print_in_their_shortest_exact_form() {
        let sum = |texts: &[&str]| {
            Milli(
                texts
                    .iter()
                    .map(|t| Milli::parse(t).expect("a quantity").0)
                    .sum(),
            )
        };
        assert_eq!(sum(&["100m", "100m", "100m"]).to_quantity(false).0, "300m");
        assert_eq!(sum(&["500m", "1500m"]).to_quantity(false).0, "2");
        assert_eq!(sum(&["64Mi", "64Mi", "64Mi"]).to_quantity(true).0, "192Mi");
        assert_eq!(sum(&["1Gi", "1Gi"]).to_quantity(true).0, "2Gi");
        assert_eq!(sum(&["1G"]).to_quantity(true).0, "1000000000");
        assert_eq!(sum(&["1"]).to_quantity(true).0, "1");
    }
}
