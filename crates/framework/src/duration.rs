//! Go duration strings (`"15s"`, `"1m30s"`, `"1.5h"`), the form every `metav1.Duration`
//! field of the configuration and of plugin args takes.
//!
//! Upstream: Go's `time.ParseDuration` and `Duration.String`. The grammar is the same: an
//! optional sign, then one or more decimal numbers each followed by a unit (`ns`, `us`/`µs`,
//! `ms`, `s`, `m`, `h`); a bare `0` needs no unit. Two differences, both because
//! [`Duration`] cannot be negative: a negative duration is refused here rather than by
//! validation later, and `-0s` reads as zero.

use std::fmt::Write as _;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};

/// The largest duration Go can represent (`math.MaxInt64` nanoseconds); longer strings are
/// refused as upstream refuses them.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a Go duration string. The error says what is wrong with `text`, quoting it.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?}");
    let mut rest = text;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }

    let mut total: u128 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes().first().copied().unwrap_or(b'x');
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }

        // The integer part.
        let int_len = leading_digits(rest);
        let whole: u128 = if int_len == 0 {
            0
        } else {
            rest[..int_len].parse::<u128>().map_err(|_| invalid())?
        };
        if whole > MAX_NANOS {
            return Err(invalid());
        }
        rest = &rest[int_len..];

        // The fraction, kept exactly as digits over a power of ten. Digits past what a
        // nanosecond count can hold change nothing and are dropped, as Go drops them.
        let mut frac: u128 = 0;
        let mut scale: u128 = 1;
        let mut frac_len = 0;
        if let Some(r) = rest.strip_prefix('.') {
            frac_len = leading_digits(r);
            for digit in r[..frac_len].bytes().take(19) {
                frac = frac * 10 + u128::from(digit - b'0');
                scale *= 10;
            }
            rest = &r[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }

        // The unit: everything up to the next number.
        let unit_len = rest
            .bytes()
            .position(|b| b == b'.' || b.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!("missing unit in duration {text:?}"));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "\u{00b5}s" | "\u{03bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return Err(format!("unknown unit {unit:?} in duration {text:?}")),
        };

        total += whole * nanos_per_unit + frac * nanos_per_unit / scale;
        if total > MAX_NANOS {
            return Err(invalid());
        }
    }

    if negative && total != 0 {
        return Err(format!(
            "invalid duration {text:?}: a duration here cannot be negative"
        ));
    }
    // `total` is at most i64::MAX, so it fits a u64.
    Ok(Duration::from_nanos(
        u64::try_from(total).unwrap_or(u64::MAX),
    ))
}

/// Formats a duration as Go's `Duration.String` does: `"0s"`, `"500ms"`, `"1.5s"`,
/// `"1m30s"`, `"1h0m0s"`.
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (unit, per_unit, digits) = if nanos < 1_000 {
            ("ns", 1, 0)
        } else if nanos < 1_000_000 {
            ("\u{00b5}s", 1_000, 3)
        } else {
            ("ms", 1_000_000, 6)
        };
        return format!("{}{unit}", decimal(nanos, per_unit, digits));
    }
    let secs = nanos / 1_000_000_000;
    let (hours, minutes, seconds) = (secs / 3_600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if hours > 0 {
        let _ = write!(out, "{hours}h");
    }
    if hours > 0 || minutes > 0 {
        let _ = write!(out, "{minutes}m");
    }
    let in_last_minute = seconds * 1_000_000_000 + nanos % 1_000_000_000;
    let _ = write!(out, "{}s", decimal(in_last_minute, 1_000_000_000, 9));
    out
}

/// `value / per_unit` written in decimal without trailing zeros in the fraction.
fn decimal(value: u128, per_unit: u128, digits: usize) -> String {
    let (whole, frac) = (value / per_unit, value % per_unit);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

fn leading_digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// Serde for `metav1.Duration` fields: a Go duration string; `null` reads as zero, which
/// upstream treats as unset.
pub mod serde_go_duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Option::<GoDuration>::deserialize(d)?
            .map(|g| g.0)
            .unwrap_or_default())
    }

    struct GoDuration(Duration);

    impl<'de> Deserialize<'de> for GoDuration {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_str(GoDurationVisitor)
        }
    }

    struct GoDurationVisitor;

    impl Visitor<'_> for GoDurationVisitor {
        type Value = GoDuration;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a duration string such as \"15s\" or \"1m30s\"")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<GoDuration, E> {
            parse_go_duration(v).map(GoDuration).map_err(E::custom)
        }
    }
}
