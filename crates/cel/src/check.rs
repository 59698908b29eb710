//! What cel-go's checker and cost estimator decide about a selector, over the `cel` crate's
//! parsed expression (the crate has neither): names that are not declared, fields `device`
//! does not have, the result type where it is known, and a worst-case cost.
//!
//! Upstream: dynamic-resource-allocation/cel compile.go (the environment: one variable,
//! `device`, with bounded maps and strings) and cel-go's checker and `EstimateCost`.
//!
//! Types are inferred only as far as they are certain; anything else is `dyn`, which the
//! checks accept, so a valid expression is never refused for want of inference. The cost
//! follows cel-go's model in outline (one unit per variable, field or call, 10 to build a
//! list, 30 a map, a comprehension's body times the most elements its range can have), not
//! to the unit: it exists to refuse what would run for long, as nested comprehensions do.

use std::fmt;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, SourceInfo,
};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::Program;

use crate::CompileError;

/// Upstream `resource.ResourceSliceMaxAttributesAndCapacitiesPerDevice`: the most domains,
/// and attributes in one domain, a device can have.
const MAX_ATTRIBUTES_PER_DEVICE: u64 = 32;

/// The most elements assumed for a list or map whose size is not known from the expression
/// or the device's declared bounds: upstream's longest attribute string
/// (`DeviceAttributeMaxValueLength`), the most parts splitting it can give.
const UNKNOWN_SIZE: u64 = 64;

/// A CEL type as far as it is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Quantity,
    Semver,
    Device,
    Dyn,
}

impl Ty {
    pub(crate) fn is_bool_or_dyn(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Dyn)
    }

    /// The type both `a` and `b` are, or `dyn`. An empty list literal's element type is
    /// open (cel-go gives it a type parameter), so it joins with any list.
    fn join(a: Ty, b: Ty) -> Ty {
        match (a, b) {
            (a, b) if a == b => a,
            (Ty::List(e), other) | (other, Ty::List(e)) if *e == Ty::Dyn => match other {
                Ty::List(_) => other,
                _ => Ty::Dyn,
            },
            _ => Ty::Dyn,
        }
    }
}

/// cel-go's names for the types.
impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Null => f.write_str("null_type"),
            Ty::List(e) => write!(f, "list({e})"),
            Ty::Map(k, v) => write!(f, "map({k}, {v})"),
            Ty::Quantity => f.write_str("kubernetes.Quantity"),
            Ty::Semver => f.write_str("kubernetes.Semver"),
            Ty::Device => f.write_str("kubernetes.DRADevice"),
            Ty::Dyn => f.write_str("dyn"),
        }
    }
}

/// What the check found out about an expression.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The result type, `None` where it is not known.
    pub(crate) result_type: Option<Ty>,
    /// The worst-case cost.
    pub(crate) max_cost: u64,
    /// How deeply the expression nests (a literal is 1), which is how deeply evaluating
    /// it recurses.
    pub(crate) depth: usize,
}

/// What is known of one sub-expression.
#[derive(Debug, Clone)]
struct Info {
    ty: Ty,
    /// The most elements it can have, if it is a list or map.
    size: u64,
    cost: u64,
}

impl Info {
    fn new(ty: Ty, cost: u64) -> Info {
        Info {
            ty,
            size: UNKNOWN_SIZE,
            cost,
        }
    }
}

/// Checks `program`, parsed from `source`.
pub(crate) fn check(program: &Program, source: &str) -> Result<Checked, CompileError> {
    let mut checker = Checker {
        source,
        source_info: program.source_info(),
        scope: Vec::new(),
        depth: 0,
        max_depth: 0,
    };
    let info = checker.expr(program.expression())?;
    Ok(Checked {
        result_type: match info.ty {
            Ty::Dyn => None,
            ty => Some(ty),
        },
        max_cost: info.cost,
        depth: checker.max_depth,
    })
}

/// The global functions the environment declares (besides operators); a call of any other
/// is refused as cel-go's checker refuses it.
const GLOBAL_FUNCTIONS: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "matches",
    "quantity",
    "isQuantity",
    "sign",
    "semver",
    "isSemver",
    "strings.quote",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
];

/// Identifiers that name types (`type(x) == int`).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

