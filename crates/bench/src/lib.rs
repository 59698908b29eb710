//! `kubesched bench`: upstream scheduler_perf's workloads, run against kubesched.
//!
//! Start with [`workload`] (the workloads as data: templates, sizes, churn, upstream's
//! floors), then [`in_process`] (the driver of `--mode in-process`: an in-memory cluster and
//! the real scheduler), [`http`] (`--mode http`: the local API server and `kubesched run`'s
//! code path), [`external`] (`--scheduler-command`: the local API server and a scheduler
//! process of the user's), [`report`] (what a run measured; JSON and table output).

pub mod external;
pub mod http;
pub mod in_process;
pub mod objects;
pub mod process;
pub mod recorder;
pub mod report;
pub mod workload;

#[cfg(test)]
mod tests;

pub use in_process::{RunOptions, SchedulerSetup};
pub use report::{Report, RunStatus};
pub use workload::{Sizes, Workload, WORKLOADS};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// One of the benchmark's own templates does not parse (a bug in this crate).
    #[error("object template starting {first_line:?}: {message}")]
    Template { first_line: String, message: String },
    /// The default scheduler configuration or its profile was refused.
    #[error("scheduler configuration: {0}")]
    Config(#[from] scheduler::config::ConfigError),
    /// A user's scheduler configuration cannot run the workloads.
    #[error("{0}")]
    Setup(String),
    /// The async runtime for binding tasks could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A thread (scheduling loop, pod creation, churn) could not start.
    #[error("starting a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// `--mode http`: the local API server or the scheduler on it could not start.
    #[error("{0}")]
    Http(String),
    /// `--scheduler-command`: the scheduler process could not start, did not become ready,
    /// or exited during the run.
    #[error("{0}")]
    External(String),
}

/// The stage a run is in, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Nodes,
    InitPods,
    MeasuredPods,
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Nodes => "creating nodes",
            Phase::InitPods => "initial pods bound",
            Phase::MeasuredPods => "measured pods bound",
            Phase::Done => "done",
        }
    }
}

/// Where a run is: `done` of `total` in `phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub workload: &'static str,
    pub phase: Phase,
    pub done: usize,
    pub total: usize,
}

impl Progress {
    fn new(workload: &Workload, phase: Phase, done: usize, total: usize) -> Progress {
        Progress {
            workload: workload.name,
            phase,
            done,
            total,
        }
    }
}

pub mod peak_rss {
    //! The process's peak resident set size (Linux: `VmHWM` of /proc/self/status).

    /// Resets the peak to the current RSS, so that the next reading covers one workload
    /// (Linux ≥ 4.0; elsewhere the peak stays the process's).
    pub fn reset() {
        if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
            tracing::debug!(error = %e, "cannot reset the peak RSS");
        }
    }

    /// The peak RSS in MiB, one decimal; `None` where /proc is not available.
    pub fn read_mib() -> Option<f64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        parse_vm_hwm_mib(&status)
    }

    /// `VmHWM:   123456 kB` → MiB.
    pub fn parse_vm_hwm_mib(status: &str) -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: f64 = line
            .trim_start_matches("VmHWM:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some((kb / 1024.0 * 10.0).round() / 10.0)
    }
}
