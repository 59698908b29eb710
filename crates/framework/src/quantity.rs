//! Kubernetes resource quantities (`100m`, `1Gi`, `1.5`, `2e3`) as integers.
//!
//! Upstream: k8s.io/apimachinery/pkg/api/resource. The scheduler only ever needs a quantity
//! as an integer: CPU in millicores (`MilliValue`) and everything else in units (`Value`),
//! both rounded up, as upstream rounds them. Values beyond `i64` saturate.

use thiserror::Error;

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
pub struct QuantityError(pub String);

/// A parsed quantity: `mantissa × 10^exp10 × 2^exp2`, exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    /// The digits, without the decimal point.
    mantissa: u128,
    /// Decimal exponent (fraction digits count negative).
    exp10: i32,
    /// Binary exponent from a binary suffix (`Ki` = 10 … `Ei` = 60).
    exp2: u32,
}

/// Parses `s` and returns its value in units, rounded up (upstream `Quantity.Value()`).
pub fn parse_value(s: &str) -> Result<i64, QuantityError> {
    parse(s).map(|p| p.scaled(0))
}

/// Parses `s` and returns its value in thousandths, rounded up (upstream `Quantity.MilliValue()`).
pub fn parse_milli_value(s: &str) -> Result<i64, QuantityError> {
    parse(s).map(|p| p.scaled(3))
}

/// Parses `s` and returns its value in billionths, exact: upstream `ParseQuantity` keeps a
/// quantity to nano precision, rounding digits beyond it away from zero. Values beyond
/// `i128` saturate (a quantity that large has no use in a comparison beyond being large).
pub fn parse_nano_value(s: &str) -> Result<i128, QuantityError> {
    parse(s).map(Parsed::nanos)
}

fn parse(s: &str) -> Result<Parsed, QuantityError> {
    let err = || QuantityError(s.to_string());
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&c) = bytes.first() {
        if c == b'+' || c == b'-' {
            negative = c == b'-';
            i = 1;
        }
    }
    let mut mantissa: u128 = 0;
    let mut exp10: i32 = 0;
    let mut digits = 0usize;
    let mut seen_point = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            digits += 1;
            // Keep at most 30 significant digits; further digits only matter for rounding up,
            // which we honour by bumping the mantissa once.
            if mantissa < 10u128.pow(30) {
                mantissa = mantissa * 10 + u128::from(c - b'0');
                if seen_point {
                    exp10 -= 1;
                }
            } else if !seen_point {
                exp10 += 1;
            } else if c != b'0' && mantissa % 10 == 0 {
                mantissa += 1;
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return Err(err());
    }
    let suffix = &s[i..];
    let (suffix_exp10, exp2) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let rest = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or_else(err)?;
            let digits_part = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits_part.is_empty() || !digits_part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            let e: i32 = rest.parse().map_err(|_| err())?;
            (e, 0)
        }
    };
    Ok(Parsed {
        negative,
        mantissa,
        exp10: exp10.saturating_add(suffix_exp10),
        exp2,
    })
}

impl Parsed {
    /// The value times `10^scale`, rounded up (towards +infinity), saturating at `i64`.
    fn scaled(self, scale: i32) -> i64 {
        // Zero is zero at any exponent; without this, `0e2000000000` would multiply zero by
        // ten two billion times.
        if self.mantissa == 0 {
            return 0;
        }
        let exp10 = self.exp10.saturating_add(scale);
        let mut num: u128 = self.mantissa;
        let mut den: u128 = 1;
        // Apply the binary exponent first: it never loses precision.
        for _ in 0..self.exp2 {
            num = match num.checked_mul(2) {
                Some(v) => v,
                None => return self.saturate(),
            };
        }
        if exp10 >= 0 {
            for _ in 0..exp10 {
                num = match num.checked_mul(10) {
                    Some(v) => v,
                    None => return self.saturate(),
                };
                if num > i64::MAX as u128 * 2 {
                    return self.saturate();
                }
            }
        } else {
            for _ in 0..(-exp10).min(60) {
                den = match den.checked_mul(10) {
                    Some(v) => v,
                    // The value is below one in a billion billion: it rounds to 0 or 1.
                    None => break,
                };
            }
        }
        if num == 0 {
            return 0;
        }
        let whole = num / den;
        let rem = num % den;
        let magnitude = if self.negative {
            // Rounding up a negative number truncates towards zero.
            whole
        } else {
            whole + u128::from(rem != 0)
        };
        if magnitude > i64::MAX as u128 {
            return self.saturate();
        }
        let m = magnitude as i64;
        if self.negative {
            -m
        } else {
            m
        }
    }

