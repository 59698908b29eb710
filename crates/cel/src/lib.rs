//! CEL device selectors of Dynamic Resource Allocation: `CELDeviceSelector.expression` in a
//! DeviceClass or a ResourceClaim's request, compiled once and matched against devices.
//!
//! Upstream: staging/src/k8s.io/dynamic-resource-allocation/cel (compile.go), with the
//! Kubernetes CEL libraries a selector can call (staging/src/k8s.io/apiserver/pkg/cel/library).
//!
//! An expression sees one variable, `device`:
//! - `device.driver`: the driver's name;
//! - `device.attributes`: domain → attribute name → value. `gpu.example.com/model` is
//!   `device.attributes["gpu.example.com"].model`, a name without a domain belongs to the
//!   driver's domain, and a domain the device has nothing in is an empty map (so a missing
//!   attribute is "no such key", not a missing domain). Values are bool, int, string or
//!   `semver` (a `version` attribute);
//! - `device.capacity`: domain → capacity name → `quantity`, with the same domain rules;
//! - `device.allowMultipleAllocations`: whether the device may be allocated several times.
//!
//! Besides standard CEL (with `matches`), the libraries device selectors use are here:
//! `quantity` and `semver` (see [`quantity`] and [`semver`]), `find` and `findAll`
//! (Kubernetes' regex library), `isSorted`, `sum`, `min`, `max`, `indexOf` and
//! `lastIndexOf` on lists (Kubernetes' lists library), `sets.contains`, `sets.equivalent`
//! and `sets.intersects` (cel-go's sets extension), cel-go's strings extension
//! (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//! `substring`, `trim`, `join`, `format`) and `cel.bind`.
//!
//! The `cel` crate parses and interprets; it has no type checker and no cost accounting, so
//! [`DeviceSelector::compile`] runs a check of its own over the parsed expression (see
//! `check.rs`): undeclared variables, fields `device` does not have, a result type known not
//! to be bool, and a worst-case cost estimate refused above upstream's limit. Evaluation is
//! not metered, where upstream stops one at the limit (`actual cost limit exceeded`): the
//! `cel` crate (0.15, its newest release) evaluates a program in one recursive call with no
//! cost tracker, observer, interrupt check or cancellation, and runs operators and
//! comprehension loops inside the interpreter, so code outside it could count only the
//! calls of the functions registered here, which is not cel-go's cost. What keeps a
//! selector's evaluation bounded is the API server refusing, when the object is written, a
//! selector whose estimate, made with the API's bounds on a device's attributes and
//! strings, is above the limit.
//!
//! The `cel` crate's parser and interpreter recurse per level of nesting, deeply enough that
//! an expression of a few hundred bytes would overflow an ordinary thread's stack and abort
//! the process; compiling, and evaluating an expression that nests deeply, run on a thread
//! with a large stack (see `DEEP_STACK_SIZE`).

mod check;
mod device;
mod lists_library;

pub use device::DeviceValue;
pub mod quantity;
mod regex_library;
pub mod semver;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cel::common::types::CelBool;
use cel::{Context, Env, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::Device;

/// Upstream `resource.CELSelectorExpressionMaxLength`: longer expressions are refused before
/// they are parsed.
pub const CEL_SELECTOR_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;

/// Upstream `resource.CELSelectorExpressionMaxCost`, in CEL cost units: an expression whose
/// worst-case estimate is above it is refused.
pub const CEL_SELECTOR_EXPRESSION_MAX_COST: u64 = 1_000_000;

/// Why an expression is not a device selector. The texts are upstream's; the API's
/// validation reports them on the `expression` field as upstream does: `TooLong` as a
/// "Too long" error, `Invalid` and `ResultType` as "Invalid value" with the expression,
/// `CostLimit` as "Forbidden", `Internal` as "Internal error".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Longer than [`CEL_SELECTOR_EXPRESSION_MAX_LENGTH`] bytes (upstream's `field.TooLong`).
    #[error("may not be more than {max} bytes")]
    TooLong {
        /// The limit, [`CEL_SELECTOR_EXPRESSION_MAX_LENGTH`].
        max: usize,
    },
    /// Does not parse, or names a variable, function or field that does not exist; the
    /// detail is cel-go's issue text (`ERROR: <input>:line:column: ...`).
    #[error("compilation failed: {0}")]
    Invalid(String),
    /// The result type is known and is not `bool`.
    #[error("must evaluate to bool or the unknown type, not {0}")]
    ResultType(String),
    /// The worst-case cost estimate is above [`CEL_SELECTOR_EXPRESSION_MAX_COST`].
    #[error("too complex, exceeds cost limit")]
    CostLimit {
        /// The estimate.
        estimated: u64,
    },
    /// The environment could not be built: a fault of this crate, not of the expression.
    #[error("{0}")]
    Internal(String),
}

