//! A randomized end-to-end test of `kubesched up`: a seeded generator makes a cluster (nodes
//! in zones, tiers, taints, small pod limits) and a workload created in batches (requests,
//! required node affinity, tolerations, DoNotSchedule zone spread, priorities that preempt,
//! pods that fit nowhere); a raw HTTP watch records every version of every pod; once the
//! scheduler has settled, the recorded history and the final state are checked against the
//! invariants a scheduler keeps:
//!
//! - a pod's `spec.nodeName` never changes once set (no pod is bound twice);
//! - at every resourceVersion, no node holds more cpu, memory or pods than it allocates
//!   (pods being deleted still occupy their node);
//! - every placement satisfies the pod's required node affinity and tolerates every
//!   NoSchedule and NoExecute taint of its node;
//! - the zone skew of each DoNotSchedule spread group stays within its maxSkew;
//! - pods of the highest priority are never preempted;
//! - every deleted pod (a preemption victim) was marked `DisruptionTarget` before it went and
//!   was preempted by one preemptor only;
//! - every bound pod has its Scheduled event naming its node;
//! - every pod left without a node has `PodScheduled=False` (reason Unschedulable) and a
//!   FailedScheduling event.
//!
//! Every violation is reported, with the seed. `KUBESCHED_E2E_SEED=<n>` replays a seed (the
//! workload, not the timing); without it, each run draws a new one and prints it.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{get, kubectl_ok, parse_metrics, up, Scratch};

/// The environment variable that replays a seed.
const SEED_ENV: &str = "KUBESCHED_E2E_SEED";
/// How long nothing may change (no pod or event written, nothing queued to schedule) before
/// the scheduler counts as settled: longer than the queue's 1 s initial backoff.
const QUIET: Duration = Duration::from_secs(3);
/// The bound on waiting to settle after the last batch.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// The bound on waiting for one batch to leave the active queue before the next is created.
const BATCH_LIMIT: Duration = Duration::from_secs(20);

const ZONE: &str = "topology.kubernetes.io/zone";
const TIERS: [&str; 3] = ["gold", "silver", "bronze"];
/// The taint some nodes carry, and that some pods tolerate.
const TAINT_KEY: &str = "dedicated";
const TAINT_VALUE: &str = "infra";
/// Priority classes: (name, value, preemptionPolicy Never). Only spread pods get the highest,
/// so no pod of a spread group is ever a victim and the final skew is exactly what the
/// scheduler placed.
const CLASSES: [(&str, i32, bool); 5] = [
    ("e2e-low", 10, false),
    ("e2e-mid", 100, false),
    ("e2e-high", 1000, false),
    ("e2e-high-never", 1000, true),
    ("e2e-top", 100_000, false),
];
const TOP: &str = "e2e-top";

/// splitmix64: small, seedable, good enough to draw a workload.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let i = self.next() % items.len() as u64;
        &items[i as usize]
    }
}

fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{SEED_ENV}={s:?} is not a u64: {e}")),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let mut r = Rng(now.as_nanos() as u64 ^ u64::from(std::process::id()));
            r.next()
        }
    }
}

/// The generated cluster and workload, as YAML documents: the first batch holds the
/// priority classes and nodes, each later one pods.
fn generate(rng: &mut Rng) -> Vec<Vec<String>> {
    let mut setup: Vec<String> = CLASSES
        .iter()
        .map(|(name, value, never)| {
            let policy = if *never {
                "preemptionPolicy: Never\n"
            } else {
                ""
            };
            format!(
                "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\n{policy}"
            )
        })
        .collect();
    let zones = ["zone-a", "zone-b", "zone-c"];
    let zones = &zones[..rng.range(2, 3) as usize];
    let nodes = rng.range(8, 20);
    for i in 0..nodes {
        // Round-robin so that every zone has a node.
        let zone = zones[(i % zones.len() as u64) as usize];
        let tier = rng.pick(&TIERS);
        let taints = match rng.range(0, 7) {
            0 | 1 => format!("  taints:\n  - {{key: {TAINT_KEY}, value: {TAINT_VALUE}, effect: NoSchedule}}\n"),
            2 => format!("  taints:\n  - {{key: {TAINT_KEY}, value: {TAINT_VALUE}, effect: PreferNoSchedule}}\n"),
            _ => String::new(),
        };
        let spec = if taints.is_empty() {
            String::new()
        } else {
            format!("spec:\n{taints}")
        };
        let cpu = rng.range(4, 12) * 500;
        let memory = rng.range(4, 16) * 512;
        let pods = rng.range(5, 10);
        let resources = format!("{{cpu: {cpu}m, memory: {memory}Mi, pods: \"{pods}\"}}");
        setup.push(format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n-{i:02}\n  labels:\n    kubernetes.io/hostname: n-{i:02}\n    {ZONE}: {zone}\n    tier: {tier}\n{spec}status:\n  capacity: {resources}\n  allocatable: {resources}\n"
        ));
    }

    // A spread group is one app label with one constraint and one node affinity, so that
    // its pods are all placed under the same rule.
    let groups: Vec<Option<&str>> = (0..rng.range(2, 3))
        .map(|_| rng.chance(40).then(|| *rng.pick(&TIERS)))
        .collect();
    let total = rng.range(150, 300);
    let batches = 5;
    let mut out = vec![setup];
    for b in 0..batches {
        let mut docs = Vec::new();
        for i in 0..total / batches {
            docs.push(pod(rng, b, i, &groups));
        }
        out.push(docs);
    }
    out
}

