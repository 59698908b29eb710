//! The Kubernetes semver library: `semver("1.2.3")` (and `semver(s, true)`, which accepts
//! a `v` prefix, a missing minor or patch and leading zeros), `isSemver`, and the methods
//! `major`, `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`. A `version`
//! device attribute is a semver value.
//!
//! Upstream: staging/src/k8s.io/apiserver/pkg/cel/library/semverlib.go, which parses with
//! github.com/blang/semver/v4; the parse rules and error texts here are that package's.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The CEL type of a semantic version, as upstream names it.
pub static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// A semantic version (semver.org 2.0.0) as a CEL value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
    /// Build metadata: kept as written, ignored by comparisons.
    build: Vec<String>,
}

/// One dot-separated part of a pre-release: numeric parts order below alphanumeric ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PreRelease {
    Numeric(u64),
    Alphanumeric(String),
}

impl Semver {
    /// Parses `s` strictly, as blang/semver's `Parse` does.
    pub fn parse(s: &str) -> Result<Semver, String> {
        if s.is_empty() {
            return Err("Version string empty".to_string());
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts[..] else {
            return Err("No Major.Minor.Patch elements found".to_string());
        };
        let major = number(major, "major", "Major")?;
        let minor = number(minor, "minor", "Minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = number(patch, "patch", "Patch")?;
        let pre = match pre {
            Some(pre) => pre.split('.').map(pre_release).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let build = match build {
            Some(build) => build
                .split('.')
                .map(|b| {
                    if b.is_empty() {
                        Err("Build meta data is empty".to_string())
                    } else if !b.bytes().all(is_alphanumeric) {
                        Err(format!(
                            "Invalid character(s) found in build meta data {b:?}"
                        ))
                    } else {
                        Ok(b.to_string())
                    }
                })
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// Parses `s` after normalising it as upstream's `normalizeAndParse` does: a leading
    /// `v` dropped, leading zeros dropped, a missing minor or patch filled with `0`.
    pub fn parse_normalized(s: &str) -> Result<Semver, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() <= 1 {
                    return p.to_string();
                }
                let trimmed = p.trim_start_matches('0');
                if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_string()
                } else {
                    format!("0{trimmed}")
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".to_string());
            }
            parts.resize(3, "0".to_string());
        }
        Semver::parse(&parts.join("."))
    }
}

fn number(s: &str, name: &str, capitalized: &str) -> Result<u64, String> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Invalid character(s) found in {name} number {s:?}"));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(format!(
            "{capitalized} number must not contain leading zeroes {s:?}"
        ));
    }
    s.parse::<u64>().map_err(|_| parse_uint_error(s))
}

/// Go's `strconv.ParseUint` error for a string of digits (or nothing) that is no `u64`.
fn parse_uint_error(s: &str) -> String {
    let reason = if s.is_empty() {
        "invalid syntax"
    } else {
        "value out of range"
    };
    format!("strconv.ParseUint: parsing {s:?}: {reason}")
}

fn is_alphanumeric(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn pre_release(s: &str) -> Result<PreRelease, String> {
    if s.is_empty() {
        return Err("Prerelease is empty".to_string());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        if s.len() > 1 && s.starts_with('0') {
            return Err(format!(
                "Numeric PreRelease version must not contain leading zeroes {s:?}"
            ));
        }
        return s
            .parse()
            .map(PreRelease::Numeric)
            .map_err(|_| parse_uint_error(s));
    }
    if !s.bytes().all(is_alphanumeric) {
        return Err(format!("Invalid character(s) found in prerelease {s:?}"));
    }
    Ok(PreRelease::Alphanumeric(s.to_string()))
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Precedence as semver.org defines it: build metadata does not count, a version with a
/// pre-release is below the same version without one.
impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }

    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Semver>()
            .is_some_and(|o| self.cmp(o) == Ordering::Equal)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl StaticVal for Semver {}

/// Registers the library's functions on `env`.
pub(crate) fn library(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(SEMVER_TYPE.to_owned())?;
    cel::add_overload!(env, fn string_to_semver: (CelString) -> Result<Semver>,
        name = "semver")?;
    cel::add_overload!(env, fn string_to_semver_normalize: (CelString, CelBool) -> Result<Semver>,
        name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool, name = "isSemver")?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> CelBool,
        name = "isSemver")?;
    cel::add_member_overload!(env, fn major: (Semver) -> CelInt)?;
    cel::add_member_overload!(env, fn minor: (Semver) -> CelInt)?;
    cel::add_member_overload!(env, fn patch: (Semver) -> CelInt)?;
    cel::add_member_overload!(env, fn is_greater_than: (Semver, Semver) -> CelBool,
        name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn is_less_than: (Semver, Semver) -> CelBool,
        name = "isLessThan")?;
    cel::add_member_overload!(env, fn compare_to: (Semver, Semver) -> CelInt,
        name = "compareTo")?;
    Ok(())
}

fn parse_with(s: &str, normalize: bool) -> Result<Semver, String> {
    if normalize {
        Semver::parse_normalized(s)
    } else {
        Semver::parse(s)
    }
}

fn string_to_semver(s: &CelString<'_>) -> Result<Semver, ExecutionError> {
    Semver::parse(s.inner()).map_err(|e| ExecutionError::function_error("semver", e))
}

fn string_to_semver_normalize(
    s: &CelString<'_>,
    normalize: &CelBool,
) -> Result<Semver, ExecutionError> {
    parse_with(s.inner(), *normalize.inner())
        .map_err(|e| ExecutionError::function_error("semver", e))
}

fn is_semver(s: &CelString<'_>) -> CelBool {
    Semver::parse(s.inner()).is_ok().into()
}

fn is_semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> CelBool {
    parse_with(s.inner(), *normalize.inner()).is_ok().into()
}

fn to_int(n: u64) -> CelInt {
    CelInt::from(i64::try_from(n).unwrap_or(i64::MAX))
}

fn major(v: &Semver) -> CelInt {
    to_int(v.major)
}

fn minor(v: &Semver) -> CelInt {
    to_int(v.minor)
}

fn patch(v: &Semver) -> CelInt {
    to_int(v.patch)
}

fn is_greater_than(v: &Semver, other: &Semver) -> CelBool {
    (v > other).into()
}

fn is_less_than(v: &Semver, other: &Semver) -> CelBool {
    (v < other).into()
}

fn compare_to(v: &Semver, other: &Semver) -> CelInt {
    CelInt::from(match v.cmp(other) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}