/// Why a compiled selector could not say whether a device matches. The texts are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A map lookup found nothing: an attribute or capacity the device does not have.
    #[error("no such key: {0}")]
    NoSuchKey(String),
    /// A device attribute whose value the selector cannot be given.
    #[error("attribute {name}: {reason}")]
    Attribute {
        /// The attribute's name as the device lists it.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The expression evaluated to something other than a bool.
    #[error("CEL result of type {0} could not be converted to bool")]
    NotBool(String),
    /// Any other evaluation error (no matching overload, a function's own error, ...).
    #[error("{0}")]
    Runtime(String),
}

/// The environment every selector is compiled and evaluated in: standard CEL, the strings
/// extension, the Kubernetes quantity, semver, regex and lists libraries and `cel.bind`.
static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    let declared = env
        .add_extension(cel::extensions::strings)
        .and_then(|()| env.add_extension(quantity::library))
        .and_then(|()| env.add_extension(semver::library))
        .and_then(|()| env.add_extension(regex_library::library))
        .and_then(|()| env.add_extension(lists_library::library))
        .and_then(|()| env.add_macro(check::bind_macro()));
    match declared {
        Ok(()) => Ok(Arc::new(env)),
        Err(e) => Err(format!("unexpected error loading CEL environment: {e}")),
    }
});

fn env() -> Result<&'static Arc<Env>, CompileError> {
    ENV.as_ref().map_err(|e| CompileError::Internal(e.clone()))
}

/// One compiled device selector.
///
/// Upstream: dynamic-resource-allocation/cel `CompilationResult`.
pub struct DeviceSelector {
    program: Program,
    env: Arc<Env>,
    max_cost: u64,
    /// How deeply the expression nests; see [`INLINE_EVALUATION_DEPTH`].
    depth: usize,
}

/// The stack the `cel` crate gets to parse, check and evaluate a deep expression on. Its
/// parser and interpreter recurse several frames per level of nesting (about 30 KiB a level
/// in a debug build), so an expression well within the length limit (fifty nested
/// parentheses, a hundred terms added up) overflows an ordinary 2 MiB thread stack and
/// aborts the process. Only the pages a parse touches are ever committed.
const DEEP_STACK_SIZE: usize = 256 << 20;

/// Expressions nesting deeper than this are evaluated on a thread of their own with a
/// [`DEEP_STACK_SIZE`] stack; shallower ones, which is every selector written by hand, on
/// the caller's.
const INLINE_EVALUATION_DEPTH: usize = 16;

/// Runs `f` on a thread with a [`DEEP_STACK_SIZE`] stack and returns what it returns.
fn on_deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel".to_string())
            .stack_size(DEEP_STACK_SIZE)
            .spawn_scoped(scope, f)
            .map_err(|e| format!("cannot start a thread for a CEL expression: {e}"))?
            .join()
            .map_err(|_| "a CEL expression's thread panicked".to_string())
    })
}

impl std::fmt::Debug for DeviceSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSelector")
            .field("expression", &self.program.source_info().source)
            .field("max_cost", &self.max_cost)
            .finish()
    }
}

impl DeviceSelector {
    /// Parses and checks `expression` as upstream's `CompileCELExpression` and the API's
    /// validation do: its length, its syntax, the names it uses, its result type where that
    /// is known, and its worst-case cost.
    pub fn compile(expression: &str) -> Result<DeviceSelector, CompileError> {
        DeviceSelector::compile_with(expression, true)
    }

