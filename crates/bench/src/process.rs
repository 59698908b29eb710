//! The external scheduler's process tree, read from /proc (Linux): which processes it is,
//! the CPU time they used, their peak RSS, and ending them.
//!
//! The command runs under `sh -c`, which may fork the scheduler rather than exec it, and a
//! scheduler may start helpers: everything is counted over the tree of descendants, found
//! by each process's parent in `/proc/PID/stat`. Elsewhere than Linux every reading is
//! `None` and only the direct child is killed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second of `utime`/`stime` in /proc: Linux's `USER_HZ`, fixed at 100 on
/// the architectures this runs on (it is part of the kernel's user-space ABI, whatever
/// the kernel's own tick rate).
const USER_HZ: f64 = 100.0;

/// How long a process tree is given to exit after SIGTERM before it is sent SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(10);

/// How long processes sent SIGKILL are waited for.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How often a stopping tree is checked.
const STOP_POLL: Duration = Duration::from_millis(20);

/// What `/proc/PID/stat` says of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    pub ppid: u32,
    /// utime + stime + cutime + cstime: the process's CPU time and that of its children
    /// it has waited for, in clock ticks.
    pub cpu_ticks: u64,
}

/// Parses one `/proc/PID/stat` line. The command name (field 2) is in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let (head, tail) = line.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the name: state, ppid, ... utime (14th field of the line), stime, cutime, cstime.
    let ppid = fields.get(1)?.parse().ok()?;
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let cpu_ticks = tick(11)? + tick(12)? + tick(13)? + tick(14)?;
    Some(Stat {
        pid,
        ppid,
        cpu_ticks,
    })
}

/// `root` and its descendants, among `all` (every process's stat), root first.
pub fn tree(root: u32, all: &[Stat]) -> Vec<Stat> {
    let mut out: Vec<Stat> = all.iter().filter(|s| s.pid == root).copied().collect();
    let mut i = 0;
    while let Some(parent) = out.get(i).map(|s| s.pid) {
        out.extend(all.iter().filter(|s| s.ppid == parent && s.pid != root));
        i += 1;
    }
    out
}

/// Every process's stat now (empty where /proc cannot be read).
fn all_stats() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        e.file_name().to_str()?.parse::<u32>().ok()?;
        let line = std::fs::read_to_string(e.path().join("stat")).ok()?;
        parse_stat(&line)
    })
    .collect()
}

/// The processes of `root`'s tree now.
pub fn tree_of(root: u32) -> Vec<Stat> {
    tree(root, &all_stats())
}

/// CPU-seconds used so far by `root`'s tree; `None` when `root` cannot be read.
pub fn cpu_seconds(root: u32) -> Option<f64> {
    let procs = tree_of(root);
    if procs.is_empty() {
        return None;
    }
    let ticks: u64 = procs.iter().map(|s| s.cpu_ticks).sum();
    Some(ticks as f64 / USER_HZ)
}

/// The peak RSS of `root`'s tree in MiB, one decimal: the sum of each process's `VmHWM`
/// (exact for one process; for several, an upper bound, as their peaks need not
/// coincide). `None` when `root` cannot be read.
pub fn peak_rss_mib(root: u32) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for s in tree_of(root) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", s.pid)) else {
            continue;
        };
        if let Some(mib) = crate::peak_rss::parse_vm_hwm_mib(&status) {
            total += mib;
            any = true;
        }
    }
    any.then(|| (total * 10.0).round() / 10.0)
}

/// Sends `signal` (a name `kill -s` takes) to `pids` through the shell's `kill`: the
/// command runs under `sh` already, and std sends no signal but SIGKILL to its own child.
fn signal(pids: &[u32], signal: &str) {
    if pids.is_empty() {
        return;
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg("kill -s \"$0\" \"$@\" 2>/dev/null")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = status {
        tracing::warn!(error = %e, ?pids, "cannot signal the scheduler's processes");
    }
}

/// Ends `child` and its descendants: SIGTERM to the whole tree, up to `grace` for it to
/// exit ([`TERM_GRACE`] at the end of a run), then SIGKILL to what is left. Reaps `child`.
pub fn stop_tree(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        // Its descendants, if any, were re-parented: they are no longer findable.
        return;
    }
    let pids: Vec<u32> = tree_of(child.id()).iter().map(|s| s.pid).collect();
    signal(&pids, "TERM");
    let deadline = Instant::now() + grace;
    loop {
        let child_done = matches!(child.try_wait(), Ok(Some(_)));
        let left = running(&pids);
        if child_done && left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!(pids = ?left, "the scheduler did not exit on SIGTERM; killing it");
            signal(&left, "KILL");
            let _ = child.kill();
            let _ = child.wait();
            // SIGKILL is delivered asynchronously: wait (bounded) until none runs.
            let killed_by = Instant::now() + KILL_WAIT;
            while !running(&left).is_empty() && Instant::now() < killed_by {
                std::thread::sleep(STOP_POLL);
            }
            return;
        }
        std::thread::sleep(STOP_POLL);
    }
}

/// Those of `pids` still running: a zombie has exited (only its parent's wait is missing).
pub fn running(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|l| {
                    l.rsplit_once(')')
                        .map(|(_, t)| !t.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        })
        .collect()
}
