//! Resource quantities as apimachinery reads them from JSON: which strings (and JSON numbers)
//! decode, with its error texts, and whether the value is negative. The value itself is kept
//! as written (see docs/apiserver.md); this only judges it.
//!
//! Upstream: staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go (ParseQuantity,
//! parseQuantityString, UnmarshalJSON) and suffix.go.

use serde_json::Value;

/// Why a quantity does not decode; the texts are apimachinery's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the shape number, suffix, signed exponent.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// The shape is right but the suffix is none of the SI, binary or exponent suffixes.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// What the checks after decoding need to know of a quantity that decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Below zero. A tiny negative value (`-1e-12`) counts: upstream rounds non-zero values
    /// away from zero to the nearest nano unit.
    pub negative: bool,
}

const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";
const DECIMAL_SUFFIXES: [&str; 10] = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E"];
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Reads a quantity string as ParseQuantity does (after UnmarshalJSON trims the spaces).
pub fn parse(s: &str) -> Result<Parsed, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let b = s.as_bytes();
    let at = |i: usize| b.get(i).copied();
    let mut pos = 0;
    let negative_sign = at(0) == Some(b'-');
    if matches!(at(0), Some(b'-' | b'+')) {
        pos = 1;
    }
    let mut nonzero = false;
    let mut digits = |pos: &mut usize| {
        while let Some(c) = at(*pos).filter(u8::is_ascii_digit) {
            nonzero |= c != b'0';
            *pos += 1;
        }
    };
    digits(&mut pos);
    if at(pos) == Some(b'.') {
        pos += 1;
        digits(&mut pos);
    }
    let suffix_start = pos;
    while at(pos).is_some_and(|c| SUFFIX_CHARS.contains(&c)) {
        pos += 1;
    }
    if pos < b.len() {
        if matches!(at(pos), Some(b'-' | b'+')) {
            pos += 1;
        }
        while at(pos).is_some_and(|c| c.is_ascii_digit()) {
            pos += 1;
        }
        if pos < b.len() {
            return Err(QuantityError::FormatWrong);
        }
    }
    let suffix = s.get(suffix_start..).unwrap_or("");
    let known = DECIMAL_SUFFIXES.contains(&suffix)
        || BINARY_SUFFIXES.contains(&suffix)
        || suffix
            .strip_prefix(['e', 'E'])
            .is_some_and(|exp| exp.parse::<i64>().is_ok());
    if !known {
        return Err(QuantityError::Suffix);
    }
    Ok(Parsed {
        negative: negative_sign && nonzero,
    })
}

/// Reads a quantity as it comes in JSON: a string (spaces around it trimmed), a number
/// (its text), or null (zero). Other JSON types are left to the typed decoding, which
/// refuses them.
pub fn parse_json(v: &Value) -> Option<Result<Parsed, QuantityError>> {
    match v {
        Value::String(s) => Some(parse(s.trim())),
        Value::Number(n) => Some(parse(&n.to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const FORMAT: Result<bool, QuantityError> = Err(QuantityError::FormatWrong);
    const SUFFIX: Result<bool, QuantityError> = Err(QuantityError::Suffix);

    #[rstest]
    #[case::plain("1", Ok(false))]
    #[case::milli("100m", Ok(false))]
    #[case::binary("1.5Gi", Ok(false))]
    #[case::exa("2E", Ok(false))]
    #[case::exponent_beyond_int64("1e999", Ok(false))]
    #[case::signed_exponent("5e-3", Ok(false))]
    #[case::upper_exponent("5E+3", Ok(false))]
    #[case::fraction_without_digits_after_the_point("1.", Ok(false))]
    #[case::point_alone(".", Ok(false))]
    #[case::sign_alone("-", Ok(false))]
    #[case::negative("-1", Ok(true))]
    #[case::negative_milli("-100m", Ok(true))]
    #[case::negative_tiny("-1e-20", Ok(true))]
    #[case::negative_zero("-0.0", Ok(false))]
    #[case::plus("+3Ki", Ok(false))]
    #[case::empty("", FORMAT)]
    #[case::word("abc", FORMAT)]
    #[case::unknown_letter("1Q", FORMAT)]
    #[case::two_points("1.5.5", FORMAT)]
    #[case::inner_space("1 Gi", FORMAT)]
    #[case::suffix_of_suffix_letters("1mm", SUFFIX)]
    #[case::lower_binary("1ki", SUFFIX)]
    #[case::exponent_without_digits("1e", SUFFIX)]
    #[case::binary_with_digits("1Ki5", SUFFIX)]
    fn parse_as_upstream(#[case] s: &str, #[case] want: Result<bool, QuantityError>) {
        assert_eq!(parse(s).map(|p| p.negative), want);
    }

    #[rstest]
    #[case::number(serde_json::json!(2), Some(Ok(false)))]
    #[case::negative_number(serde_json::json!(-0.5), Some(Ok(true)))]
    #[case::spaces_around(serde_json::json!(" 1Gi "), Some(Ok(false)))]
    #[case::null(Value::Null, None)]
    fn parse_json_values(#[case] v: Value, #[case] want: Option<Result<bool, QuantityError>>) {
        assert_eq!(parse_json(&v).map(|r| r.map(|p| p.negative)), want);
    }
}
