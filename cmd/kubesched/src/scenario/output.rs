//! A scenario run as people read it (the description, each step with its outcome, each pod
//! with the scheduler's explanation) and as JSON.

use std::fmt::Write as _;

use super::steps::{StepOutcome, StepResult};

/// One scenario's run.
#[derive(Debug)]
pub struct ScenarioReport {
    pub file: String,
    pub name: String,
    pub description: String,
    pub steps: Vec<StepOutcome>,
    /// How the explanations were made ("as simulate explains them now").
    pub explained: &'static str,
    /// Each pod of the scenario's namespace at its end: namespace, name, explanation.
    pub pods: Vec<(String, String, Option<serde_json::Value>)>,
}

impl ScenarioReport {
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.result == StepResult::Passed)
    }

    /// The failed step, as the error names it: `step 3 (expect "placed")`.
    pub fn failure(&self) -> Option<String> {
        let s = self.steps.iter().find(|s| s.result == StepResult::Failed)?;
        Some(format!(
            "scenario {}: {}: {}",
            self.name,
            step_label(s),
            s.detail
        ))
    }
}

fn step_label(s: &StepOutcome) -> String {
    match &s.name {
        Some(n) => format!("step {} ({} {n:?})", s.index, s.kind),
        None => format!("step {} ({})", s.index, s.kind),
    }
}

/// The reports as text.
pub fn to_text(reports: &[ScenarioReport]) -> String {
    let mut out = String::new();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "=== {} ({})", r.name, r.file);
        for line in r.description.lines() {
            let _ = writeln!(out, "  {line}");
        }
        out.push('\n');
        for s in &r.steps {
            let _ = writeln!(
                out,
                "{} {}{}",
                step_label(s),
                s.result.as_str(),
                if s.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.detail)
                }
            );
        }
        if !r.pods.is_empty() {
            let _ = writeln!(out, "\npods, {}:", r.explained);
            for (ns, name, e) in &r.pods {
                explain_text(&mut out, ns, name, e.as_ref());
            }
        }
        let _ = writeln!(out, "\n{}", if r.passed() { "PASSED" } else { "FAILED" });
    }
    out
}

fn str_at<'a>(v: &'a serde_json::Value, p: &str) -> &'a str {
    v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default()
}

/// One pod's explanation: its result, why each rejected node was rejected, and the scores.
fn explain_text(out: &mut String, ns: &str, name: &str, e: Option<&serde_json::Value>) {
    let Some(e) = e else {
        let _ = writeln!(out, "  {ns}/{name}: no explanation");
        return;
    };
    let result = str_at(e, "/result");
    let node = str_at(e, "/node");
    let message = str_at(e, "/message");
    let mut head = format!("  {ns}/{name}: {result}");
    if !node.is_empty() {
        let _ = write!(head, " on {node}");
    }
    if !message.is_empty() {
        let _ = write!(head, ": {message}");
    }
    let _ = writeln!(out, "{head}");
    if let Some(filter) = e.get("filter").and_then(|f| f.as_object()) {
        for (n, plugins) in filter {
            let rejected: Vec<String> = plugins
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, s)| !matches!(str_at(s, "/code"), "Success" | "Skip"))
                .map(|(p, s)| {
                    let reasons: Vec<&str> = s
                        .get("reasons")
                        .and_then(|r| r.as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.as_str())
                        .collect();
                    format!("{p}: {}", reasons.join(", "))
                })
                .collect();
            if !rejected.is_empty() {
                let _ = writeln!(out, "    {n} filtered out: {}", rejected.join("; "));
            }
        }
    }
    if let Some(scores) = e.get("finalScore").and_then(|f| f.as_object()) {
        if scores.len() > 1 {
            let all: Vec<String> = scores.iter().map(|(n, s)| format!("{n} {s}")).collect();
            let _ = writeln!(out, "    final scores: {}", all.join(", "));
        }
    }
    if let Some(plugins) = e
        .pointer(&format!("/score/{node}"))
        .and_then(|s| s.as_object())
    {
        if !node.is_empty() && !plugins.is_empty() {
            let all: Vec<String> = plugins.iter().map(|(p, s)| format!("{p} {s}")).collect();
            let _ = writeln!(out, "    scores on {node}: {}", all.join(", "));
        }
    }
    if let Some(victims) = e.get("victims").and_then(|v| v.as_array()) {
        let names: Vec<String> = victims
            .iter()
            .map(|v| format!("{}/{}", str_at(v, "/namespace"), str_at(v, "/name")))
            .collect();
        if !names.is_empty() {
            let _ = writeln!(out, "    preempts: {}", names.join(", "));
        }
    }
}

