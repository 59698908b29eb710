//! The Kubernetes regex library: `"abc 123".find("[0-9]+")` (the first match, or `""`) and
//! `findAll(regex)` / `findAll(regex, n)` (every match, or at most `n`; `n < 0` is every).
//!
//! Upstream: staging/src/k8s.io/apiserver/pkg/cel/library/regex.go. Go's regexp and the
//! regex crate both take RE2 syntax; an invalid pattern's detail is the regex crate's.

use cel::common::types::{CelInt, CelList, CelString};
use cel::common::value::Val;
use cel::{DeclarationError, Env, ExecutionError};

/// Registers the library's functions on `env`.
pub(crate) fn library(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_member_overload!(env, fn find: (CelString, CelString) -> Result<CelString>)?;
    cel::add_member_overload!(env, fn find_all: (CelString, CelString) -> Result<CelList>)?;
    cel::add_member_overload!(env, fn find_all_n: (CelString, CelString, CelInt) -> Result<CelList>,
        name = "findAll")?;
    Ok(())
}

fn compile(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern)
        .map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))
}

fn find(s: &CelString<'_>, pattern: &CelString<'_>) -> Result<CelString<'static>, ExecutionError> {
    let re = compile("find", pattern.inner())?;
    Ok(CelString::from(
        re.find(s.inner())
            .map_or(String::new(), |m| m.as_str().to_string()),
    ))
}

fn find_all(
    s: &CelString<'_>,
    pattern: &CelString<'_>,
) -> Result<CelList<'static>, ExecutionError> {
    find_all_n(s, pattern, &CelInt::from(-1))
}

fn find_all_n(
    s: &CelString<'_>,
    pattern: &CelString<'_>,
    n: &CelInt,
) -> Result<CelList<'static>, ExecutionError> {
    let re = compile("findAll", pattern.inner())?;
    let limit = usize::try_from(*n.inner()).unwrap_or(usize::MAX);
    let matches: Vec<Box<dyn Val>> = re
        .find_iter(s.inner())
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val>)
        .collect();
    Ok(CelList::from(matches))
}
