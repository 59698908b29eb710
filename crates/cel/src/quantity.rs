//! The Kubernetes quantity library: `quantity("1Gi")`, `isQuantity`, and the methods on a
//! quantity (`compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`,
//! `isInteger`, `sign`, `add`, `sub`).
//!
//! Upstream: staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go, over apimachinery's
//! `resource.Quantity`. A quantity compares by its exact value in billionths (apimachinery
//! keeps a quantity to nano precision), so `200M` and `0.2G` are equal and `50M` is less
//! than `50Mi`. Whether it converts to an integer follows apimachinery's representation, not
//! only the value: a quantity parsed into an `int64` and a decimal scale converts when the
//! scale is not negative, one parsed into an arbitrary-precision decimal (more than 18
//! digits, a binary suffix with a fraction, precision below a nano) never does, so
//! `quantity("1.0").isInteger()` and `quantity("1.5Gi").isInteger()` are false, as upstream.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The CEL type of a quantity, as upstream names it.
pub static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

const NANO: i128 = 1_000_000_000;

/// apimachinery's cap on a parsed quantity that does not fit an `int64` amount:
/// `2^63 - 1` units, in billionths.
const MAX_NANOS: i128 = i64::MAX as i128 * NANO;

/// A resource quantity as a CEL value.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    /// The value in billionths, saturating at `i128`.
    nanos: i128,
    /// apimachinery's `int64Amount` (`value × 10^scale`), when the quantity is held as one
    /// rather than as an arbitrary-precision decimal.
    int: Option<IntAmount>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IntAmount {
    value: i64,
    scale: i32,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Quantity {
    /// Parses `s` as apimachinery's `ParseQuantity` does; the error text is apimachinery's.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        match framework::quantity::parse_nano_value(s) {
            Ok(nanos) => {
                let int = int_amount(s);
                let nanos = if int.is_some() {
                    nanos
                } else {
                    nanos.clamp(-MAX_NANOS, MAX_NANOS)
                };
                Ok(Quantity { nanos, int })
            }
            Err(_) if scan(s).is_some() => Err("unable to parse quantity's suffix".to_string()),
            Err(_) => Err(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                    .to_string(),
            ),
        }
    }

    /// An integer as a quantity (upstream `NewQuantity(i, DecimalExponent)`).
    fn from_int(i: i64) -> Quantity {
        Quantity {
            nanos: i128::from(i) * NANO,
            int: Some(IntAmount { value: i, scale: 0 }),
        }
    }

    /// The value as an `i64`, when apimachinery's `AsInt64` gives one: an `int64` amount
    /// whose scale is not negative and whose value times `10^scale` fits.
    pub fn as_i64(self) -> Option<i64> {
        let IntAmount { value, scale } = self.int?;
        let scale = u32::try_from(scale).ok()?;
        10i64.checked_pow(scale)?.checked_mul(value)
    }

    fn as_f64(self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    /// `self + other`, as `Quantity.Add`: an `int64` amount while both are one and the
    /// sum fits, at the smaller scale.
    fn plus(self, other: Quantity) -> Quantity {
        let int = match (self.int, other.int) {
            (Some(a), Some(b)) => int_add(a, b),
            _ => None,
        };
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            int,
        }
    }

    fn negated(self) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_neg(),
            int: self.int.and_then(|a| {
                a.value.checked_neg().map(|value| IntAmount {
                    value,
                    scale: a.scale,
                })
            }),
        }
    }
}

/// `a + b` as apimachinery's `int64Amount.Add`, `None` where it overflows.
fn int_add(a: IntAmount, b: IntAmount) -> Option<IntAmount> {
    let rescale = |v: i64, by: i32| 10i64.checked_pow(u32::try_from(by).ok()?)?.checked_mul(v);
    if b.value == 0 {
        return Some(a);
    }
    if a.value == 0 {
        return Some(b);
    }
    let (x, y, scale) = match a.scale.cmp(&b.scale) {
        Ordering::Equal => (a.value, b.value, a.scale),
        Ordering::Greater => (rescale(a.value, a.scale - b.scale)?, b.value, b.scale),
        Ordering::Less => (a.value, rescale(b.value, b.scale - a.scale)?, a.scale),
    };
    Some(IntAmount {
        value: x.checked_add(y)?,
        scale,
    })
}

/// A quantity string in apimachinery's parts: sign, integer digits, fraction digits, and
/// suffix.
struct Scanned<'a> {
    negative: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// apimachinery's scan of a quantity (`parseQuantityString`): sign, digits, at most one
/// point, suffix letters, a signed exponent; `None` where the shape is wrong (`10Mo`,
/// `1.5.5`), which tells those from a bad suffix (`10Mm`) in the error.
fn scan(s: &str) -> Option<Scanned<'_>> {
    fn digits(s: &str) -> (&str, &str) {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s.split_at(end)
    }
    if s.is_empty() {
        return None;
    }
    let negative = s.starts_with('-');
    let (num, rest) = digits(s.strip_prefix(['+', '-']).unwrap_or(s));
    let (denom, suffix) = match rest.strip_prefix('.') {
        Some(rest) => digits(rest),
        None => ("", rest),
    };
    let exponent = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
    let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if !exponent.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Scanned {
        negative,
        num,
        denom,
        suffix,
    })
}

/// The `int64Amount` `ParseQuantity` holds `s` as, or `None` where it takes an
/// arbitrary-precision decimal instead: more digits than an `int64` surely holds, a binary
/// suffix with a fraction or a large number, precision finer than a nano, or an overflow.
fn int_amount(s: &str) -> Option<IntAmount> {
    let Scanned {
        negative,
        num,
        denom,
        suffix,
    } = scan(s)?;
    let num = if num.is_empty() { "0" } else { num };
    let (binary, exponent): (bool, i32) = match suffix {
        "" => (false, 0),
        "n" => (false, -9),
        "u" => (false, -6),
        "m" => (false, -3),
        "k" => (false, 3),
        "M" => (false, 6),
        "G" => (false, 9),
        "T" => (false, 12),
        "P" => (false, 15),
        "E" => (false, 18),
        "Ki" => (true, 10),
        "Mi" => (true, 20),
        "Gi" => (true, 30),
        "Ti" => (true, 40),
        "Pi" => (true, 50),
        "Ei" => (true, 60),
        other => (false, other.get(1..)?.parse().ok()?),
    };
    let digits = i32::try_from(num.len() + denom.len()).ok()?;
    let (scale, precision, mantissa) = if !binary {
        (exponent, 18 - digits, 1i64)
    } else if denom.is_empty() {
        // apimachinery's estimate of the decimal digits a binary multiplier takes up.
        let num_digits = i32::try_from(num.len()).ok()?;
        (0, 15 - num_digits - exponent * 3 / 10 - 1, 1i64 << exponent)
    } else {
        (0, -1, 1)
    };
    let scale = scale.checked_sub(i32::try_from(denom.len()).ok()?)?;
    if precision < 0 || scale < -9 {
        return None;
    }
    let shifted: i64 = format!("{num}{denom}").parse().ok()?;
    let value = shifted.checked_mul(mantissa)?;
    Some(IntAmount {
        value: if negative { -value } else { value },
        scale,
    })
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
    q.plus(*other)
}

fn add_int(q: &Quantity, i: &CelInt) -> Quantity {
    q.plus(Quantity::from_int(*i.inner()))
}

fn sub(q: &Quantity, other: &Quantity) -> Quantity {
    q.plus(other.negated())
}

fn sub_int(q: &Quantity, i: &CelInt) -> Quantity {
    q.plus(Quantity::from_int(*i.inner()).negated())
}