    /// [`DeviceSelector::compile`], with the cost limit applied or not.
    fn compile_with(expression: &str, limit_cost: bool) -> Result<DeviceSelector, CompileError> {
        if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
            return Err(CompileError::TooLong {
                max: CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
            });
        }
        // Compiling is rare (the API server validating a write, a cache miss), so it always
        // gets a deep stack rather than guessing from the text how deep the parse will go.
        on_deep_stack(|| DeviceSelector::compile_here(expression, limit_cost))
            .map_err(CompileError::Internal)?
    }

    fn compile_here(expression: &str, limit_cost: bool) -> Result<DeviceSelector, CompileError> {
        if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
            return Err(CompileError::TooLong {
                max: CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
            });
        }
        let env = env()?;
        let program = env
            .compile(expression)
            .map_err(|e| CompileError::Invalid(e.to_string()))?;
        let checked = check::check(&program, expression)?;
        if let Some(ty) = checked.result_type.filter(|t| !t.is_bool_or_dyn()) {
            return Err(CompileError::ResultType(ty.to_string()));
        }
        if limit_cost && checked.max_cost > CEL_SELECTOR_EXPRESSION_MAX_COST {
            return Err(CompileError::CostLimit {
                estimated: checked.max_cost,
            });
        }
        Ok(DeviceSelector {
            program,
            env: Arc::clone(env),
            max_cost: checked.max_cost,
            depth: checked.depth,
        })
    }

    /// The worst-case cost estimate of the expression, in CEL cost units.
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }

    /// Whether the device `device` of driver `driver` is selected.
    ///
    /// Upstream: `CompilationResult.DeviceMatches`.
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, EvalError> {
        self.matches_value(&DeviceValue::new(driver, device)?)
    }

    /// [`DeviceSelector::matches`] for a device already made into the selector's input:
    /// building that input is most of the work of a match, so a caller matching one device
    /// against several selectors builds it once.
    pub fn matches_value(&self, device: &DeviceValue) -> Result<bool, EvalError> {
        if self.depth > INLINE_EVALUATION_DEPTH {
            return on_deep_stack(|| self.evaluate(device)).map_err(EvalError::Runtime)?;
        }
        self.evaluate(device)
    }

    fn evaluate(&self, device: &DeviceValue) -> Result<bool, EvalError> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.set_variable_resolver(device);
        let result = Value::resolve_val(self.program.expression(), &context).map_err(eval_error)?;
        match result.downcast_ref::<CelBool>() {
            Some(b) => Ok(*b.inner()),
            None => Err(EvalError::NotBool(result.get_type().name().to_string())),
        }
    }
}

/// The cel crate's error as upstream words it.
fn eval_error(e: ExecutionError) -> EvalError {
    match e {
        ExecutionError::NoSuchKey(key) => EvalError::NoSuchKey(key.to_string()),
        ExecutionError::FunctionError { message, .. } => EvalError::Runtime(message),
        ExecutionError::UnexpectedType { got, want } if want == "iterable" => {
            EvalError::Runtime(format!("got '{got}', expected iterable type"))
        }
        other => EvalError::Runtime(other.to_string()),
    }
}

/// Compiled selectors by expression, shared by every caller: a class's or request's
/// selector is compiled once, not once per device or per scheduling cycle.
///
/// Upstream: dynamic-resource-allocation/cel `Cache`: least recently used entries are
/// dropped first, compile errors are not kept, and the cost estimate does not refuse an
/// expression: the API server did that when the object was written, and upstream's
/// estimate and this crate's differ in detail, so a selector the cluster accepted is never
/// refused here.
#[derive(Debug)]
pub struct SelectorCache {
    capacity: usize,
    entries: Mutex<CacheEntries>,
}

#[derive(Debug, Default)]
struct CacheEntries {
    /// The compiled selector and when it was last used.
    by_expression: HashMap<String, (Arc<DeviceSelector>, u64)>,
    /// Ticks once per lookup.
    clock: u64,
}

impl SelectorCache {
    /// A cache that holds at most `capacity` compiled expressions (at least one).
    pub fn new(capacity: usize) -> Self {
        SelectorCache {
            capacity: capacity.max(1),
            entries: Mutex::new(CacheEntries::default()),
        }
    }

    /// The compiled `expression`, compiled now if it is not cached.
    pub fn get(&self, expression: &str) -> Result<Arc<DeviceSelector>, CompileError> {
        {
            let mut entries = self.lock();
            entries.clock += 1;
            let now = entries.clock;
            if let Some((found, used)) = entries.by_expression.get_mut(expression) {
                *used = now;
                return Ok(Arc::clone(found));
            }
        }
        // Compiled without the lock held, so lookups of other expressions are not held up;
        // two threads may compile the same expression, and the second insert wins.
        let compiled = Arc::new(DeviceSelector::compile_with(expression, false)?);
        let mut entries = self.lock();
        if entries.by_expression.len() >= self.capacity
            && !entries.by_expression.contains_key(expression)
        {
            // A linear scan: the cache holds the selectors of a few classes and claims.
            let oldest = entries
                .by_expression
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(e, _)| e.clone());
            if let Some(oldest) = oldest {
                entries.by_expression.remove(&oldest);
            }
        }
        let now = entries.clock;
        entries
            .by_expression
            .insert(expression.to_string(), (Arc::clone(&compiled), now));
        Ok(compiled)
    }

    /// How many compiled expressions the cache holds.
    pub fn len(&self) -> usize {
        self.lock().by_expression.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `expression` is cached (without counting as a use).
    pub fn contains(&self, expression: &str) -> bool {
        self.lock().by_expression.contains_key(expression)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheEntries> {
        // Every update is one insert, remove or counter step, none of which can panic
        // half-way, so a lock poisoned by a panic elsewhere still guards a sound map.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