/// One pod of batch `b`: later batches carry higher priorities, so they preempt.
fn pod(rng: &mut Rng, b: u64, i: u64, groups: &[Option<&str>]) -> String {
    let name = format!("p{b}-{i:03}");
    let mut labels = String::new();
    let mut spec = String::new();
    let mut affinity: Option<String> = None;
    let (mut cpu, memory) = (rng.range(2, 24) * 50, rng.range(1, 24) * 64);
    let class = if rng.chance(15) {
        let g = rng.range(0, groups.len() as u64 - 1) as usize;
        labels = format!("  labels:\n    app: spread-{g}\n");
        spec.push_str(&format!(
            "  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: {ZONE}\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector:\n      matchLabels: {{app: spread-{g}}}\n"
        ));
        affinity = groups[g].map(|t| format!("{{key: tier, operator: In, values: [{t}]}}"));
        TOP
    } else {
        match rng.range(0, 9) {
            0 => {
                let t = rng.pick(&TIERS);
                affinity = Some(format!("{{key: tier, operator: In, values: [{t}]}}"));
            }
            1 => {
                let t = rng.pick(&TIERS);
                affinity = Some(format!("{{key: tier, operator: NotIn, values: [{t}]}}"));
            }
            2 => {
                let (a, c) = (rng.pick(&TIERS), rng.pick(&TIERS));
                affinity = Some(format!("{{key: tier, operator: In, values: [{a}, {c}]}}"));
            }
            3 | 4 => {
                let t = if rng.chance(50) {
                    format!("{{key: {TAINT_KEY}, operator: Exists}}")
                } else {
                    format!("{{key: {TAINT_KEY}, operator: Equal, value: {TAINT_VALUE}, effect: NoSchedule}}")
                };
                spec.push_str(&format!("  tolerations:\n  - {t}\n"));
            }
            // Fits nowhere: more cpu than any node has, or a tier no node has.
            5 if rng.chance(30) => cpu = 64_000,
            6 if rng.chance(30) => {
                affinity = Some("{key: tier, operator: In, values: [platinum]}".to_string());
            }
            _ => {}
        }
        let weights: [u64; 4] = match b {
            0 | 1 => [70, 25, 5, 0],
            2 => [30, 40, 25, 5],
            _ => [10, 30, 50, 10],
        };
        let roll = rng.range(0, 99);
        let mut acc = 0;
        let mut class = CLASSES[0].0;
        for (w, c) in weights.iter().zip(CLASSES.iter()) {
            acc += w;
            if roll < acc {
                class = c.0;
                break;
            }
        }
        class
    };
    if let Some(expr) = affinity {
        spec.push_str(&format!(
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {expr}\n"
        ));
    }
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n{labels}spec:\n  priorityClassName: {class}\n{spec}  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests: {{cpu: {cpu}m, memory: {memory}Mi}}\n"
    )
}

/// What a raw HTTP watch has recorded so far.
#[derive(Default)]
struct Recorded {
    /// (type, object) of every line, in the order the server sent them.
    events: Vec<(String, Value)>,
    /// When the last line arrived.
    last: Option<Instant>,
    /// Why the watch stopped or restarted, when it did.
    breaks: Vec<String>,
    /// The response headers were read: the server watches from here on.
    established: bool,
}

/// Watches `path` (e.g. `/api/v1/pods`) on `addr` in a thread over plain HTTP/1.1 with
/// chunked framing; when the server ends the stream it watches again from the last
/// resourceVersion seen, so the record is the server's whole history from the start.
fn watch(addr: &str, path: &str) -> Arc<Mutex<Recorded>> {
    let rec = Arc::new(Mutex::new(Recorded::default()));
    let (addr, target, out) = (addr.to_string(), path.to_string(), Arc::clone(&rec));
    std::thread::spawn(move || {
        let mut from = String::new();
        // Bounded: a server that keeps ending the stream is reported, not chased forever.
        for _ in 0..20 {
            let query = if from.is_empty() {
                "watch=true".to_string()
            } else {
                format!("watch=true&resourceVersion={from}")
            };
            let why = match watch_once(&addr, &format!("{target}?{query}"), &out, &mut from) {
                Ok(()) => "the server ended the stream".to_string(),
                Err(e) => e,
            };
            let mut r = out.lock().unwrap_or_else(|e| e.into_inner());
            r.breaks
                .push(format!("{target} after resourceVersion {from:?}: {why}"));
            if why.starts_with("connect") {
                // The server is gone: the test has ended.
                return;
            }
        }
    });
    let start = Instant::now();
    while !rec.lock().unwrap_or_else(|e| e.into_inner()).established {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the watch of {path} did not start within 10s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    rec
}

/// One watch request, recorded line by line into `out`; `from` follows the last
/// resourceVersion seen.
fn watch_once(
    addr: &str,
    target: &str,
    out: &Mutex<Recorded>,
    from: &mut String,
) -> Result<(), String> {
    let mut conn = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    write!(conn, "GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut r = BufReader::new(conn);
    let mut status = String::new();
    r.read_line(&mut status).map_err(|e| e.to_string())?;
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("status {}", status.trim()));
    }
    let mut chunked = false;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).map_err(|e| e.to_string())?;
        if h.trim().is_empty() {
            break;
        }
        chunked |= h
            .to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked");
    }
    if !chunked {
        return Err("the watch response is not chunked".to_string());
    }
    out.lock().unwrap_or_else(|e| e.into_inner()).established = true;
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let mut size = String::new();
        if r.read_line(&mut size).map_err(|e| e.to_string())? == 0 {
            return Err("the connection closed mid-stream".to_string());
        }
        let hex = size.trim().split(';').next().unwrap_or_default();
        let n = usize::from_str_radix(hex, 16).map_err(|e| format!("chunk size {size:?}: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        let mut chunk = vec![0; n + 2];
        r.read_exact(&mut chunk).map_err(|e| e.to_string())?;
        chunk.truncate(n);
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let v: Value = serde_json::from_slice(&line)
                .map_err(|e| format!("a watch line is not JSON: {e}"))?;
            let kind = v["type"].as_str().unwrap_or_default().to_string();
            if kind == "ERROR" {
                return Err(format!("ERROR event {}", v["object"]));
            }
            let rv = v["object"]["metadata"]["resourceVersion"].as_str();
            if let Some(rv) = rv {
                *from = rv.to_string();
            }
            let mut rec = out.lock().unwrap_or_else(|e| e.into_inner());
            rec.events.push((kind, v["object"].clone()));
            rec.last = Some(Instant::now());
        }
    }
}

