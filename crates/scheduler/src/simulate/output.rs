//! Rendering a simulation [`Report`]: JSON for machines (keys in decision order) and a table
//! for people.

use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeMap, Serializer};

use framework::Status;

use super::{PodReport, PodResult, Report};

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

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PodJson<'a> {
    namespace: &'a str,
    name: &'a str,
    scheduler_name: &'a str,
    node: Option<&'a str>,
    result: &'static str,
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nominated_node: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    victims: Vec<VictimJson<'a>>,
    pre_filter: Ordered<&'static str, StatusJson>,
    filter: Ordered<&'a str, Ordered<&'static str, StatusJson>>,
    /// Per node, why preemption did or did not help.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    preemption: Ordered<&'a str, StatusJson>,
    pre_score: Ordered<&'static str, CodeJson>,
    score: Ordered<&'a str, Ordered<&'static str, i64>>,
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
            nominated_node: p.nominated_node.as_deref(),
            victims: p
                .victims
                .iter()
                .map(|(namespace, name)| VictimJson { namespace, name })
                .collect(),
            pre_filter: Ordered(Vec::new()),
            filter: Ordered(Vec::new()),
            preemption: Ordered(
                p.preemption
                    .iter()
                    .map(|(n, s)| (n.as_str(), s.into()))
                    .collect(),
            ),
            pre_score: Ordered(Vec::new()),
            score: Ordered(Vec::new()),
            final_score: Ordered(Vec::new()),
        };
        let Some(e) = &p.explanation else { return j };
        j.pre_filter = Ordered(e.pre_filter.iter().map(|(n, s)| (*n, s.into())).collect());
        j.filter = Ordered(
            e.filter
                .iter()
                .map(|(node, list)| {
                    (
                        node.as_str(),
                        Ordered(list.iter().map(|(n, s)| (*n, s.into())).collect()),
                    )
                })
                .collect(),
        );
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
            j.final_score = Ordered(
                e.scored_nodes
                    .iter()
                    .map(String::as_str)
                    .zip(scores.totals.iter().copied())
                    .collect(),
            );
        }
        j
    }
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

/// The report as a table: one line per pod, then the reasons of each unschedulable pod.
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
    }
    out
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
        PodResult::Scheduled => String::new(),
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