#[derive(serde::Serialize)]
struct ReportJson<'a> {
    scenarios: Vec<ScenarioJson<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ScenarioJson<'a> {
    name: &'a str,
    file: &'a str,
    description: &'a str,
    result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    steps: Vec<StepJson<'a>>,
    /// How the explanations were made.
    explained: &'static str,
    pods: Vec<PodJson<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StepJson<'a> {
    step: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'static str,
    result: &'static str,
    detail: &'a str,
}

#[derive(serde::Serialize)]
struct PodJson<'a> {
    namespace: &'a str,
    name: &'a str,
    explanation: Option<&'a serde_json::Value>,
}

/// The reports as one pretty-printed JSON document.
pub fn to_json(reports: &[ScenarioReport]) -> String {
    let doc = ReportJson {
        scenarios: reports
            .iter()
            .map(|r| ScenarioJson {
                name: &r.name,
                file: &r.file,
                description: &r.description,
                result: if r.passed() { "passed" } else { "failed" },
                failure: r.failure(),
                steps: r
                    .steps
                    .iter()
                    .map(|s| StepJson {
                        step: s.index,
                        name: s.name.as_deref(),
                        kind: s.kind,
                        result: s.result.as_str(),
                        detail: &s.detail,
                    })
                    .collect(),
                explained: r.explained,
                pods: r
                    .pods
                    .iter()
                    .map(|(ns, name, e)| PodJson {
                        namespace: ns,
                        name,
                        explanation: e.as_ref(),
                    })
                    .collect(),
            })
            .collect(),
    };
    // Strings, numbers and JSON values only: serializing cannot fail.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(
        steps: Vec<(StepResult, &str)>,
        pods: Vec<(&str, Option<serde_json::Value>)>,
    ) -> ScenarioReport {
        ScenarioReport {
            file: "s.yaml".into(),
            name: "s".into(),
            description: "Two lines\nof lesson.".into(),
            steps: steps
                .into_iter()
                .enumerate()
                .map(|(i, (result, detail))| StepOutcome {
                    index: i + 1,
                    name: (i == 0).then(|| "first".to_string()),
                    kind: "wait",
                    result,
                    detail: detail.into(),
                })
                .collect(),
            explained: "as simulate explains them now",
            pods: pods
                .into_iter()
                .map(|(n, e)| ("default".to_string(), n.to_string(), e))
                .collect(),
        }
    }

    #[test]
    fn text_gives_each_step_and_why_nodes_were_filtered_out_scored_and_preempted() {
        let preemptor = json!({
            "node": "b", "result": "Scheduled", "message": null,
            "filter": {
                "a": {"NodeUnschedulable": {"code": "UnschedulableAndUnresolvable", "reasons": ["node(s) were unschedulable"]}},
                "b": {"NodeUnschedulable": {"code": "Success", "reasons": []}},
            },
            "score": {"b": {"NodeResourcesFit": 50, "TaintToleration": 100}},
            "finalScore": {"b": 150, "c": 90},
            "victims": [{"namespace": "default", "name": "low"}],
        });
        let r = report(
            vec![
                (StepResult::Passed, "pod p is bound to b"),
                (
                    StepResult::Failed,
                    "expected pod q bound; pod q does not exist",
                ),
                (StepResult::Skipped, ""),
            ],
            vec![("p", Some(preemptor)), ("q", None)],
        );
        let want = "\
=== s (s.yaml)
  Two lines
  of lesson.

step 1 (wait \"first\") passed: pod p is bound to b
step 2 (wait) failed: expected pod q bound; pod q does not exist
step 3 (wait) skipped

pods, as simulate explains them now:
  default/p: Scheduled on b
    a filtered out: NodeUnschedulable: node(s) were unschedulable
    final scores: b 150, c 90
    scores on b: NodeResourcesFit 50, TaintToleration 100
    preempts: default/low
  default/q: no explanation

FAILED
";
        assert_eq!(
            (to_text(std::slice::from_ref(&r)), r.failure()),
            (
                want.to_string(),
                Some(
                    "scenario s: step 2 (wait): expected pod q bound; pod q does not exist"
                        .to_string()
                )
            )
        );
    }
}
