//! The web view in a real headless browser (Debian's chromium): `kubesched up` with three
//! nodes (one tainted), a pod that fits and one that does not; the page, rendered by
//! chromium, shows the nodes, the pending pod's FailedScheduling message, and the scheduled
//! pod's filter and score tables cell for cell as `/api/pods/default/web` and
//! `/api/profiles` say. `--simulator-annotations` writes the same verdicts onto the pod.
//!
//! chromium is looked up as `$KUBESCHED_CHROMIUM`, then `chromium` on the PATH; without it
//! the test fails and says how to install it (./scripts/test installs it).
//! With `KUBESCHED_SCREENSHOT=FILE` the test also saves a screenshot of the page there.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{get, kubectl_ok, node_yaml, up, wait_for, Scratch};

fn chromium() -> PathBuf {
    let found = match std::env::var_os("KUBESCHED_CHROMIUM") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.exists()),
        None => std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("chromium"))
                .find(|p| p.exists())
        }),
    };
    found.unwrap_or_else(|| {
        panic!(
            "chromium not found (the web view test drives a real headless browser): install \
             Debian's chromium with `apt-get install -y chromium` (./scripts/test does), or \
             set KUBESCHED_CHROMIUM to a chromium binary"
        )
    })
}

/// Runs headless chromium on `url` with `args`; its stdout. Bounded: killed after 120 s.
fn run_chromium(scratch: &Scratch, url: &str, args: &[&str]) -> String {
    let profile = scratch.path("chromium-profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting chromium: {e}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within 120 s on {url}");
            }
        }
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("reading chromium's output: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Each `<td ...>text</td>` of the DOM with its attributes.
fn cells(dom: &str) -> Vec<(BTreeMap<String, String>, String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(start) = rest.find("<td") {
        rest = &rest[start + 3..];
        let Some(end) = rest.find('>') else { break };
        let attrs_text = &rest[..end];
        rest = &rest[end + 1..];
        let close = rest.find("</td>").unwrap_or(rest.len());
        let inner = &rest[..close];
        let mut attrs = BTreeMap::new();
        let mut a = attrs_text;
        while let Some(eq) = a.find("=\"") {
            let name = a[..eq].trim().to_string();
            let after = &a[eq + 2..];
            let Some(q) = after.find('"') else { break };
            attrs.insert(name, unescape(&after[..q]));
            a = &after[q + 1..];
        }
        // The text without tags (a final score is in <b>).
        let mut text = String::new();
        let mut in_tag = false;
        for c in inner.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        out.push((attrs, unescape(&text)));
    }
    out
}

fn json(serving: &str, path: &str) -> Value {
    let (code, body) = get(serving, path);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn obj(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flatten()
}

#[test]
fn the_web_page_shows_the_nodes_and_a_pods_filter_and_score_tables_as_the_json_says() {
    // Fail first, and clearly, without a browser.
    chromium();
    let scratch = Scratch::new("webview");
    let (_up, kubeconfig, serving) = up(&scratch, &["--simulator-annotations"]);
    let docs = [
        node_yaml("n-small", "1", &[], None),
        node_yaml("n-big", "4", &[], None),
        node_yaml("n-gpu", "8", &[], Some("gpu")),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: pause, resources: {requests: {cpu: 1500m}}}\n".to_string(),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: huge}\nspec:\n  containers:\n  - {name: c, image: pause, resources: {requests: {cpu: '16'}}}\n".to_string(),
    ];
    let file = scratch.path("objects.yaml");
    std::fs::write(&file, docs.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);

    // Both pods attempted, `web` bound and its annotations written.
    let pods = wait_for(Duration::from_secs(60), "both pods attempted", || {
        let list = json(&serving, "/api/pods");
        let pods: BTreeMap<String, String> = list["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    p["result"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        (pods.len() == 2).then_some(pods)
    });
    assert_eq!(
        pods,
        BTreeMap::from([
            ("huge".to_string(), "Unschedulable".to_string()),
            ("web".to_string(), "Scheduled".to_string()),
        ])
    );
    let decision = json(&serving, "/api/pods/default/web");
    let huge = json(&serving, "/api/pods/default/huge");
    let weights =
        json(&serving, "/api/profiles")["profiles"]["default-scheduler"]["scoreWeights"].clone();
    let selected = wait_for(
        Duration::from_secs(60),
        "web's simulator annotations",
        || {
            let out = kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "pod",
                "web",
                "-o",
                "jsonpath={.metadata.annotations.kube-scheduler-simulator\\.sigs\\.k8s\\.io/selected-node}",
            ],
        );
            (!out.is_empty()).then_some(out)
        },
    );
    assert_eq!(Some(selected.as_str()), decision["node"].as_str());

    // The page is complete at its load event (the server embeds its data), which is when
    // chromium takes the DOM or the screenshot.
    let url = format!("http://{serving}/?pod=default/web");
    let dom = run_chromium(&scratch, &url, &["--dump-dom"]);
    assert!(
        dom.contains("data-loaded=\"true\""),
        "the page did not finish loading:\n{dom}"
    );

    // The nodes, and the pending pod with its FailedScheduling message.
    let nodes: Vec<&str> = ["n-big", "n-gpu", "n-small"]
        .into_iter()
        .filter(|n| !dom.contains(&format!("class=\"node\" data-node=\"{n}\"")))
        .collect();
    assert_eq!(
        nodes,
        Vec::<&str>::new(),
        "nodes missing from the page:\n{dom}"
    );
    let message = huge["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("0/3 nodes are available") && dom.contains(&unescape(message)),
        "the pending pod's message {message:?} is not on the page:\n{dom}"
    );

    // The filter table, cell for cell.
    let cells = cells(&dom);
    let shown_filter: BTreeMap<(String, String), String> = cells
        .iter()
        .filter(|(a, _)| a.contains_key("data-plugin") && !a.contains_key("data-raw"))
        .map(|(a, text)| {
            (
                (a["data-node"].clone(), a["data-plugin"].clone()),
                text.clone(),
            )
        })
        .collect();
    let want_filter: BTreeMap<(String, String), String> = obj(&decision["filter"])
        .flat_map(|(node, plugins)| {
            obj(plugins).map(move |(plugin, s)| {
                let text = if s["code"] == "Success" {
                    "passed".to_string()
                } else {
                    s["reasons"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                ((node.clone(), plugin.clone()), text)
            })
        })
        .collect();
    assert!(want_filter.len() >= 3, "{decision}");
    assert_eq!(shown_filter, want_filter);

    // The score table: raw and weighted per plugin, and the final score per node.
    let shown_score: BTreeMap<(String, String), (String, String)> = cells
        .iter()
        .filter(|(a, _)| a.contains_key("data-raw"))
        .map(|(a, _)| {
            (
                (a["data-node"].clone(), a["data-plugin"].clone()),
                (a["data-raw"].clone(), a["data-weighted"].clone()),
            )
        })
        .collect();
    let want_score: BTreeMap<(String, String), (String, String)> = obj(&decision["score"])
        .flat_map(|(node, plugins)| {
            let weights = &weights;
            obj(plugins).map(move |(plugin, v)| {
                let raw = v.as_i64().unwrap_or(-1);
                let w = weights[plugin.as_str()].as_i64().unwrap_or(1);
                (
                    (node.clone(), plugin.clone()),
                    (raw.to_string(), (raw * w).to_string()),
                )
            })
        })
        .collect();
    assert!(!want_score.is_empty(), "{decision}");
    assert_eq!(shown_score, want_score);
    let shown_final: BTreeMap<String, String> = cells
        .iter()
        .filter(|(a, _)| a.contains_key("data-final"))
        .map(|(a, _)| (a["data-node"].clone(), a["data-final"].clone()))
        .collect();
    let want_final: BTreeMap<String, String> = obj(&decision["finalScore"])
        .map(|(n, v)| (n.clone(), v.to_string()))
        .collect();
    assert_eq!(shown_final, want_final);
    let chosen = decision["node"].as_str().unwrap_or_default();
    assert!(
        dom.contains(&format!("<dd id=\"chosen-node\">{chosen}</dd>")),
        "chosen node {chosen} not shown:\n{dom}"
    );

    if let Some(path) = std::env::var_os("KUBESCHED_SCREENSHOT") {
        let path = PathBuf::from(path);
        let shot = format!("--screenshot={}", path.display());
        run_chromium(&scratch, &url, &[&shot, "--window-size=1400,1000"]);
        assert!(path.exists(), "no screenshot at {}", path.display());
    }
}