    /// The value times `10^9`, rounded away from zero, saturating at `i128`.
    fn nanos(self) -> i128 {
        let saturated = if self.negative { i128::MIN } else { i128::MAX };
        if self.mantissa == 0 {
            return 0;
        }
        let exp10 = self.exp10.saturating_add(9);
        let mut num: u128 = self.mantissa;
        for _ in 0..self.exp2 {
            match num.checked_mul(2) {
                Some(v) => num = v,
                None => return saturated,
            }
        }
        let mut den: u128 = 1;
        if exp10 >= 0 {
            for _ in 0..exp10 {
                match num.checked_mul(10) {
                    Some(v) if v <= i128::MAX as u128 => num = v,
                    _ => return saturated,
                }
            }
        } else {
            for _ in 0..(-exp10).min(60) {
                match den.checked_mul(10) {
                    Some(v) => den = v,
                    None => break,
                }
            }
        }
        let magnitude = num / den + u128::from(num % den != 0);
        let Ok(magnitude) = i128::try_from(magnitude) else {
            return saturated;
        };
        if self.negative {
            -magnitude
        } else {
            magnitude
        }
    }

    fn saturate(self) -> i64 {
        if self.negative {
            i64::MIN
        } else {
            i64::MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::plain_integer("2", 2, 2000)]
    #[case::millicores("100m", 1, 100)]
    #[case::fraction_rounds_up("1.5", 2, 1500)]
    #[case::sub_milli_rounds_up("1500u", 1, 2)]
    #[case::binary_suffix("1Gi", 1 << 30, 1000 << 30)]
    #[case::mebibytes("500Mi", 500 << 20, 1000 * (500 << 20))]
    #[case::decimal_suffix("32G", 32_000_000_000, 32_000_000_000_000)]
    #[case::kilo("1k", 1000, 1_000_000)]
    #[case::exponent("2e3", 2000, 2_000_000)]
    #[case::negative_exponent("25e-3", 1, 25)]
    #[case::fractional_binary("0.5Gi", 1 << 29, 1000 << 29)]
    #[case::zero("0", 0, 0)]
    #[case::plus_sign("+4", 4, 4000)]
    #[case::negative("-1.5", -1, -1500)]
    #[case::nano("1n", 1, 1)]
    #[case::huge_saturates("100Ei", i64::MAX, i64::MAX)]
    #[case::zero_with_the_largest_exponent("0e2147483647", 0, 0)]
    fn parses(#[case] input: &str, #[case] value: i64, #[case] milli: i64) {
        assert_eq!(
            (parse_value(input), parse_milli_value(input)),
            (Ok(value), Ok(milli))
        );
    }

    #[rstest]
    #[case::plain_integer("2", 2_000_000_000)]
    #[case::nano("1n", 1)]
    #[case::milli("1500m", 1_500_000_000)]
    #[case::binary_suffix("1Ki", 1_024_000_000_000)]
    #[case::below_nano_rounds_away_from_zero("0.1n", 1)]
    #[case::negative_below_nano_rounds_away_from_zero("-1.5n", -2)]
    #[case::exponent("12e-9", 12)]
    #[case::zero_with_huge_exponent("0e99", 0)]
    #[case::huge_saturates("1e40", i128::MAX)]
    #[case::negative_huge_saturates("-1e40", i128::MIN)]
    fn parses_nano_value(#[case] input: &str, #[case] nanos: i128) {
        assert_eq!(parse_nano_value(input), Ok(nanos));
    }

    #[rstest]
    #[case::empty("")]
    #[case::letters_only("abc")]
    #[case::unknown_suffix("1Qi")]
    #[case::lowercase_binary("1gi")]
    #[case::empty_exponent("1e")]
    #[case::trailing_garbage("1Gi ")]
    fn rejects(#[case] input: &str) {
        assert_eq!(parse_value(input), Err(QuantityError(input.to_string())));
    }
}
