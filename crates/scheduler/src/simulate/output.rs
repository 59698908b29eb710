//! Rendering a simulation [`Report`]: JSON for machines (keys in decision order) and a table
//! for people.

use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeMap, Serializer};

use framework::{Code, Status};

use plugins::dynamicresources::explain::DeviceReason;

use super::{DeviceDecision, PodReport, PodResult, Report, VolumeDecision};
use crate::schedule_one::{ExtenderFilterVerdict, ExtenderScores};

/// A map serialized in the order of its entries.
struct Ordered<K, V>(Vec<(K, V)>);

impl<K, V> Ordered<K, V> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(serde::Serialize)]
struct VictimJson<'a> {
    namespace: &'a str,
    name: &'a str,
}

impl<K: Serialize, V: Serialize> Serialize for Ordered<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(serde::Serialize)]
struct StatusJson {
    code: &'static str,
    reasons: Vec<String>,
}

impl From<&Status> for StatusJson {
    fn from(s: &Status) -> Self {
        StatusJson {
            code: s.code().as_str(),
            reasons: s.reasons().iter().map(|r| r.to_string()).collect(),
        }
    }
}

#[derive(serde::Serialize)]
struct CodeJson {
    code: &'static str,
}

/// One extender's prioritize: its weight, and per node its score and what it added to the
/// node's total; or the error that left its scores out.
#[derive(serde::Serialize)]
struct ExtenderScoreJson<'a> {
    weight: i64,
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    scores: Ordered<&'a str, ExtenderNodeScoreJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct ExtenderNodeScoreJson {
    score: i64,
    added: i64,
}

impl<'a> From<&'a ExtenderScores> for ExtenderScoreJson<'a> {
    fn from(e: &'a ExtenderScores) -> Self {
        let (scores, error) = match &e.result {
            Ok(scores) => (
                scores
                    .iter()
                    .map(|s| {
                        let json = ExtenderNodeScoreJson {
                            score: s.score,
                            added: s.added,
                        };
                        (s.node.as_str(), json)
                    })
                    .collect(),
                None,
            ),
            Err(message) => (Vec::new(), Some(message.as_str())),
        };
        ExtenderScoreJson {
            weight: e.weight,
            scores: Ordered(scores),
            error,
        }
    }
}

/// One claim's decision: bound to `volume`, or provisioned on `provisionOn`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct VolumeJson<'a> {
    claim: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    volume: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provision_on: Option<&'a str>,
}

impl<'a> From<&'a VolumeDecision> for VolumeJson<'a> {
    fn from(d: &'a VolumeDecision) -> Self {
        match d {
            VolumeDecision::Bind { claim, volume } => VolumeJson {
                claim,
                volume: Some(volume),
                provision_on: None,
            },
            VolumeDecision::Provision { claim, node } => VolumeJson {
                claim,
                volume: None,
                provision_on: Some(node),
            },
        }
    }
}

/// Why one claim cannot be had on a node.
#[derive(serde::Serialize)]
struct ClaimReasonJson<'a> {
    claim: &'a str,
    reason: &'a str,
}

/// One device allocated to a request of a claim.
#[derive(serde::Serialize)]
struct DeviceJson<'a> {
    claim: &'a str,
    request: &'a str,
    driver: &'a str,
    pool: &'a str,
    device: &'a str,
}

/// Why the pod's claims cannot be allocated on a node: about one claim, or (no `claim`)
/// about all of them.
#[derive(serde::Serialize)]
struct DeviceReasonJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    claim: Option<&'a str>,
    reason: &'a str,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PodJson<'a> {
    namespace: &'a str,
    name: &'a str,
    scheduler_name: &'a str,
    node: Option<&'a str>,
    result: &'static str,
    message: Option<&'a str>,
    /// The extender that bound the pod, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    bound_by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nominated_node: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    victims: Vec<VictimJson<'a>>,
    /// What VolumeBinding decided for the pod's unbound claims on its node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volumes: Vec<VolumeJson<'a>>,
    /// The devices DynamicResources allocated to the pod's claims on its node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    devices: Vec<DeviceJson<'a>>,
    pre_filter: Ordered<&'static str, StatusJson>,
    /// Per node, each Filter plugin's verdict and then each extender's (by `urlPrefix`).
    filter: Ordered<&'a str, Ordered<&'a str, StatusJson>>,
    /// Per node VolumeBinding or VolumeZone rejected, each claim that cannot be had there
    /// and why.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    volume_reasons: Ordered<&'a str, Vec<ClaimReasonJson<'a>>>,
    /// Per node DynamicResources rejected, why the pod's claims cannot be allocated there.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    device_reasons: Ordered<&'a str, Vec<DeviceReasonJson<'a>>>,
    /// Per node, why preemption did or did not help.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    preemption: Ordered<&'a str, StatusJson>,
    pre_score: Ordered<&'static str, CodeJson>,
    score: Ordered<&'a str, Ordered<&'static str, i64>>,
    /// Per prioritizing extender (by `urlPrefix`), what it added to the scores.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    extender_score: Ordered<&'a str, ExtenderScoreJson<'a>>,
    final_score: Ordered<&'a str, i64>,
}