/// Whether the watch has seen the `n` pods whose names start with `prefix` and the
/// scheduler has tried each: it is bound, has a PodScheduled condition, or is gone.
fn attempted(rec: &Mutex<Recorded>, prefix: &str, n: usize) -> bool {
    let r = rec.lock().unwrap_or_else(|e| e.into_inner());
    let mut latest: BTreeMap<&str, (&str, &Value)> = BTreeMap::new();
    for (kind, pod) in &r.events {
        let name = s(pod, "/metadata/name");
        if name.starts_with(prefix) {
            latest.insert(name, (kind, pod));
        }
    }
    latest.len() == n
        && latest.values().all(|(kind, pod)| {
            *kind == "DELETED"
                || !s(pod, "/spec/nodeName").is_empty()
                || pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| s(c, "/type") == "PodScheduled")
        })
}

/// The `server:` URL of a kubeconfig, as host:port.
fn server_addr(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap_or_else(|e| panic!("{e}"));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: http://"))
        .unwrap_or_else(|| panic!("no plain http server in the kubeconfig:\n{text}"))
        .trim()
        .to_string()
}

/// `scheduler_pending_pods` of one queue.
fn queued(serving: &str, queue: &str) -> f64 {
    let (_, text) = get(serving, "/metrics");
    let key = format!("scheduler_pending_pods{{queue=\"{queue}\"}}");
    parse_metrics(&text).get(&key).copied().unwrap_or(0.0)
}

/// `kubectl get <what> -o json`, its items.
fn list(kubeconfig: &Path, what: &str) -> Vec<Value> {
    let out = kubectl_ok(kubeconfig, &["get", what, "-A", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: {e}"));
    v["items"].as_array().cloned().unwrap_or_default()
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        s(pod, "/metadata/namespace"),
        s(pod, "/metadata/name")
    )
}

/// A quantity in thousandths of its unit (millicores, millibytes, millipods); a plain
/// JSON number is a quantity too (YAML `cpu: 2`).
fn milli(q: &Value) -> Option<f64> {
    if let Some(n) = q.as_f64() {
        return Some((n * 1000.0).round());
    }
    let q = q.as_str()?.trim();
    let suffixes: [(&str, f64); 10] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("m", 0.001),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("", 1.0),
    ];
    suffixes.iter().find_map(|(suffix, factor)| {
        let n: f64 = q.strip_suffix(suffix)?.parse().ok()?;
        Some((n * factor * 1000.0).round())
    })
}

/// What a pod or node holds: cpu, memory, pods, in thousandths.
type Amounts = [f64; 3];
const RESOURCES: [&str; 3] = ["cpu", "memory", "pods"];

/// A pod's requests as the scheduler counts them: the larger of its containers' sum and
/// each init container, plus overhead.
fn requests(pod: &Value) -> Result<Amounts, String> {
    let of = |c: &Value, r: &str| -> Result<f64, String> {
        match c.pointer(&format!("/resources/requests/{r}")) {
            None => Ok(0.0),
            Some(q) => {
                milli(q).ok_or_else(|| format!("pod {}: unreadable {r} request {q}", key(pod)))
            }
        }
    };
    let mut out = [0.0, 0.0, 1000.0];
    for (i, r) in RESOURCES.iter().take(2).enumerate() {
        let mut sum = 0.0;
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            sum += of(c, r)?;
        }
        for c in pod["spec"]["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
        {
            sum = f64::max(sum, of(c, r)?);
        }
        let overhead = &pod["spec"]["overhead"][r];
        if !overhead.is_null() {
            sum +=
                milli(overhead).ok_or_else(|| format!("pod {}: unreadable overhead", key(pod)))?;
        }
        out[i] = sum;
    }
    Ok(out)
}

fn allocatable(node: &Value) -> Result<Amounts, String> {
    let mut out = [0.0; 3];
    for (i, r) in RESOURCES.iter().enumerate() {
        out[i] = milli(&node["status"]["allocatable"][r]).ok_or_else(|| {
            format!(
                "node {}: unreadable allocatable {r}",
                s(node, "/metadata/name")
            )
        })?;
    }
    Ok(out)
}