struct Checker<'a> {
    source: &'a str,
    source_info: &'a SourceInfo,
    /// Variables bound by comprehensions and `cel.bind`, innermost last.
    scope: Vec<(String, Info)>,
    /// The depth of the expression being checked, and the deepest seen.
    depth: usize,
    max_depth: usize,
}

impl Checker<'_> {
    fn expr(&mut self, e: &IdedExpr) -> Result<Info, CompileError> {
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        let info = self.expr_at_depth(e);
        self.depth -= 1;
        info
    }

    fn expr_at_depth(&mut self, e: &IdedExpr) -> Result<Info, CompileError> {
        match &e.expr {
            Expr::Literal(l) => Ok(Info::new(literal_type(l), 0)),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand)?;
                let cost = operand.cost.saturating_add(1);
                let ty = match &operand.ty {
                    Ty::Device => match device_field(&select.field) {
                        Some(ty) => ty,
                        None => {
                            return Err(
                                self.issue(e.id, &format!("undefined field '{}'", select.field))
                            )
                        }
                    },
                    Ty::Map(_, v) => (**v).clone(),
                    _ => Ty::Dyn,
                };
                if select.test {
                    return Ok(Info::new(Ty::Bool, cost));
                }
                Ok(Info {
                    size: element_size(&operand),
                    ty,
                    cost,
                })
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::List(ListExpr { elements, .. }) => {
                let mut cost: u64 = 10;
                let mut elem: Option<Ty> = None;
                for element in elements {
                    let info = self.expr(element)?;
                    cost = cost.saturating_add(info.cost);
                    elem = Some(match elem {
                        None => info.ty,
                        Some(t) => Ty::join(t, info.ty),
                    });
                }
                Ok(Info {
                    ty: Ty::List(Box::new(elem.unwrap_or(Ty::Dyn))),
                    size: elements.len() as u64,
                    cost,
                })
            }
            Expr::Map(map) => {
                let mut cost: u64 = 30;
                let mut key: Option<Ty> = None;
                let mut value: Option<Ty> = None;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let k = self.expr(&entry.key)?;
                        let v = self.expr(&entry.value)?;
                        cost = cost.saturating_add(k.cost).saturating_add(v.cost);
                        key = Some(key.map_or(k.ty.clone(), |t| Ty::join(t, k.ty)));
                        value = Some(value.map_or(v.ty.clone(), |t| Ty::join(t, v.ty)));
                    }
                }
                Ok(Info {
                    ty: Ty::Map(
                        Box::new(key.unwrap_or(Ty::Dyn)),
                        Box::new(value.unwrap_or(Ty::Dyn)),
                    ),
                    size: map.entries.len() as u64,
                    cost,
                })
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Struct(s) => Err(self.issue(
                e.id,
                &format!(
                    "undeclared reference to '{}' (in container '')",
                    s.type_name
                ),
            )),
            Expr::Unspecified => Ok(Info::new(Ty::Dyn, 0)),
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> Result<Info, CompileError> {
        if let Some((_, info)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return Ok(Info {
                cost: 1,
                ..info.clone()
            });
        }
        if name == "device" {
            return Ok(Info::new(Ty::Device, 1));
        }
        if TYPE_NAMES.contains(&name) {
            return Ok(Info::new(Ty::Dyn, 0));
        }
        Err(self.issue(
            id,
            &format!("undeclared reference to '{name}' (in container '')"),
        ))
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Result<Info, CompileError> {
        // `strings.quote(..)` and the like: a namespaced global function, not a member call.
        let namespace = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns))
                if GLOBAL_FUNCTIONS.contains(&format!("{ns}.{}", call.func_name).as_str()) =>
            {
                Some(ns.as_str())
            }
            _ => None,
        };
        let mut cost: u64 = 1;
        let target = match (&call.target, namespace) {
            (Some(t), None) => {
                let info = self.expr(t)?;
                cost = cost.saturating_add(info.cost);
                Some(info)
            }
            _ => None,
        };
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            let info = self.expr(arg)?;
            cost = cost.saturating_add(info.cost);
            args.push(info);
        }
        let name = call.func_name.as_str();
        if target.is_none()
            && namespace.is_none()
            && !is_operator(name)
            && !GLOBAL_FUNCTIONS.contains(&name)
        {
            return Err(self.issue(
                id,
                &format!("undeclared reference to '{name}' (in container '')"),
            ));
        }
        if target.is_none() && namespace.is_none() {
            let types: Vec<Ty> = args.iter().map(|a| a.ty.clone()).collect();
            if library_overload_missing(name, &types) {
                let types: Vec<String> = types.iter().map(Ty::to_string).collect();
                return Err(self.issue(
                    id,
                    &format!(
                        "found no matching overload for '{name}' applied to '({})'",
                        types.join(", ")
                    ),
                ));
            }
        }
        let arg_ty = |i: usize| args.get(i).map_or(Ty::Dyn, |a: &Info| a.ty.clone());
        let ty = match name {
            "_==_"
            | "_!=_"
            | "_<_"
            | "_<=_"
            | "_>_"
            | "_>=_"
            | "!_"
            | "_&&_"
            | "_||_"
            | "@in"
            | "@not_strictly_false"
            | "matches"
            | "isQuantity"
            | "isSemver"
            | "startsWith"
            | "endsWith"
            | "contains"
            | "isGreaterThan"
            | "isLessThan"
            | "isInteger"
            | "isSorted"
            | "equivalent"
            | "intersects" => Ty::Bool,
            "_+_" => match Ty::join(arg_ty(0), arg_ty(1)) {
                t @ (Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::List(_)) => t,
                _ => Ty::Dyn,
            },
            "_-_" | "_*_" | "_/_" | "_%_" => match (arg_ty(0), arg_ty(1)) {
                (a, b) if a == b && matches!(a, Ty::Int | Ty::Uint | Ty::Double) => a,
                _ => Ty::Dyn,
            },
            "-_" => match arg_ty(0) {
                t @ (Ty::Int | Ty::Double) => t,
                _ => Ty::Dyn,
            },
            "_?_:_" => Ty::join(arg_ty(1), arg_ty(2)),
            "_[_]" => {
                let operand = args.first();
                return Ok(Info {
                    ty: match operand.map(|o| &o.ty) {
                        Some(Ty::List(e)) => (**e).clone(),
                        Some(Ty::Map(_, v)) => (**v).clone(),
                        _ => Ty::Dyn,
                    },
                    size: operand.map_or(UNKNOWN_SIZE, element_size),
                    cost,
                });
            }
            "size" | "int" | "sign" | "compareTo" | "indexOf" | "lastIndexOf" | "major"
            | "minor" | "patch" | "asInteger" => Ty::Int,
            "uint" => Ty::Uint,
            "double" | "asApproximateFloat" => Ty::Double,
            "string" | "charAt" | "lowerAscii" | "upperAscii" | "replace" | "substring"
            | "trim" | "join" | "format" | "reverse" | "quote" | "find" => Ty::String,
            "bytes" => Ty::Bytes,
            "bool" => Ty::Bool,
            "split" | "findAll" => Ty::List(Box::new(Ty::String)),
            "quantity" => Ty::Quantity,
            "semver" => Ty::Semver,
            "sum" | "min" | "max" => match target.as_ref().map(|t| &t.ty) {
                Some(Ty::List(e)) if **e != Ty::Dyn => (**e).clone(),
                _ => Ty::Dyn,
            },
            "add" | "sub" if target.as_ref().is_some_and(|t| t.ty == Ty::Quantity) => Ty::Quantity,
            _ => Ty::Dyn,
        };
        Ok(Info::new(ty, cost))
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Result<Info, CompileError> {
        let range = self.expr(&c.iter_range)?;
        let init = self.expr(&c.accu_init)?;
        let (first, second) = match &range.ty {
            Ty::List(e) => (Ty::Int, (**e).clone()),
            Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
            _ => (Ty::Dyn, Ty::Dyn),
        };
        let iter = |ty: Ty| Info::new(ty, 0);
        let bound = self.scope.len();
        match &c.iter_var2 {
            // Two variables: index (or key) and element (or value).
            Some(var2) => {
                self.scope.push((c.iter_var.clone(), iter(first)));
                self.scope.push((var2.clone(), iter(second)));
            }
            None => {
                let ty = match &range.ty {
                    Ty::List(e) => (**e).clone(),
                    _ => first,
                };
                self.scope.push((c.iter_var.clone(), iter(ty)));
            }
        }
        self.scope.push((c.accu_var.clone(), init.clone()));
        let body = self.expr(&c.loop_cond).and_then(|cond| {
            let step = self.expr(&c.loop_step)?;
            Ok((cond.cost.saturating_add(step.cost), step.ty))
        });
        // The result sees the accumulator, not the iteration variables; its type is what
        // both the initial value and the step give (`map` starts from `[]`).
        self.scope.truncate(bound);
        let accu = match &body {
            Ok((_, step)) => Info {
                ty: Ty::join(init.ty.clone(), step.clone()),
                ..init.clone()
            },
            Err(_) => init.clone(),
        };
        self.scope.push((c.accu_var.clone(), accu));
        let result = self.expr(&c.result);
        self.scope.truncate(bound);
        let ((body, _), result) = (body?, result?);
        let cost = range
            .cost
            .saturating_add(init.cost)
            .saturating_add(range.size.saturating_mul(body))
            .saturating_add(result.cost);
        Ok(Info {
            ty: result.ty,
            size: result.size,
            cost,
        })
    }

    /// An error at `id`'s place, as cel-go prints an issue: position, message, the source
    /// line and a caret under the column.
    fn issue(&self, id: u64, message: &str) -> CompileError {
        let start = self
            .source_info
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        let before = self.source.get(..start).unwrap_or(self.source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count());
        let text = self.source.lines().nth(line - 1).unwrap_or("");
        CompileError::Invalid(format!(
            "ERROR: <input>:{line}:{}: {message}\n | {text}\n | {}^",
            column + 1,
            ".".repeat(column)
        ))
    }
}

