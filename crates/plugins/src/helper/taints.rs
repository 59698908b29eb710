//! Taints and tolerations: whether a pod's tolerations tolerate a node's taints.
//!
//! Upstream: k8s.io/component-helpers/scheduling/corev1 (TolerationsTolerateTaint,
//! Toleration.ToleratesTaint), shared by TaintToleration and NodeUnschedulable.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};

/// The pod's tolerations (none when it has no spec).
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    let value = taint.value.as_deref().unwrap_or("");
    tolerations
        .iter()
        .any(|t| toleration_tolerates(t, &taint.key, value, &taint.effect))
}

/// Whether one toleration tolerates the taint `key=value:effect`:
/// - an empty effect matches every effect, otherwise the effects must be equal;
/// - an empty key matches every key, otherwise the keys must be equal;
/// - `Equal` (or no operator) needs equal values, `Exists` matches any value, `Lt`/`Gt` need
///   both values to be canonical decimal integers with the taint's below/above the
///   toleration's; any other operator matches nothing.
pub fn toleration_tolerates(t: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    let t_effect = t.effect.as_deref().unwrap_or("");
    if !t_effect.is_empty() && t_effect != effect {
        return false;
    }
    let t_key = t.key.as_deref().unwrap_or("");
    if !t_key.is_empty() && t_key != key {
        return false;
    }
    let t_value = t.value.as_deref().unwrap_or("");
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t_value == value,
        "Exists" => true,
        "Lt" => compare_numeric(t_value, value).is_some_and(|(tol, taint)| taint < tol),
        "Gt" => compare_numeric(t_value, value).is_some_and(|(tol, taint)| taint > tol),
        _ => false,
    }
}

/// Both values as integers, or `None` when either is not a canonical decimal integer.
fn compare_numeric(toleration: &str, taint: &str) -> Option<(i64, i64)> {
    Some((
        parse_canonical_int(toleration)?,
        parse_canonical_int(taint)?,
    ))
}

/// Parses `0` or an optional `-` followed by a digit 1-9 and more digits, fitting in i64.
/// Upstream refuses `+5`, `05`, `-0` and spaces, which a plain integer parse would accept.
fn parse_canonical_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = match digits.as_bytes() {
        [b'0'] => digits.len() == s.len(),
        [first, rest @ ..] => {
            (b'1'..=b'9').contains(first) && rest.iter().all(|b| b.is_ascii_digit())
        }
        [] => false,
    };
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}