impl<'a> From<&'a PodReport> for PodJson<'a> {
    fn from(p: &'a PodReport) -> Self {
        let mut j = PodJson {
            namespace: &p.namespace,
            name: &p.name,
            scheduler_name: &p.scheduler_name,
            node: p.node.as_deref(),
            result: p.result.as_str(),
            message: p.message.as_deref(),
            bound_by: p.bound_by.as_deref(),
            nominated_node: p.nominated_node.as_deref(),
            victims: p
                .victims
                .iter()
                .map(|(namespace, name)| VictimJson { namespace, name })
                .collect(),
            volumes: p.volumes.iter().map(VolumeJson::from).collect(),
            devices: p
                .devices
                .iter()
                .map(|d| DeviceJson {
                    claim: &d.claim,
                    request: &d.request,
                    driver: &d.driver,
                    pool: &d.pool,
                    device: &d.device,
                })
                .collect(),
            pre_filter: Ordered(Vec::new()),
            filter: Ordered(Vec::new()),
            volume_reasons: Ordered(
                p.volume_reasons
                    .iter()
                    .map(|(node, reasons)| {
                        let list = reasons
                            .iter()
                            .map(|r| ClaimReasonJson {
                                claim: &r.claim,
                                reason: &r.reason,
                            })
                            .collect();
                        (node.as_str(), list)
                    })
                    .collect(),
            ),
            device_reasons: Ordered(
                p.device_reasons
                    .iter()
                    .map(|(node, reasons)| {
                        let list = reasons
                            .iter()
                            .map(|r| DeviceReasonJson {
                                claim: r.claim.as_deref(),
                                reason: &r.reason,
                            })
                            .collect();
                        (node.as_str(), list)
                    })
                    .collect(),
            ),
            preemption: Ordered(
                p.preemption
                    .iter()
                    .map(|(n, s)| (n.as_str(), s.into()))
                    .collect(),
            ),
            pre_score: Ordered(Vec::new()),
            score: Ordered(Vec::new()),
            extender_score: Ordered(Vec::new()),
            final_score: Ordered(Vec::new()),
        };
        let Some(e) = &p.explanation else { return j };
        j.pre_filter = Ordered(e.pre_filter.iter().map(|(n, s)| (*n, s.into())).collect());
        j.filter = filter_json(&e.filter, &e.extender_filter);
        j.pre_score = Ordered(
            e.pre_score
                .iter()
                .map(|(n, s)| {
                    (
                        *n,
                        CodeJson {
                            code: s.code().as_str(),
                        },
                    )
                })
                .collect(),
        );
        if let Some(scores) = &e.scores {
            j.score = Ordered(
                e.scored_nodes
                    .iter()
                    .enumerate()
                    .map(|(i, node)| {
                        (
                            node.as_str(),
                            Ordered(
                                scores
                                    .plugins
                                    .iter()
                                    .copied()
                                    .zip(scores.node(i).iter().copied())
                                    .collect(),
                            ),
                        )
                    })
                    .collect(),
            );
        }
        j.extender_score = Ordered(
            e.extender_scores
                .iter()
                .map(|x| (x.extender.as_str(), x.into()))
                .collect(),
        );
        j.final_score = Ordered(
            e.scored_nodes
                .iter()
                .map(String::as_str)
                .zip(e.totals.iter().copied())
                .collect(),
        );
        j
    }
}

