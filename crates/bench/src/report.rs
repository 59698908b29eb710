//! What one run of a workload measured, and how it is printed: JSON for machines, a table
//! for people.

use serde::Serialize;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    /// Every measured pod was bound.
    Ok,
    /// The time budget ran out first; the numbers cover what was bound until then.
    TimedOut,
    /// Not run (see `reason`).
    Skipped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::TimedOut => "timed out",
            RunStatus::Skipped => "skipped",
        }
    }
}

/// Throughput samples (pods bound per second), summarised as upstream's
/// SchedulingThroughput: the average of the samples and nearest-rank percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    pub average: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Throughput {
    /// `None` without samples.
    pub fn from_samples(samples: &[f64]) -> Option<Throughput> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let average = sorted.iter().sum::<f64>() / sorted.len() as f64;
        Some(Throughput {
            average: round(average, 1),
            p50: round(percentile(&sorted, 50), 1),
            p90: round(percentile(&sorted, 90), 1),
            p99: round(percentile(&sorted, 99), 1),
        })
    }
}

/// Scheduling-attempt latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Latency {
    /// From durations in microseconds; `None` when there are none.
    pub fn from_micros(durations: &[u64]) -> Option<Latency> {
        let mut sorted: Vec<f64> = durations.iter().map(|&us| us as f64 / 1000.0).collect();
        sorted.sort_by(f64::total_cmp);
        let max = *sorted.last()?;
        Some(Latency {
            p50: round(percentile(&sorted, 50), 3),
            p90: round(percentile(&sorted, 90), 3),
            p99: round(percentile(&sorted, 99), 3),
            max: round(max, 3),
        })
    }
}

/// Nearest-rank percentile of sorted, non-empty values.
fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(0.0)
}

fn round(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

/// One workload's result, as the JSON report names its fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub workload: String,
    pub mode: &'static str,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub nodes: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
    /// Measured pods bound by the end of the run.
    pub scheduled_pods: usize,
    pub pods_per_second: Option<Throughput>,
    /// The per-second samples behind `podsPerSecond`.
    pub samples: Vec<f64>,
    pub attempt_latency_ms: Option<Latency>,
    /// The scheduler's peak RSS (`VmHWM`): of this process (API server and clients
    /// included) in-process and over HTTP; of the scheduler's process tree with
    /// `--scheduler-command`.
    #[serde(rename = "peakRssMiB")]
    pub peak_rss_mib: Option<f64>,
    /// CPU-seconds of the scheduler's process tree over the measured phase, with
    /// `--scheduler-command`; `None` when the scheduler shares this process.
    pub scheduler_cpu_seconds: Option<f64>,
    /// The command of an external scheduler, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_command: Option<String>,
    /// The scheduler's API client QPS limit ([`crate::http::ClientLimits::describe`]): `n/a`
    /// in-process, where there is no client.
    pub client_qps: String,
    /// From the first measured pod created to the last bound (or the timeout).
    pub duration_seconds: f64,
    pub upstream_floor: Option<u32>,
}

impl Report {
    /// Our average over upstream's floor.
    pub fn ratio(&self) -> Option<f64> {
        let avg = self.pods_per_second?.average;
        let floor = self.upstream_floor.filter(|&f| f > 0)?;
        Some(round(avg / f64::from(floor), 1))
    }
}

/// One JSON object per report, or an array of them when `array`.
pub fn to_json(reports: &[Report], array: bool) -> String {
    let text = match (array, reports) {
        (false, [one]) => serde_json::to_string_pretty(one),
        _ => serde_json::to_string_pretty(reports),
    };
    // Serialising plain structs of numbers and strings cannot fail.
    text.unwrap_or_default()
}

/// A table for people: one row per workload and mode, so that runs of two schedulers
/// (`--compare`) sit one under the other.
pub fn to_table(reports: &[Report]) -> String {
    let header = [
        "WORKLOAD",
        "MODE",
        "NODES",
        "INIT",
        "MEASURED",
        "PODS/S AVG",
        "P50",
        "P90",
        "P99",
        "ATTEMPT P50/P99 MS",
        "PEAK RSS MIB",
        "SCHED CPU S",
        "FLOOR",
        "RATIO",
        "STATUS",
    ];
    let dash = || "-".to_string();
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in reports {
        let t = r.pods_per_second;
        let num =
            |f: fn(&Throughput) -> f64| t.as_ref().map_or_else(dash, |t| format!("{:.0}", f(t)));
        let status = match &r.reason {
            Some(reason) => format!("{}: {reason}", r.status.as_str()),
            None => r.status.as_str().to_string(),
        };
        rows.push(vec![
            r.workload.clone(),
            r.mode.to_string(),
            r.nodes.to_string(),
            r.init_pods.to_string(),
            r.measured_pods.to_string(),
            num(|t| t.average),
            num(|t| t.p50),
            num(|t| t.p90),
            num(|t| t.p99),
            r.attempt_latency_ms
                .map_or_else(dash, |l| format!("{:.3}/{:.3}", l.p50, l.p99)),
            r.peak_rss_mib.map_or_else(dash, |m| format!("{m:.0}")),
            r.scheduler_cpu_seconds
                .map_or_else(dash, |s| format!("{s:.1}")),
            r.upstream_floor.map_or_else(dash, |f| f.to_string()),
            r.ratio().map_or_else(dash, |x| format!("{x:.1}x")),
            status,
        ]);
    }
    let columns = header.len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c == columns - 1 {
                    cell.clone()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