/// Whether a pod occupies its node: bound and not finished (being deleted still counts).
fn occupies(pod: &Value) -> bool {
    !s(pod, "/spec/nodeName").is_empty()
        && !matches!(s(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// One label requirement (`{key, operator, values}`) against a label map.
fn requirement(labels: &Value, req: &Value) -> bool {
    let value = labels[s(req, "/key")].as_str();
    let values: Vec<&str> = req["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |v: &str| v.parse::<i64>().ok();
    match s(req, "/operator") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// The pod's nodeSelector and required node affinity against a node.
fn affinity_allows(pod: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let selector_ok = pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v);
    let terms = pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    let Some(terms) = terms.and_then(Value::as_array) else {
        return selector_ok;
    };
    let fields = serde_json::json!({"metadata.name": node["metadata"]["name"]});
    // The terms are ORed; a term's requirements are ANDed; an empty term matches nothing.
    let term_ok = |t: &Value| {
        let exprs = t["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let fs = t["matchFields"].as_array().cloned().unwrap_or_default();
        (!exprs.is_empty() || !fs.is_empty())
            && exprs.iter().all(|r| requirement(labels, r))
            && fs.iter().all(|r| requirement(&fields, r))
    };
    selector_ok && terms.iter().any(term_ok)
}

/// The NoSchedule and NoExecute taints of `node` that the pod does not tolerate.
fn untolerated(pod: &Value, node: &Value) -> Vec<String> {
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tolerates = |taint: &Value| {
        tolerations.iter().any(|t| {
            let effect = s(t, "/effect");
            let key = s(t, "/key");
            (effect.is_empty() || effect == s(taint, "/effect"))
                && (key.is_empty() || key == s(taint, "/key"))
                && match s(t, "/operator") {
                    "Exists" => true,
                    _ => s(t, "/value") == s(taint, "/value"),
                }
        })
    };
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(s(t, "/effect"), "NoSchedule" | "NoExecute"))
        .filter(|t| !tolerates(t))
        .map(|t| format!("{}={}:{}", s(t, "/key"), s(t, "/value"), s(t, "/effect")))
        .collect()
}

/// A label selector (`matchLabels`, `matchExpressions`) against a pod's labels.
fn selects(selector: &Value, pod: &Value) -> bool {
    let labels = &pod["metadata"]["labels"];
    selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v)
        && selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|r| requirement(labels, r))
}

/// The invariants of one pod's placement on `node`.
fn check_placement(pod: &Value, nodes: &BTreeMap<String, Value>, when: &str) -> Vec<String> {
    let node_name = s(pod, "/spec/nodeName");
    let Some(node) = nodes.get(node_name) else {
        return vec![format!(
            "{when}: pod {} is bound to unknown node {node_name}",
            key(pod)
        )];
    };
    let mut out = Vec::new();
    if !affinity_allows(pod, node) {
        out.push(format!(
            "{when}: pod {} on {node_name} violates its required node affinity or selector",
            key(pod)
        ));
    }
    let taints = untolerated(pod, node);
    if !taints.is_empty() {
        out.push(format!(
            "{when}: pod {} on {node_name} does not tolerate {taints:?}",
            key(pod)
        ));
    }
    out
}

/// Pods over a node's allocatable, given the pods occupying it.
fn check_capacity<'a>(
    node: &Value,
    pods: impl Iterator<Item = &'a Value>,
    when: &str,
) -> Vec<String> {
    let name = s(node, "/metadata/name");
    let cap = match allocatable(node) {
        Ok(c) => c,
        Err(e) => return vec![e],
    };
    let mut used = [0.0; 3];
    let mut names = Vec::new();
    for p in pods {
        match requests(p) {
            Ok(r) => (0..3).for_each(|i| used[i] += r[i]),
            Err(e) => return vec![e],
        }
        names.push(s(p, "/metadata/name").to_string());
    }
    names.sort();
    (0..3)
        .filter(|i| used[*i] > cap[*i])
        .map(|i| {
            // Shown in the units a reader compares: millicores, MiB, pods.
            let unit = [1.0, 1024.0 * 1024.0 * 1000.0, 1000.0][i];
            format!(
                "{when}: node {name} overcommitted in {}: {} of {} by {names:?}",
                RESOURCES[i],
                used[i] / unit,
                cap[i] / unit
            )
        })
        .collect()
}

/// Replays the recorded pod watch: bindings never change, no node is ever overcommitted,
/// every placement is valid when it happens. Returns the violations and the uids of pods
/// that were deleted, with their last version.
fn check_history(
    events: &[(String, Value)],
    nodes: &BTreeMap<String, Value>,
) -> (Vec<String>, BTreeMap<String, Value>) {
    let mut out = Vec::new();
    let mut live: BTreeMap<String, Value> = BTreeMap::new();
    let mut bound_to: BTreeMap<String, String> = BTreeMap::new();
    let mut deleted = BTreeMap::new();
    for (kind, pod) in events {
        let uid = s(pod, "/metadata/uid").to_string();
        let rv = s(pod, "/metadata/resourceVersion");
        let when = format!("at resourceVersion {rv}");
        let node = s(pod, "/spec/nodeName").to_string();
        let before = live.get(&uid).map(|p| s(p, "/spec/nodeName").to_string());
        if kind == "DELETED" {
            live.remove(&uid);
            deleted.insert(uid, pod.clone());
            continue;
        }
        match bound_to.get(&uid) {
            Some(first) if *first != node => out.push(format!(
                "{when}: pod {} ({uid}) was bound to {first} and is now on {node:?}",
                key(pod)
            )),
            Some(_) => {}
            None if !node.is_empty() => {
                bound_to.insert(uid.clone(), node.clone());
                out.extend(check_placement(pod, nodes, &when));
            }
            None => {}
        }
        live.insert(uid, pod.clone());
        if !node.is_empty() && before.as_deref() != Some(node.as_str()) {
            if let Some(n) = nodes.get(&node) {
                let on = live
                    .values()
                    .filter(|p| s(p, "/spec/nodeName") == node && occupies(p));
                out.extend(check_capacity(n, on, &when));
            }
        }
    }
    (out, deleted)
}

/// What the test saw of the cluster.
struct Observed {
    /// Nodes by name; the workload never changes them.
    nodes: BTreeMap<String, Value>,
    /// (type, pod) of every pod watch event, in the server's order.
    history: Vec<(String, Value)>,
    /// The pods, events, listed once the scheduler settled.
    pods: Vec<Value>,
    events: Vec<Value>,
}

/// Every invariant violation in what was observed, history first.
fn check(o: &Observed) -> Vec<String> {
    let (mut out, deleted) = check_history(&o.history, &o.nodes);
    // Nothing outranks the highest priority, and the test deletes no pod itself.
    for pod in deleted.values() {
        if s(pod, "/spec/priorityClassName") == TOP {
            out.push(format!(
                "pod {} of the highest priority was deleted",
                key(pod)
            ));
        }
    }
    out.extend(check_victims(&deleted, &o.events));
    out.extend(check_final(&o.pods, &o.nodes, &o.events, &deleted));
    out
}

/// Every deleted pod (the scheduler's preemption is the only deleter) went as upstream
/// evicts a victim: marked `DisruptionTarget` (`PreemptionByScheduler`) before its deletion
/// was seen, and preempted by exactly one preemptor (one `Preempted` occurrence, counting an
/// event series' repeats).
fn check_victims(deleted: &BTreeMap<String, Value>, events: &[Value]) -> Vec<String> {
    let mut preempted: BTreeMap<(String, String), i64> = BTreeMap::new();
    for e in events.iter().filter(|e| s(e, "/reason") == "Preempted") {
        let times = [
            e.pointer("/series/count").and_then(Value::as_i64),
            e.pointer("/count").and_then(Value::as_i64),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1);
        *preempted
            .entry((
                s(e, "/involvedObject/namespace").to_string(),
                s(e, "/involvedObject/name").to_string(),
            ))
            .or_default() += times;
    }
    let mut out = Vec::new();
    for pod in deleted.values() {
        let marked = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| s(c, "/type") == "DisruptionTarget")
            .map(|c| (s(c, "/status"), s(c, "/reason")));
        if marked != Some(("True", "PreemptionByScheduler")) {
            out.push(format!(
                "victim {} was deleted with DisruptionTarget {marked:?}, not True/PreemptionByScheduler",
                key(pod)
            ));
        }
        let by_name = (
            s(pod, "/metadata/namespace").to_string(),
            s(pod, "/metadata/name").to_string(),
        );
        let times = preempted.get(&by_name).copied().unwrap_or(0);
        if times != 1 {
            out.push(format!(
                "victim {} has {times} Preempted events, not one",
                key(pod)
            ));
        }
    }
    out
}