fn literal_type(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

/// The fields of `device` and their types.
fn device_field(field: &str) -> Option<Ty> {
    let domains = |inner: Ty| Ty::Map(Box::new(Ty::String), Box::new(inner));
    match field {
        "driver" => Some(Ty::String),
        "attributes" => Some(domains(Ty::Map(Box::new(Ty::String), Box::new(Ty::Dyn)))),
        "capacity" => Some(domains(Ty::Map(
            Box::new(Ty::String),
            Box::new(Ty::Quantity),
        ))),
        "allowMultipleAllocations" => Some(Ty::Bool),
        _ => None,
    }
}

/// The size bound of what is selected or indexed out of `operand`: the device's maps hold
/// at most [`MAX_ATTRIBUTES_PER_DEVICE`] domains, and as many entries in each.
fn element_size(operand: &Info) -> u64 {
    match &operand.ty {
        Ty::Device => MAX_ATTRIBUTES_PER_DEVICE,
        Ty::Map(_, v) if matches!(**v, Ty::Map(..)) => MAX_ATTRIBUTES_PER_DEVICE,
        _ => UNKNOWN_SIZE,
    }
}

/// Whether a call of the quantity or semver library's global function `name` with
/// arguments of the known types `args` matches none of its overloads. Calls with an
/// argument of unknown type are left to evaluation, as are other functions.
fn library_overload_missing(name: &str, args: &[Ty]) -> bool {
    if args.contains(&Ty::Dyn) {
        return false;
    }
    match name {
        "quantity" | "isQuantity" => args != [Ty::String],
        "semver" | "isSemver" => args != [Ty::String] && args != [Ty::String, Ty::Bool],
        "sign" => args != [Ty::Quantity],
        _ => false,
    }
}

fn is_operator(name: &str) -> bool {
    name.starts_with(['_', '!', '-', '@'])
}

/// `cel.bind(name, init, expr)`: `expr` with `name` bound to `init`, evaluated once (cel-go's
/// bindings extension, which device selectors have).
pub(crate) fn bind_macro() -> Macro {
    Macro::receiver("bind", 3, expand_bind)
}

fn expand_bind(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let (Some(result), Some(init), Some(var)) = (args.pop(), args.pop(), args.pop()) else {
        return Ok(None);
    };
    let Expr::Ident(name) = var.expr else {
        return Err(helper.new_error(
            var.id,
            "cel.bind() variable names must be simple identifiers",
        ));
    };
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_string(),
        iter_var2: None,
        accu_var: name.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(name)),
        result,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}