/// The plugins' verdicts per node, each node's extender verdicts after them. A node only
/// extenders judged (a profile without Filter plugins) comes after the others.
fn filter_json<'a>(
    plugins: &'a [(String, Vec<crate::runtime::PluginStatus>)],
    extenders: &'a [ExtenderFilterVerdict],
) -> Ordered<&'a str, Ordered<&'a str, StatusJson>> {
    let mut nodes: Vec<(&str, Ordered<&str, StatusJson>)> = plugins
        .iter()
        .map(|(node, list)| {
            (
                node.as_str(),
                Ordered(list.iter().map(|(n, s)| (*n, s.into())).collect()),
            )
        })
        .collect();
    for v in extenders {
        for (node, status) in &v.nodes {
            let entry = (v.extender.as_str(), status.into());
            match nodes.iter_mut().find(|(n, _)| *n == node.as_str()) {
                Some((_, list)) => list.0.push(entry),
                None => nodes.push((node.as_str(), Ordered(vec![entry]))),
            }
        }
    }
    Ordered(nodes)
}

#[derive(serde::Serialize)]
struct ReportJson<'a> {
    pods: Vec<PodJson<'a>>,
}

/// The report as one pretty-printed JSON document.
pub fn to_json(report: &Report) -> String {
    let doc = ReportJson {
        pods: report.pods.iter().map(PodJson::from).collect(),
    };
    // Serializing plain strings and integers cannot fail.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// One pod's report as compact JSON: the shape of each entry of [`to_json`]'s `pods`.
pub fn pod_to_json(pod: &PodReport) -> String {
    // Serializing plain strings and integers cannot fail.
    serde_json::to_string(&PodJson::from(pod)).unwrap_or_default()
}

/// The report as a table: one line per pod, then the reasons of each unschedulable pod
/// (with, under each node a volume plugin or DynamicResources rejected, why each claim
/// cannot be had there).
pub fn to_table(report: &Report) -> String {
    let rows: Vec<[String; 4]> = report
        .pods
        .iter()
        .map(|p| {
            [
                format!("{}/{}", p.namespace, p.name),
                p.node.clone().unwrap_or_else(|| "pending".to_string()),
                p.result.as_str().to_string(),
                short_reason(p),
            ]
        })
        .collect();
    let header = [
        "POD".to_string(),
        "NODE".to_string(),
        "RESULT".to_string(),
        "REASON".to_string(),
    ];
    let mut widths = [0usize; 3];
    for r in std::iter::once(&header).chain(rows.iter()) {
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&header).chain(rows.iter()) {
        let line = format!(
            "{:w0$}   {:w1$}   {:w2$}   {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for p in report
        .pods
        .iter()
        .filter(|p| p.result == PodResult::Unschedulable)
    {
        let _ = writeln!(
            out,
            "\n{}/{}: {}",
            p.namespace,
            p.name,
            p.message.as_deref().unwrap_or("")
        );
        for (reason, count) in &p.reason_counts {
            let _ = writeln!(out, "  {count:>5}  {reason}");
        }
        for (node, reasons) in &p.volume_reasons {
            let _ = writeln!(out, "  node {node}:");
            for r in reasons {
                let _ = writeln!(out, "    claim {}: {}", r.claim, r.reason);
            }
        }
        for (node, reasons) in &p.device_reasons {
            let _ = writeln!(out, "  node {node}:");
            for r in reasons {
                let _ = writeln!(out, "    {}", device_reason_line(r));
            }
        }
    }
    for p in &report.pods {
        write_extenders(&mut out, p);
    }
    out
}

/// The extenders' say on a pod, one block per extender: its filter verdict per node and
/// its prioritize scores (each `+` what it added to the node's total).
fn write_extenders(out: &mut String, p: &PodReport) {
    let Some(e) = &p.explanation else { return };
    let mut names: Vec<&str> = Vec::new();
    for n in e
        .extender_filter
        .iter()
        .map(|v| v.extender.as_str())
        .chain(e.extender_scores.iter().map(|s| s.extender.as_str()))
    {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for name in names {
        let _ = writeln!(out, "\n{}/{}: extender {name}", p.namespace, p.name);
        for v in e.extender_filter.iter().filter(|v| v.extender == name) {
            let _ = writeln!(out, "  filter      {}", filter_line(v));
        }
        for s in e.extender_scores.iter().filter(|s| s.extender == name) {
            let scores = match &s.result {
                Ok(scores) => scores
                    .iter()
                    .map(|n| format!("{} {} (+{})", n.node, n.score, n.added))
                    .collect::<Vec<_>>()
                    .join(", "),
                Err(message) => format!("error, scores left out: {message}"),
            };
            let _ = writeln!(out, "  prioritize  weight {}: {scores}", s.weight);
        }
    }
}

fn filter_line(v: &ExtenderFilterVerdict) -> String {
    // An error is the same on every node it was sent: say it once.
    if let Some((_, s)) = v.nodes.first() {
        let reason = s.reasons().join("; ");
        match s.code() {
            Code::Error => return format!("error: {reason}"),
            Code::Skip => return format!("ignorable, skipped: {reason}"),
            _ => {}
        }
    }
    v.nodes
        .iter()
        .map(|(node, s)| {
            let reason = s.reasons().join("; ");
            match s.code() {
                Code::Success => format!("{node} passed"),
                Code::UnschedulableAndUnresolvable => {
                    format!("{node} failed and unresolvable: {reason}")
                }
                _ if reason.is_empty() => format!("{node} left out"),
                _ => format!("{node} failed: {reason}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_reason(p: &PodReport) -> String {
    match p.result {
        PodResult::Scheduled if !p.victims.is_empty() => {
            let names: Vec<String> = p
                .victims
                .iter()
                .map(|(ns, n)| format!("{ns}/{n}"))
                .collect();
            format!("preempted {}", names.join(", "))
        }
        PodResult::Scheduled => {
            let mut parts: Vec<String> = p
                .volumes
                .iter()
                .map(|d| match d {
                    VolumeDecision::Bind { claim, volume } => {
                        format!("claim {claim} bound to {volume}")
                    }
                    VolumeDecision::Provision { claim, node } => {
                        format!("claim {claim} provisioned on {node}")
                    }
                })
                .collect();
            parts.extend(p.devices.iter().map(device_line));
            if let Some(ext) = &p.bound_by {
                parts.insert(0, format!("bound by extender {ext}"));
            }
            parts.join("; ")
        }
        PodResult::Unschedulable => match p.reason_counts.first() {
            // The most frequent reason first: the rest are listed below the table.
            Some(_) => {
                let mut counts = p.reason_counts.clone();
                counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let (r, n) = &counts[0];
                let more = counts.len() - 1;
                if more > 0 {
                    format!("{n} {r} (+{more} more)")
                } else {
                    format!("{n} {r}")
                }
            }
            None => p.message.clone().unwrap_or_default(),
        },
        _ => p.message.clone().unwrap_or_default(),
    }
}

/// A device a scheduled pod's claim was allocated, for the table's reason column.
fn device_line(d: &DeviceDecision) -> String {
    format!(
        "claim {} request {}: device {}/{}/{}",
        d.claim, d.request, d.driver, d.pool, d.device
    )
}

/// One reason the pod's claims cannot be allocated on a node, for the table.
fn device_reason_line(r: &DeviceReason) -> String {
    match &r.claim {
        Some(claim) => format!("claim {claim}, {}", r.reason),
        None => r.reason.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_line_names_claim_request_and_device() {
        let d = DeviceDecision {
            claim: "default/gpu-a".to_string(),
            request: "gpu".to_string(),
            driver: "gpu.example.com".to_string(),
            pool: "a1".to_string(),
            device: "gpu-0".to_string(),
        };
        assert_eq!(
            device_line(&d),
            "claim default/gpu-a request gpu: device gpu.example.com/a1/gpu-0"
        );
    }

    #[test]
    fn device_reason_line_prefixes_the_claim_when_there_is_one() {
        let cases = [
            (
                "about one claim",
                DeviceReason {
                    claim: Some("default/gpu-b".to_string()),
                    reason: "request gpu: wants 1 device, 0 usable".to_string(),
                },
                "claim default/gpu-b, request gpu: wants 1 device, 0 usable",
            ),
            (
                "about all claims",
                DeviceReason {
                    claim: None,
                    reason: "resource pools being updated: gpu.example.com/a1".to_string(),
                },
                "resource pools being updated: gpu.example.com/a1",
            ),
        ];
        for (name, reason, want) in cases {
            assert_eq!(device_reason_line(&reason), want, "{name}");
        }
    }
}
