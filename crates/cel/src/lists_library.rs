//! The Kubernetes lists library: `isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)` and
//! `lastIndexOf(x)` on a list; and cel-go's sets extension, which Kubernetes' base
//! environment also has: `sets.contains(a, b)` (every element of `b` is in `a`),
//! `sets.equivalent(a, b)` (each contains the other) and `sets.intersects(a, b)` (an element
//! in both).
//!
//! Upstream: staging/src/k8s.io/apiserver/pkg/cel/library/lists.go and cel-go's ext/sets.go.
//! Upstream declares them for lists of comparable (or, for `sum`, numeric) types and its
//! checker refuses others; here a list whose elements cannot be compared or added fails
//! when evaluated. Elements are equal as `==` says (`1 == 1.0`).

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Registers the library's functions on `env`.
pub(crate) fn library(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list.isSorted()", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list.sum()", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list.min()", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list.max()", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        last_index_of,
    )?;
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        sets_intersects,
    )?;
    Ok(())
}

/// The elements of the list a member function is called on (its first argument).
fn elements<'a, 'v>(args: &'a [CowVal<'_, 'v>]) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    elements_of(args, 0)
}

/// The elements of the list that is argument `index`.
fn elements_of<'a, 'v>(
    args: &'a [CowVal<'_, 'v>],
    index: usize,
) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    let list = args
        .get(index)
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: list.get_type().name().to_owned(),
            want: "list".to_owned(),
        })?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

fn compare(a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    match a.as_comparer() {
        Some(comparer) => comparer.compare(b),
        None => Err(ExecutionError::no_such_overload(
            "_<_",
            vec![
                a.get_type().name().to_owned(),
                b.get_type().name().to_owned(),
            ],
        )),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args)?;
    for pair in items.windows(2) {
        if let [a, b] = pair {
            if compare(*a, *b)? == Ordering::Greater {
                return Ok(CowVal::owned(CelBool::from(false)));
            }
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args)?;
    let Some((first, rest)) = items.split_first() else {
        // An empty list has no element type to take the zero of; upstream's checker picks
        // the overload by the list's declared type, and `[].sum()` is 0.
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let adder = total.as_adder().ok_or_else(|| {
            ExecutionError::no_such_overload(
                "_+_",
                vec![
                    total.get_type().name().to_owned(),
                    item.get_type().name().to_owned(),
                ],
            )
        })?;
        let next = adder.add(*item)?.into_owned();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

/// The element that `prefer` says wins over every other, by comparison.
fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    name: &str,
    prefer: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args)?;
    let mut best: Option<&(dyn Val + 'v)> = None;
    for item in items {
        best = match best {
            Some(b) if compare(item, b)? != prefer => Some(b),
            _ => Some(item),
        };
    }
    match best {
        Some(b) => Ok(CowVal::Owned(b.clone_as_boxed())),
        None => Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        )),
    }
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'v>(
    args: &[CowVal<'_, 'v>],
    mut indexes: impl Iterator<Item = usize>,
    items: &[&(dyn Val + 'v)],
) -> Result<i64, ExecutionError> {
    let needle = args
        .get(1)
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, args.len()))?;
    Ok(indexes
        .find(|&i| {
            items
                .get(i)
                .is_some_and(|item| item.equals(needle.as_ref()))
        })
        .map_or(-1, |i| i as i64))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args)?;
    let found = position(&args, 0..items.len(), &items)?;
    Ok(CowVal::owned(CelInt::from(found)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args)?;
    let found = position(&args, (0..items.len()).rev(), &items)?;
    Ok(CowVal::owned(CelInt::from(found)))
}

/// Whether every element of `b` is equal to an element of `a`.
fn contains_all(a: &[&dyn Val], b: &[&dyn Val]) -> bool {
    b.iter().all(|x| a.iter().any(|y| y.equals(*x)))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (elements_of(&args, 0)?, elements_of(&args, 1)?);
    Ok(CowVal::owned(CelBool::from(contains_all(&a, &b))))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (elements_of(&args, 0)?, elements_of(&args, 1)?);
    Ok(CowVal::owned(CelBool::from(
        contains_all(&a, &b) && contains_all(&b, &a),
    )))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (elements_of(&args, 0)?, elements_of(&args, 1)?);
    Ok(CowVal::owned(CelBool::from(
        b.iter().any(|x| a.iter().any(|y| y.equals(*x))),
    )))
}