/// The final state: capacity per node, placement per pod, zone skew per spread group, and
/// a condition and an event for every pod left without a node.
fn check_final(
    pods: &[Value],
    nodes: &BTreeMap<String, Value>,
    events: &[Value],
    deleted: &BTreeMap<String, Value>,
) -> Vec<String> {
    let when = "at the end";
    let mut out = Vec::new();
    for node in nodes.values() {
        let name = s(node, "/metadata/name");
        let on = pods
            .iter()
            .filter(|p| s(p, "/spec/nodeName") == name && occupies(p));
        out.extend(check_capacity(node, on, when));
    }
    for pod in pods.iter().filter(|p| !s(p, "/spec/nodeName").is_empty()) {
        out.extend(check_placement(pod, nodes, when));
    }

    // Spread: one group per namespace, constraint and node affinity; the workload gives
    // all pods of an app the same constraint and affinity, so a group is every pod placed
    // under one rule.
    let mut groups: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    for pod in pods {
        for c in pod["spec"]["topologySpreadConstraints"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if s(c, "/whenUnsatisfiable") == "DoNotSchedule" && s(c, "/topologyKey") == ZONE {
                let ns = s(pod, "/metadata/namespace").to_string();
                let aff =
                    pod["spec"]["affinity"].to_string() + &pod["spec"]["nodeSelector"].to_string();
                groups
                    .entry((ns, c.to_string(), aff))
                    .or_insert_with(|| serde_json::json!({"constraint": c, "pod": pod}));
            }
        }
    }
    for ((ns, _, _), g) in &groups {
        let (c, example) = (&g["constraint"], &g["pod"]);
        let selector = &c["labelSelector"];
        let matches = |p: &Value| s(p, "/metadata/namespace") == ns && selects(selector, p);
        if let Some(victim) = deleted.values().find(|p| matches(p)) {
            // A deleted member may leave the skew wider than any placement made it; the
            // workload gives spread pods the highest priority so that this does not happen.
            out.push(format!(
                "{when}: spread group {selector} lost pod {}, so its skew cannot be checked",
                key(victim)
            ));
            continue;
        }
        // Domains: zones of the nodes that pass the pods' node affinity (upstream's
        // default nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore); matching pods count
        // only on those nodes, and not while being deleted.
        let eligible = |n: &&Value| affinity_allows(example, n);
        let mut count: BTreeMap<&str, i64> = nodes
            .values()
            .filter(eligible)
            .filter_map(|n| n["metadata"]["labels"][ZONE].as_str())
            .map(|z| (z, 0))
            .collect();
        for p in pods.iter().filter(|p| matches(p) && occupies(p)) {
            if p.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let zone = nodes
                .get(s(p, "/spec/nodeName"))
                .filter(eligible)
                .and_then(|n| n["metadata"]["labels"][ZONE].as_str());
            if let Some(n) = zone.and_then(|z| count.get_mut(z)) {
                *n += 1;
            }
        }
        let max_skew = c["maxSkew"].as_i64().unwrap_or(1);
        let (lo, hi) = (
            count.values().min().copied().unwrap_or(0),
            count.values().max().copied().unwrap_or(0),
        );
        if hi - lo > max_skew {
            out.push(format!(
                "{when}: spread group {selector} has zone skew {} > maxSkew {max_skew}: {count:?}",
                hi - lo
            ));
        }
    }

    // Every bound pod has its Scheduled event, as upstream's scheduler records it.
    let scheduled: BTreeSet<&str> = events
        .iter()
        .filter(|e| s(e, "/reason") == "Scheduled")
        .map(|e| s(e, "/message"))
        .collect();
    for pod in pods.iter().filter(|p| !s(p, "/spec/nodeName").is_empty()) {
        let want = format!(
            "Successfully assigned {} to {}",
            key(pod),
            s(pod, "/spec/nodeName")
        );
        if !scheduled.contains(want.as_str()) {
            out.push(format!(
                "{when}: bound pod {} has no Scheduled event {want:?}",
                key(pod)
            ));
        }
    }

    // Every pending pod is reported on the pod and by an event.
    let mut failed: BTreeSet<(String, String)> = BTreeSet::new();
    for e in events
        .iter()
        .filter(|e| s(e, "/reason") == "FailedScheduling")
    {
        failed.insert((
            s(e, "/involvedObject/namespace").to_string(),
            s(e, "/involvedObject/name").to_string(),
        ));
        failed.insert((String::new(), s(e, "/involvedObject/uid").to_string()));
    }
    for pod in pods.iter().filter(|p| s(p, "/spec/nodeName").is_empty()) {
        let condition = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| s(c, "/type") == "PodScheduled");
        let got = condition.map(|c| (s(c, "/status"), s(c, "/reason")));
        if got != Some(("False", "Unschedulable")) {
            out.push(format!(
                "{when}: pending pod {} has PodScheduled {got:?}, not False/Unschedulable",
                key(pod)
            ));
        }
        let by_name = (
            s(pod, "/metadata/namespace").to_string(),
            s(pod, "/metadata/name").to_string(),
        );
        let by_uid = (String::new(), s(pod, "/metadata/uid").to_string());
        if !failed.contains(&by_name) && !failed.contains(&by_uid) {
            out.push(format!(
                "{when}: pending pod {} has no FailedScheduling event",
                key(pod)
            ));
        }
    }
    out
}

