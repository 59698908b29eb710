//! The Kubernetes quantity library: `quantity("1Gi")`, `isQuantity`, and the methods on a
//! quantity (`compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`,
//! `isInteger`, `sign`, `add`, `sub`).
//!
//! Upstream: staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go. A quantity is kept as
//! its exact value in billionths, as apimachinery keeps it to nano precision, so `200M` and
//! `0.2G` are equal and `50M` is less than `50Mi`.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The CEL type of a quantity, as upstream names it.
pub static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

const NANO: i128 = 1_000_000_000;

/// A resource quantity as a CEL value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// Parses `s` as apimachinery's `ParseQuantity` does; the error text is apimachinery's.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        match framework::quantity::parse_nano_value(s) {
            Ok(nanos) => Ok(Quantity { nanos }),
            Err(_) if matches_quantity_shape(s) => {
                Err("unable to parse quantity's suffix".to_string())
            }
            Err(_) => Err(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                    .to_string(),
            ),
        }
    }

    /// The value as an `i64` if it is a whole number that fits (upstream `AsInt64`).
    pub fn as_i64(self) -> Option<i64> {
        if self.nanos % NANO != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANO).ok()
    }

    fn as_f64(self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    fn plus(self, nanos: i128) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(nanos),
        }
    }
}

/// Whether `s` gets past apimachinery's scan of a quantity (sign, digits, at most one
/// point, suffix letters, a signed exponent), which tells a bad suffix (`10Mm`) from a
/// string that is no quantity at all (`10Mo`, `1.5.5`) in the error.
fn matches_quantity_shape(s: &str) -> bool {
    fn after_digits(s: &str) -> &str {
        s.trim_start_matches(|c: char| c.is_ascii_digit())
    }
    let rest = after_digits(s.strip_prefix(['+', '-']).unwrap_or(s));
    let rest = after_digits(rest.strip_prefix('.').unwrap_or(rest));
    let rest = rest.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
    !s.is_empty() && after_digits(rest.strip_prefix(['+', '-']).unwrap_or(rest)).is_empty()
}

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Quantity>() == Some(self)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl StaticVal for Quantity {}

/// Registers the library's functions on `env`.
pub(crate) fn library(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(QUANTITY_TYPE.to_owned())?;
    cel::add_overload!(env, fn string_to_quantity: (CelString) -> Result<Quantity>,
        name = "quantity")?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool, name = "isQuantity")?;
    cel::add_overload!(env, fn sign: (Quantity) -> CelInt, name = "sign")?;
    cel::add_member_overload!(env, fn sign: (Quantity) -> CelInt, name = "sign")?;
    cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> CelBool,
        name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> CelBool,
        name = "isLessThan")?;
    cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> CelInt,
        name = "compareTo")?;
    cel::add_member_overload!(env, fn as_approximate_float: (Quantity) -> CelDouble,
        name = "asApproximateFloat")?;
    cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>,
        name = "asInteger")?;
    cel::add_member_overload!(env, fn is_integer: (Quantity) -> CelBool, name = "isInteger")?;
    cel::add_member_overload!(env, fn add: (Quantity, Quantity) -> Quantity, name = "add")?;
    cel::add_member_overload!(env, fn add_int: (Quantity, CelInt) -> Quantity, name = "add")?;
    cel::add_member_overload!(env, fn sub: (Quantity, Quantity) -> Quantity, name = "sub")?;
    cel::add_member_overload!(env, fn sub_int: (Quantity, CelInt) -> Quantity, name = "sub")?;
    Ok(())
}

fn string_to_quantity(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    Quantity::parse(s.inner()).map_err(|e| ExecutionError::function_error("quantity", e))
}

fn is_quantity(s: &CelString<'_>) -> CelBool {
    Quantity::parse(s.inner()).is_ok().into()
}

fn sign(q: &Quantity) -> CelInt {
    CelInt::from(q.nanos.signum() as i64)
}

fn is_greater_than(q: &Quantity, other: &Quantity) -> CelBool {
    (q > other).into()
}

fn is_less_than(q: &Quantity, other: &Quantity) -> CelBool {
    (q < other).into()
}

fn compare_to(q: &Quantity, other: &Quantity) -> CelInt {
    CelInt::from(match q.cmp(other) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

fn as_approximate_float(q: &Quantity) -> CelDouble {
    q.as_f64().into()
}

fn as_integer(q: &Quantity) -> Result<CelInt, ExecutionError> {
    q.as_i64().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}

fn is_integer(q: &Quantity) -> CelBool {
    q.as_i64().is_some().into()
}

fn add(q: &Quantity, other: &Quantity) -> Quantity {
    q.plus(other.nanos)
}

fn add_int(q: &Quantity, i: &CelInt) -> Quantity {
    q.plus(i128::from(*i.inner()) * NANO)
}

fn sub(q: &Quantity, other: &Quantity) -> Quantity {
    q.plus(other.nanos.saturating_neg())
}

fn sub_int(q: &Quantity, i: &CelInt) -> Quantity {
    q.plus(-(i128::from(*i.inner()) * NANO))
}
