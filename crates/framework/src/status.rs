//! The outcome of running a plugin: a [`Code`], the reasons, and the plugin that said it.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/framework (Status, Code). "Does not fit" is a
//! normal outcome carried by a `Status`, never a Rust error.

use std::borrow::Cow;
use std::fmt;

/// What a plugin decided. The names and meanings are upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Code {
    /// The plugin ran correctly and found the pod schedulable (or had nothing to say).
    #[default]
    Success,
    /// An internal error: the attempt fails and the pod is retried after a backoff.
    Error,
    /// The pod does not fit now; preemption may help.
    Unschedulable,
    /// The pod does not fit, and preemption on this node would not help.
    UnschedulableAndUnresolvable,
    /// A Permit plugin wants the pod to wait.
    Wait,
    /// The plugin does not apply to this pod; its other extension points are skipped too.
    Skip,
    /// The pod waits for something outside the scheduler (e.g. an external controller);
    /// preemption does not help and the pod is not retried until a relevant event.
    Pending,
}

impl Code {
    /// The upstream spelling, used in JSON output, metrics labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plugin's verdict. Success is the default and costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    code: Code,
    reasons: Reasons,
    plugin: Option<&'static str>,
}

/// A status's reasons. Almost every status has none or one, and a rejected node gets its
/// own status, so the single reason is kept inline: rejecting a node allocates nothing for
/// a static reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Reasons {
    #[default]
    None,
    One(Cow<'static, str>),
    Many(Vec<Cow<'static, str>>),
}

impl Reasons {
    fn as_slice(&self) -> &[Cow<'static, str>] {
        match self {
            Reasons::None => &[],
            Reasons::One(r) => std::slice::from_ref(r),
            Reasons::Many(v) => v,
        }
    }
}

impl Status {
    /// A successful status.
    pub fn success() -> Self {
        Status::default()
    }

    /// A status with `code` and one reason.
    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Self {
        Status {
            code,
            reasons: Reasons::One(reason.into()),
            plugin: None,
        }
    }

    /// A status with `code` and the given reasons (possibly none).
    pub fn with_reasons<I, R>(code: Code, reasons: I) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<Cow<'static, str>>,
    {
        Status {
            code,
            reasons: {
                let mut v: Vec<Cow<'static, str>> = reasons.into_iter().map(Into::into).collect();
                match v.len() {
                    0 => Reasons::None,
                    1 => Reasons::One(v.swap_remove(0)),
                    _ => Reasons::Many(v),
                }
            },
            plugin: None,
        }
    }

    /// `Unschedulable` with one reason.
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::Unschedulable, reason)
    }

    /// `UnschedulableAndUnresolvable` with one reason.
    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// `Error` with its message as the reason.
    pub fn error(message: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::Error, message)
    }

    /// `Skip`, with no reason.
    pub fn skip() -> Self {
        Status::with_reasons(Code::Skip, std::iter::empty::<&'static str>())
    }

    /// This status, attributed to `plugin`.
    #[must_use]
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    /// Attributes the status to `plugin` unless it already names one.
    pub fn set_plugin_if_unset(&mut self, plugin: &'static str) {
        if self.plugin.is_none() {
            self.plugin = Some(plugin);
        }
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn reasons(&self) -> &[Cow<'static, str>] {
        self.reasons.as_slice()
    }

    /// The plugin that produced this status, once the runtime has attributed it.
    pub fn plugin(&self) -> Option<&'static str> {
        self.plugin
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    pub fn is_wait(&self) -> bool {
        self.code == Code::Wait
    }

    /// Whether the pod was rejected: `Unschedulable`, `UnschedulableAndUnresolvable` or `Pending`.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }

    /// The reasons joined by `", "`, as upstream's `Status.Message()`.
    pub fn message(&self) -> String {
        self.reasons.as_slice().join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if !self.reasons.as_slice().is_empty() {
            write!(f, ": {}", self.message())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::success(Status::success(), false, "")]
    #[case::unschedulable(Status::unschedulable("Too many pods"), true, "Too many pods")]
    #[case::unresolvable(Status::unresolvable("x"), true, "x")]
    #[case::pending(Status::new(Code::Pending, "waiting"), true, "waiting")]
    #[case::error(Status::error("boom"), false, "boom")]
    #[case::two_reasons(Status::with_reasons(Code::Unschedulable, ["Insufficient cpu", "Insufficient memory"]), true, "Insufficient cpu, Insufficient memory")]
    fn classifies(#[case] status: Status, #[case] rejected: bool, #[case] message: &str) {
        assert_eq!(
            (status.is_rejected(), status.message()),
            (rejected, message.to_string())
        );
    }

    #[test]
    fn plugin_is_set_once() {
        let mut s = Status::unschedulable("r").with_plugin("A");
        s.set_plugin_if_unset("B");
        assert_eq!(s.plugin(), Some("A"));
    }
}