#[test]
fn randomized_workload_keeps_the_scheduling_invariants() {
    let seed = seed();
    eprintln!("{SEED_ENV}={seed}");
    let started = Instant::now();
    let mut rng = Rng(seed);
    let batches = generate(&mut rng);

    let scratch = Scratch::new("invariants");
    let (_up, kubeconfig, serving) = up(&scratch, &[]);
    let addr = server_addr(&kubeconfig);
    let pod_watch = watch(&addr, "/api/v1/pods");
    let event_watch = watch(&addr, "/api/v1/events");

    for (b, docs) in batches.iter().enumerate() {
        let file = scratch.path(&format!("batch-{b}.yaml"));
        std::fs::write(&file, docs.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
        kubectl_ok(&kubeconfig, &["create", "-f", &file.to_string_lossy()]);
        // Let the scheduler try every pod of a batch before the next, so that the next
        // one's higher priorities preempt what is bound; a batch that takes longer than the
        // bound only makes the load heavier. (Batch 0 is the nodes and classes.)
        let Some(pods) = b.checked_sub(1) else {
            continue;
        };
        let start = Instant::now();
        while start.elapsed() < BATCH_LIMIT
            && !attempted(&pod_watch, &format!("p{pods}-"), docs.len())
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let created = started.elapsed();

    // Settled: nothing queued to schedule, and no pod or event written for QUIET.
    let start = Instant::now();
    let counts = || {
        [&pod_watch, &event_watch].map(|w| {
            let r = w.lock().unwrap_or_else(|e| e.into_inner());
            (r.events.len(), r.last.map(|t| t.elapsed()))
        })
    };
    let before = counts();
    let settled = loop {
        let now = counts();
        let quiet = now.iter().all(|(_, last)| last.is_none_or(|t| t >= QUIET));
        let (active, backoff) = (queued(&serving, "active"), queued(&serving, "backoff"));
        if quiet && active + backoff == 0.0 {
            break Ok(());
        }
        if start.elapsed() >= SETTLE_LIMIT {
            // What kept changing, for the report.
            break Err(format!(
                "the scheduler did not settle within {SETTLE_LIMIT:?} of the last batch: \
                 {} pod versions and {} event writes during the wait, the last {:?} and {:?} \
                 ago; queues active {active}, backoff {backoff}, unschedulable {}",
                now[0].0 - before[0].0,
                now[1].0 - before[1].0,
                now[0].1.unwrap_or_default(),
                now[1].1.unwrap_or_default(),
                queued(&serving, "unschedulable"),
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let waited = start.elapsed();

    let nodes: BTreeMap<String, Value> = list(&kubeconfig, "nodes")
        .into_iter()
        .map(|n| (s(&n, "/metadata/name").to_string(), n))
        .collect();
    let pods = list(&kubeconfig, "pods");
    let events = list(&kubeconfig, "events");
    let (history, breaks) = {
        let r = pod_watch.lock().unwrap_or_else(|e| e.into_inner());
        (r.events.clone(), r.breaks.clone())
    };

    let mut violations: Vec<String> = Vec::new();
    if let Err(e) = &settled {
        violations.push(e.clone());
    }
    violations.extend(breaks.iter().map(|b| format!("the pod watch broke: {b}")));
    let observed = Observed {
        nodes,
        history,
        pods,
        events,
    };
    violations.extend(check(&observed));
    let Observed {
        nodes,
        history,
        pods,
        events,
    } = observed;
    let deleted = history.iter().filter(|(k, _)| k == "DELETED").count();
    // Not an invariant checked here, but worth seeing: how many victims were marked
    // DisruptionTarget at some point before they went (upstream marks each).
    let marked: BTreeSet<&str> = history
        .iter()
        .filter(|(_, p)| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| s(c, "/type") == "DisruptionTarget")
        })
        .map(|(_, p)| s(p, "/metadata/uid"))
        .collect();
    let marked_victims = history
        .iter()
        .filter(|(k, p)| k == "DELETED" && marked.contains(s(p, "/metadata/uid")))
        .count();

    let bound = pods
        .iter()
        .filter(|p| !s(p, "/spec/nodeName").is_empty())
        .count();
    let preempted = events
        .iter()
        .filter(|e| s(e, "/reason") == "Preempted")
        .count();
    eprintln!(
        "seed {seed}: {} nodes, {} pods created, {bound} bound, {} pending, {} deleted \
         ({marked_victims} marked DisruptionTarget; {preempted} Preempted events), {} watch \
         events; created in {created:?}, \
         settled={} after {:?}, {:?} in all",
        nodes.len(),
        pods.len() + deleted,
        pods.len() - bound,
        deleted,
        history.len(),
        settled.is_ok(),
        waited,
        started.elapsed(),
    );
    assert!(
        violations.is_empty(),
        "{} invariant violations with {SEED_ENV}={seed}:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// The checks themselves, on small hand-made states: each invariant is reported when it is
/// broken, and a valid state gives no report.
mod checks {
    use rstest::rstest;
    use serde_json::{json, Value};

    use super::{check, Observed};

    /// n-a: zone-a, gold, 4 cpu, 3 pods. n-b: zone-b, silver, tainted NoSchedule.
    /// n-c: zone-b, silver, tainted PreferNoSchedule. n-d: zone-b, gold.
    fn nodes() -> Vec<Value> {
        let node = |name: &str, zone: &str, tier: &str, taint: Option<&str>| {
            let taints: Vec<Value> = taint
                .map(|e| json!({"key": "dedicated", "value": "infra", "effect": e}))
                .into_iter()
                .collect();
            json!({
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": zone,
                    "tier": tier,
                }},
                "spec": {"taints": taints},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "3"}},
            })
        };
        vec![
            node("n-a", "zone-a", "gold", None),
            node("n-b", "zone-b", "silver", Some("NoSchedule")),
            node("n-c", "zone-b", "silver", Some("PreferNoSchedule")),
            node("n-d", "zone-b", "gold", None),
        ]
    }

    /// A low-priority pod requesting `cpu` and 256Mi; bound and Running when `node` is
    /// not empty, else rejected as the scheduler reports it.
    fn pod(name: &str, node: &str, cpu: &str) -> Value {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {
                "priorityClassName": "e2e-low",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
            },
            "status": {"phase": "Pending"},
        });
        if node.is_empty() {
            p["status"]["conditions"] =
                json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
        } else {
            p["spec"]["nodeName"] = json!(node);
            p["status"]["phase"] = json!("Running");
        }
        p
    }

    /// `p` with the JSON at `pointer` (whose parents exist or are objects to create) set.
    fn with(mut p: Value, pointer: &str, v: Value) -> Value {
        let mut at = &mut p;
        for part in pointer.trim_start_matches('/').split('/') {
            at = &mut at[part];
        }
        *at = v;
        p
    }

    fn spread(p: Value) -> Value {
        let c = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}}}]);
        let p = with(p, "/metadata/labels", json!({"app": "web"}));
        let p = with(p, "/spec/priorityClassName", json!("e2e-top"));
        with(p, "/spec/topologySpreadConstraints", c)
    }

    fn tier_in(p: Value, tier: &str) -> Value {
        let terms = json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "tier", "operator": "In", "values": [tier]}]}]});
        with(
            p,
            "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
            terms,
        )
    }

    fn marked(p: Value) -> Value {
        with(
            p,
            "/status/conditions",
            json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
        )
    }

    /// A `Preempted` event about `pod`, repeated `series` times when given.
    fn preempted(pod: &str, series: Option<i64>) -> Value {
        let mut e = json!({"reason": "Preempted",
                           "involvedObject": {"namespace": "default", "name": pod}});
        if let Some(n) = series {
            e["series"] = json!({"count": n});
        }
        e
    }

    fn failed(pod: &str) -> Value {
        json!({"reason": "FailedScheduling",
               "involvedObject": {"namespace": "default", "name": pod, "uid": format!("uid-{pod}")}})
    }

    /// The history a watch would have recorded of `pods` created unbound and bound one by
    /// one (resourceVersions 1, 2, ... in that order), then `extra`; events are the
    /// FailedScheduling events listed at the end.
    #[rstest]
    #[case::valid_placements_and_a_reported_pending_pod(
        vec![pod("a", "n-a", "1"), pod("c", "n-c", "1"), pod("wait", "", "9")],
        vec![],
        vec![failed("wait")],
        vec![],
    )]
    #[case::a_binding_that_changes_node_is_a_pod_bound_twice(
        vec![pod("a", "n-a", "1")],
        vec![("MODIFIED", pod("a", "n-c", "1"))],
        vec![],
        vec!["at resourceVersion 3: pod default/a (uid-a) was bound to n-a and is now on \"n-c\""],
    )]
    #[case::a_node_over_its_pod_limit(
        vec![pod("a", "n-a", "100m"), pod("b", "n-a", "100m"), pod("c", "n-a", "100m"), pod("d", "n-a", "100m")],
        vec![],
        vec![],
        vec![
            "at resourceVersion 8: node n-a overcommitted in pods: 4 of 3 by [\"a\", \"b\", \"c\", \"d\"]",
            "at the end: node n-a overcommitted in pods: 4 of 3 by [\"a\", \"b\", \"c\", \"d\"]",
        ],
    )]
    #[case::a_pod_being_deleted_still_occupies_its_node(
        vec![with(pod("old", "n-a", "3"), "/metadata/deletionTimestamp", json!("2026-01-01T00:00:00Z")), pod("new", "n-a", "1500m")],
        vec![],
        vec![],
        vec![
            "at resourceVersion 4: node n-a overcommitted in cpu: 4500 of 4000 by [\"new\", \"old\"]",
            "at the end: node n-a overcommitted in cpu: 4500 of 4000 by [\"new\", \"old\"]",
        ],
    )]
    #[case::a_request_written_as_a_plain_number_counts(
        vec![with(pod("old", "n-a", ""), "/spec/containers", json!([{"name": "c", "resources": {"requests": {"cpu": 3}}}])), pod("new", "n-a", "1500m")],
        vec![],
        vec![],
        vec![
            "at resourceVersion 4: node n-a overcommitted in cpu: 4500 of 4000 by [\"new\", \"old\"]",
            "at the end: node n-a overcommitted in cpu: 4500 of 4000 by [\"new\", \"old\"]",
        ],
    )]
    #[case::an_untolerated_no_schedule_taint(
        vec![pod("a", "n-b", "1"), with(pod("ok", "n-b", "1"), "/spec/tolerations", json!([{"key": "dedicated", "operator": "Exists"}]))],
        vec![],
        vec![],
        vec![
            "at resourceVersion 2: pod default/a on n-b does not tolerate [\"dedicated=infra:NoSchedule\"]",
            "at the end: pod default/a on n-b does not tolerate [\"dedicated=infra:NoSchedule\"]",
        ],
    )]
    #[case::a_required_node_affinity_not_met(
        vec![tier_in(pod("a", "n-c", "1"), "gold")],
        vec![],
        vec![],
        vec![
            "at resourceVersion 2: pod default/a on n-c violates its required node affinity or selector",
            "at the end: pod default/a on n-c violates its required node affinity or selector",
        ],
    )]
    #[case::a_spread_group_over_its_max_skew(
        vec![spread(pod("a", "n-a", "1")), spread(pod("b", "n-a", "1"))],
        vec![],
        vec![],
        vec!["at the end: spread group {\"matchLabels\":{\"app\":\"web\"}} has zone skew 2 > maxSkew 1: {\"zone-a\": 2, \"zone-b\": 0}"],
    )]
    #[case::spread_domains_are_only_the_zones_the_affinity_allows(
        vec![tier_in(spread(pod("a", "n-c", "1")), "silver"), tier_in(spread(pod("b", "n-c", "1")), "silver")],
        vec![],
        vec![],
        vec![],
    )]
    #[case::spread_counts_only_pods_on_nodes_the_affinity_allows(
        vec![tier_in(spread(pod("a", "n-a", "1")), "gold"), tier_in(spread(pod("b", "n-a", "1")), "gold"), spread(pod("c", "n-c", "1"))],
        vec![],
        vec![],
        vec!["at the end: spread group {\"matchLabels\":{\"app\":\"web\"}} has zone skew 2 > maxSkew 1: {\"zone-a\": 2, \"zone-b\": 0}"],
    )]
    #[case::a_pending_pod_without_a_condition_or_an_event(
        vec![with(pod("wait", "", "9"), "/status/conditions", json!([]))],
        vec![],
        vec![],
        vec![
            "at the end: pending pod default/wait has PodScheduled None, not False/Unschedulable",
            "at the end: pending pod default/wait has no FailedScheduling event",
        ],
    )]
    #[case::a_deleted_pod_of_the_highest_priority(
        vec![spread(pod("a", "n-a", "1")), spread(pod("b", "n-c", "1"))],
        vec![("DELETED", spread(pod("b", "n-c", "1")))],
        vec![],
        vec![
            "pod default/b of the highest priority was deleted",
            "victim default/b was deleted with DisruptionTarget None, not True/PreemptionByScheduler",
            "victim default/b has 0 Preempted events, not one",
            "at the end: spread group {\"matchLabels\":{\"app\":\"web\"}} lost pod default/b, so its skew cannot be checked",
        ],
    )]
    #[case::a_victim_marked_and_preempted_once(
        vec![pod("a", "n-a", "1"), pod("v", "n-c", "1")],
        vec![("DELETED", marked(pod("v", "n-c", "1")))],
        vec![preempted("v", None)],
        vec![],
    )]
    #[case::a_victim_deleted_without_its_disruption_target_condition(
        vec![pod("v", "n-c", "1")],
        vec![("DELETED", pod("v", "n-c", "1"))],
        vec![preempted("v", None)],
        vec!["victim default/v was deleted with DisruptionTarget None, not True/PreemptionByScheduler"],
    )]
    #[case::a_victim_preempted_by_two_preemptors(
        vec![pod("v", "n-c", "1")],
        vec![("DELETED", marked(pod("v", "n-c", "1")))],
        vec![preempted("v", Some(2))],
        vec!["victim default/v has 2 Preempted events, not one"],
    )]
    fn check_reports_each_broken_invariant(
        #[case] pods: Vec<Value>,
        #[case] extra: Vec<(&str, Value)>,
        #[case] events: Vec<Value>,
        #[case] want: Vec<&str>,
    ) {
        let mut history = Vec::new();
        let mut rv = 0;
        let mut record = |kind: &str, p: &Value| {
            rv += 1;
            let p = with(
                p.clone(),
                "/metadata/resourceVersion",
                json!(rv.to_string()),
            );
            history.push((kind.to_string(), p));
        };
        for p in &pods {
            let unbound = with(p.clone(), "/spec/nodeName", json!(""));
            record("ADDED", &unbound);
            if !super::s(p, "/spec/nodeName").is_empty() {
                record("MODIFIED", p);
            }
        }
        for (kind, p) in &extra {
            record(kind, p);
        }
        let final_pods = if extra.iter().any(|(k, _)| *k == "DELETED") {
            pods.into_iter()
                .filter(|p| {
                    !extra.iter().any(|(k, e)| {
                        *k == "DELETED" && e["metadata"]["uid"] == p["metadata"]["uid"]
                    })
                })
                .collect()
        } else {
            pods
        };
        let mut events = events;
        for p in final_pods
            .iter()
            .filter(|p| !super::s(p, "/spec/nodeName").is_empty())
        {
            events.push(scheduled(p));
        }
        let observed = Observed {
            nodes: nodes_by_name(),
            history,
            pods: final_pods,
            events,
        };
        assert_eq!(check(&observed), want);
    }

    fn nodes_by_name() -> std::collections::BTreeMap<String, Value> {
        nodes()
            .into_iter()
            .map(|n| (super::s(&n, "/metadata/name").to_string(), n))
            .collect()
    }

    fn scheduled(p: &Value) -> Value {
        let message = format!(
            "Successfully assigned {} to {}",
            super::key(p),
            super::s(p, "/spec/nodeName")
        );
        json!({"reason": "Scheduled", "message": message,
               "involvedObject": {"namespace": "default", "name": p["metadata"]["name"]}})
    }

    #[test]
    fn a_bound_pod_without_its_scheduled_event_is_reported() {
        let (a, b) = (pod("a", "n-a", "1"), pod("b", "n-d", "1"));
        let history = [&a, &b]
            .iter()
            .enumerate()
            .map(|(rv, p)| {
                let p = with(
                    (*p).clone(),
                    "/metadata/resourceVersion",
                    json!(rv.to_string()),
                );
                ("ADDED".to_string(), p)
            })
            .collect();
        // b's event names another node.
        let events = vec![
            scheduled(&a),
            scheduled(&with(b.clone(), "/spec/nodeName", json!("n-a"))),
        ];
        let observed = Observed {
            nodes: nodes_by_name(),
            history,
            pods: vec![a, b],
            events,
        };
        assert_eq!(
            check(&observed),
            ["at the end: bound pod default/b has no Scheduled event \"Successfully assigned default/b to n-d\""]
        );
    }
}
