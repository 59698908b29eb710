//! Object metadata the server owns: uids, timestamps, generated names, name validation.

use k8s_openapi::jiff::Timestamp;
use rand::Rng;

/// The current time as RFC 3339 to the second (`metav1.Time`).
pub fn now_rfc3339() -> String {
    Timestamp::from_second(now_seconds())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `ts` (RFC 3339) moved by `secs` seconds, to the second; None if it does not parse.
pub fn shift_rfc3339(ts: &str, secs: i64) -> Option<String> {
    let t: Timestamp = ts.parse().ok()?;
    let shifted = Timestamp::from_second(t.as_second().checked_add(secs)?).ok()?;
    Some(shifted.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The value at `path` (object keys only, outermost first), as `Value::pointer` finds it
/// for a pointer through objects without escapes, but without splitting and unescaping a pointer string: the
/// write path reads several fixed fields of every object.
pub fn at<'a>(obj: &'a serde_json::Value, path: &[&str]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(obj, |v, key| v.as_object()?.get(*key))
}

/// Nanoseconds since the Unix epoch (0 before it), for names that must differ in time.
pub fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A random RFC 4122 version 4 UUID.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `generateName` suffix: 5 characters from upstream's alphabet (no vowels, no look-alikes).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Why `name` is not a DNS-1123 subdomain (or label, when `label`), if it is not.
pub fn invalid_name(name: &str, label: bool) -> Option<String> {
    let max = if label { 63 } else { 253 };
    let ok_chars = name.bytes().all(|c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || (!label && c == b'.')
    });
    let ends_ok = name
        .bytes()
        .next()
        .zip(name.bytes().last())
        .is_some_and(|(a, z)| a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric());
    if name.len() <= max && ok_chars && ends_ok {
        return None;
    }
    Some(if label {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    } else {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    })
}

/// Which of apimachinery's name rules a kind's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds.
    Dns1123Subdomain,
    /// `NameIsDNSLabel`: namespaces.
    Dns1123Label,
    /// `NameIsDNS1035Label`: services (their names become DNS names and env variables).
    Dns1035Label,
}

/// What is wrong with `name` under `rule`, in apimachinery's words, one message per
/// problem (length first, then the pattern); empty when it is valid. With `prefix` (a
/// `generateName`) a trailing `-` is allowed, as the generated suffix follows it.
pub fn name_errors(name: &str, rule: NameRule, prefix: bool) -> Vec<String> {
    let masked;
    let name = match name.strip_suffix('-') {
        Some(head) if prefix => {
            masked = format!("{head}a");
            masked.as_str()
        }
        _ => name,
    };
    // One DNS-1123 label: lower case alphanumerics and '-', alphanumeric at both ends.
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && l.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && l.bytes().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let (max, ok, pattern) = match rule {
        NameRule::Dns1123Subdomain => (
            253,
            name.split('.').all(label_ok),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        NameRule::Dns1123Label => (
            63,
            label_ok(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        NameRule::Dns1035Label => (
            63,
            label_ok(name) && name.bytes().next().is_some_and(|c| c.is_ascii_lowercase()),
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
    };
    let mut errs = Vec::new();
    if name.len() > max {
        errs.push(format!("must be no more than {max} characters"));
    }
    if !ok {
        errs.push(pattern.to_string());
    }
    errs
}

/// Seconds since an RFC 3339 timestamp, if it parses.
pub fn age_seconds(ts: &str) -> Option<i64> {
    let t: Timestamp = ts.parse().ok()?;
    Some(now_seconds() - t.as_second())
}

/// apimachinery's `HumanDuration`: `45s`, `3m2s`, `25m`, `5h3m`, `30h`, `3d4h`, `12d`, `2y3d`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".to_string();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    let join = |a: i64, ua: &str, b: i64, ub: &str| {
        if b == 0 {
            format!("{a}{ua}")
        } else {
            format!("{a}{ua}{b}{ub}")
        }
    };
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        join(m, "m", s % 60, "s")
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        join(h, "h", m % 60, "m")
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        join(h / 24, "d", h % 24, "h")
    } else if h < 24 * 365 * 2 {
        format!("{}d", h / 24)
    } else if h < 24 * 365 * 8 {
        join(h / 24 / 365, "y", (h / 24) % 365, "d")
    } else {
        format!("{}y", h / 24 / 365)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::seconds(45, "45s")]
    #[case::two_minutes(125, "2m5s")]
    #[case::minutes(25 * 60, "25m")]
    #[case::hours_minutes(5 * 3600 + 180, "5h3m")]
    #[case::hours(30 * 3600, "30h")]
    #[case::days_hours(76 * 3600, "3d4h")]
    #[case::days(12 * 86400, "12d")]
    fn human(#[case] secs: i64, #[case] want: &str) {
        assert_eq!(human_duration(secs), want);
    }

    #[rstest]
    #[case::simple("web-1", false, true)]
    #[case::dots_in_subdomain("a.b", false, true)]
    #[case::dots_not_in_label("a.b", true, false)]
    #[case::upper("Web", false, false)]
    #[case::trailing_dash("web-", false, false)]
    #[case::empty("", false, false)]
    fn names(#[case] name: &str, #[case] label: bool, #[case] ok: bool) {
        assert_eq!(invalid_name(name, label).is_none(), ok);
    }

    #[rstest]
    #[case::subdomain_with_dots("a.b-c.d", NameRule::Dns1123Subdomain, false, 0)]
    #[case::subdomain_empty_label("a..b", NameRule::Dns1123Subdomain, false, 1)]
    #[case::subdomain_label_ending_in_dash("a-.b", NameRule::Dns1123Subdomain, false, 1)]
    #[case::subdomain_too_long(&"a".repeat(254), NameRule::Dns1123Subdomain, false, 1)]
    #[case::label_too_long_and_upper(&"A".repeat(64), NameRule::Dns1123Label, false, 2)]
    #[case::label_with_a_dot("a.b", NameRule::Dns1123Label, false, 1)]
    #[case::dns1035_leading_digit("1web", NameRule::Dns1035Label, false, 1)]
    #[case::dns1123_label_leading_digit("1web", NameRule::Dns1123Label, false, 0)]
    #[case::prefix_may_end_in_dash("web-", NameRule::Dns1035Label, true, 0)]
    #[case::name_may_not_end_in_dash("web-", NameRule::Dns1035Label, false, 1)]
    fn name_rules(
        #[case] name: &str,
        #[case] rule: NameRule,
        #[case] prefix: bool,
        #[case] errors: usize,
    ) {
        assert_eq!(name_errors(name, rule, prefix).len(), errors);
    }

    #[test]
    fn uid_is_a_v4_uuid() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
