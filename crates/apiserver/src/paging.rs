//! Chunked lists: `limit` and `continue`.
//!
//! Upstream: k8s.io/apiserver/pkg/storage (continue tokens) and the etcd3 store's list. A page
//! holds at most `limit` objects in key order (namespace, name); when more follow, the list
//! carries an opaque `continue` token and, for lists without selectors, `remainingItemCount`.
//! Every page of one list shows the state at the first page's resourceVersion, as etcd serves
//! later pages at the first page's revision. This store keeps no old revisions, so the first
//! page of a list that has more keeps its items (shared `Arc`s, no copies) in a small
//! [`Snapshots`] cache; a token whose snapshot is gone gets upstream's 410 Expired with a token
//! to continue inconsistently from the current state, as after an etcd compaction.
//!
//! The token is upstream's encoding: unpadded URL-safe base64 of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"KEY\u0000"}` where KEY is the last returned object's
//! key below the list's prefix (`name`, or `namespace/name` across namespaces) and the NUL
//! makes it the first key after it. `rv` -1 continues from the current state.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::status::ApiError;
use crate::store::Listed;

/// Upstream's token version.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Where a page starts and at which resourceVersion it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The resourceVersion of the first page; `None` for an inconsistent continuation (-1).
    pub rv: Option<u64>,
    /// The first key (namespace, name) of the page. The namespace is empty for
    /// cluster-scoped objects and for lists within one namespace (the list fills it in).
    pub start: (String, String),
    /// Whether `start` itself is excluded (the token's key ends with NUL).
    pub after: bool,
}

fn invalid(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "invalid continue token: continue key is not valid: {why}"
    ))
}

/// An object of a list, by what paging reads of it: its namespace and name.
pub trait Keyed {
    /// The namespace (empty for cluster-scoped objects) and the name.
    fn key(&self) -> (&str, &str);
}

impl Keyed for Arc<Value> {
    fn key(&self) -> (&str, &str) {
        let meta = |f: &str| {
            self.get("metadata")
                .and_then(|m| m.get(f))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        (meta("namespace"), meta("name"))
    }
}

impl Keyed for Listed {
    fn key(&self) -> (&str, &str) {
        (&self.namespace, &self.name)
    }
}

/// The object's key below the list's prefix: `namespace/name` when the list spans
/// namespaces of a namespaced resource, else `name`.
fn relative_key(obj: &impl Keyed, across_namespaces: bool) -> String {
    let (namespace, name) = obj.key();
    if across_namespaces {
        format!("{namespace}/{name}")
    } else {
        name.to_string()
    }
}

/// The token continuing after `last` in a list read at `rv`.
pub fn encode(rv: u64, last: &impl Keyed, across_namespaces: bool) -> String {
    let token = json!({
        "v": TOKEN_VERSION,
        "rv": rv,
        "start": format!("{}\u{0}", relative_key(last, across_namespaces)),
    });
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// Decodes a token for a list of a namespaced resource across namespaces (`across`) or not.
/// Malformed tokens are upstream's 400 `invalid continue token: continue key is not valid: …`.
pub fn decode(token: &str, across_namespaces: bool) -> Result<Continue, ApiError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(invalid)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(invalid)?;
    let version = value.get("v").and_then(Value::as_str).unwrap_or("");
    if version != TOKEN_VERSION {
        return Err(invalid(format_args!(
            "server does not recognize this encoded version {version:?}"
        )));
    }
    let rv = match value.get("rv").and_then(Value::as_i64) {
        Some(rv) if rv > 0 => u64::try_from(rv).ok(),
        Some(rv) if rv < 0 => None,
        _ => {
            return Err(invalid(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ))
        }
    };
    let start = value.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(invalid("encoded start key empty (version meta.k8s.io/v1)"));
    }
    let (key, after) = match start.strip_suffix('\u{0}') {
        Some(key) => (key, true),
        None => (start, false),
    };
    // Keys are plain names below the list's prefix: anything that would climb out of it, or
    // that no object could have, is refused as upstream refuses unclean paths.
    let clean = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\u{0}']);
    let start = match key.split_once('/') {
        Some((ns, name)) if across_namespaces && clean(ns) && clean(name) => {
            (ns.to_string(), name.to_string())
        }
        None if !across_namespaces && clean(key) => (String::new(), key.to_string()),
        _ => return Err(invalid(start)),
    };
    Ok(Continue { rv, start, after })
}

/// Upstream's 410 for a token whose resourceVersion can no longer be served, carrying a token
/// (rv -1) that continues from the current state; the `Status` body.
pub fn expired_status(c: &Continue, across_namespaces: bool) -> Value {
    let start = if across_namespaces {
        format!("{}/{}", c.start.0, c.start.1)
    } else {
        c.start.1.clone()
    };
    let token = json!({
        "v": TOKEN_VERSION,
        "rv": -1,
        "start": if c.after { format!("{start}\u{0}") } else { start },
    });
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string());
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {"continue": token},
        "status": "Failure",
        "message": "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        "reason": "Expired", "code": 410,
    })
}

/// One page of a list.
#[derive(Debug, PartialEq)]
pub struct Page<'a, T> {
    /// The page's objects.
    pub items: Vec<&'a T>,
    /// The last returned object when more matching objects follow (the token is made from
    /// it).
    pub last: Option<&'a T>,
    /// How many objects follow the page; only when nothing is filtered out.
    pub remaining: Option<u64>,
}

/// The page of `items` (sorted by namespace, name) starting at `start`, at most `limit`
/// long, of the objects `matches` lets through. `filtered` says whether selectors apply
/// (upstream then leaves `remainingItemCount` out).
pub fn page<'a, T: Keyed>(
    items: &'a [T],
    start: Option<&Continue>,
    limit: Option<usize>,
    filtered: bool,
    matches: impl Fn(&T) -> bool,
) -> Page<'a, T> {
    let from = match start {
        None => 0,
        Some(c) => items.partition_point(|o| {
            let k = o.key();
            let start = (c.start.0.as_str(), c.start.1.as_str());
            k < start || (c.after && k == start)
        }),
    };
    let rest = items.get(from..).unwrap_or_default();
    let limit = limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut scanned = 0;
    for o in rest {
        if out.len() == limit {
            break;
        }
        scanned += 1;
        if matches(o) {
            out.push(o);
        }
    }
    let after = rest.get(scanned..).unwrap_or_default();
    let more = if filtered {
        after.iter().any(&matches)
    } else {
        !after.is_empty()
    };
    Page {
        last: if more { out.last().copied() } else { None },
        remaining: (more && !filtered).then_some(after.len() as u64),
        items: out,
    }
}

/// The lists whose first page had more to come, kept so later pages read the same state.
/// Bounded: the least recently used is dropped first, and its tokens then get 410.
#[derive(Debug)]
pub struct Snapshots {
    capacity: usize,
    kept: Mutex<VecDeque<Snapshot>>,
}

#[derive(Debug)]
struct Snapshot {
    storage: &'static str,
    namespace: Option<String>,
    rv: u64,
    items: Arc<Vec<Listed>>,
}

impl Snapshots {
    /// A cache of at most `capacity` lists.
    pub fn new(capacity: usize) -> Self {
        Snapshots {
            capacity: capacity.max(1),
            kept: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Snapshot>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps the list of `storage` (in `namespace`, or all) at `rv`.
    pub fn keep(
        &self,
        storage: &'static str,
        namespace: Option<&str>,
        rv: u64,
        items: Arc<Vec<Listed>>,
    ) {
        let mut kept = self.lock();
        let same = |s: &Snapshot| {
            s.storage == storage && s.namespace.as_deref() == namespace && s.rv == rv
        };
        if kept.iter().any(same) {
            return;
        }
        if kept.len() >= self.capacity {
            kept.pop_front();
        }
        kept.push_back(Snapshot {
            storage,
            namespace: namespace.map(str::to_string),
            rv,
            items,
        });
    }

    /// The kept list of `storage` (in `namespace`, or all) at `rv`, now the most recently
    /// used.
    pub fn get(
        &self,
        storage: &'static str,
        namespace: Option<&str>,
        rv: u64,
    ) -> Option<Arc<Vec<Listed>>> {
        let mut kept = self.lock();
        let at = kept.iter().position(|s| {
            s.storage == storage && s.namespace.as_deref() == namespace && s.rv == rv
        })?;
        let snapshot = kept.remove(at)?;
        let items = snapshot.items.clone();
        kept.push_back(snapshot);
        Some(items)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn obj(ns: &str, name: &str, label: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"namespace": ns, "name": name, "labels": {"l": label}}}))
    }

    fn token(v: Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    }

    #[test]
    fn tokens_round_trip_as_upstream_encodes_them() {
        let o = obj("ns1", "p1", "");
        let across = encode(7, &o, true);
        let within = encode(7, &o, false);
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&across)
            .unwrap_or_default();
        assert_eq!(
            (
                String::from_utf8(raw).unwrap_or_default(),
                decode(&across, true),
                decode(&within, false),
            ),
            (
                r#"{"rv":7,"start":"ns1/p1\u0000","v":"meta.k8s.io/v1"}"#.to_string(),
                Ok(Continue {
                    rv: Some(7),
                    start: ("ns1".into(), "p1".into()),
                    after: true
                }),
                Ok(Continue {
                    rv: Some(7),
                    start: (String::new(), "p1".into()),
                    after: true
                }),
            )
        );
    }

    #[rstest]
    #[case::not_base64("%%%", "continue key is not valid: Invalid symbol 37, offset 0.")]
    #[case::cut_short(&token(json!("x"))[..1], "continue key is not valid: Invalid input length: 1")]
    #[case::not_json(
        "bm90IGpzb24",
        "continue key is not valid: expected ident at line 1 column 2"
    )]
    #[case::json_but_not_an_object(&token(json!([1])), "continue key is not valid: server does not recognize this encoded version \"\"")]
    #[case::other_version(&token(json!({"v": "v1alpha1", "rv": 1, "start": "a"})), "continue key is not valid: server does not recognize this encoded version \"v1alpha1\"")]
    #[case::zero_rv(&token(json!({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"})), "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    #[case::empty_start(&token(json!({"v": "meta.k8s.io/v1", "rv": 3, "start": ""})), "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    #[case::climbing_out(&token(json!({"v": "meta.k8s.io/v1", "rv": 3, "start": "../secrets/x"})), "continue key is not valid: ../secrets/x")]
    fn garbled_tokens_are_400_with_upstreams_message(#[case] t: &str, #[case] why: &str) {
        assert_eq!(
            decode(t, false),
            Err(ApiError::bad_request(format!(
                "invalid continue token: {why}"
            )))
        );
    }

    #[test]
    fn an_expired_token_offers_an_inconsistent_continuation_from_the_same_key() {
        let c = Continue {
            rv: Some(5),
            start: ("ns1".into(), "p1".into()),
            after: true,
        };
        let status = expired_status(&c, true);
        let next = status
            .pointer("/metadata/continue")
            .and_then(Value::as_str)
            .unwrap_or("");
        assert_eq!(
            (
                status["code"].clone(),
                status["reason"].clone(),
                decode(next, true)
            ),
            (json!(410), json!("Expired"), Ok(Continue { rv: None, ..c }))
        );
    }

    fn names(p: &Page<'_, Arc<Value>>) -> Vec<String> {
        p.items
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[rstest]
    #[case::no_limit(None, None, false, &["a", "b", "c", "d", "e"], None, None)]
    #[case::first_page(None, Some(2), false, &["a", "b"], Some("b"), Some(3))]
    #[case::middle_page(Some(("b", true)), Some(2), false, &["c", "d"], Some("d"), Some(1))]
    #[case::last_page_exactly_full(Some(("c", true)), Some(2), false, &["d", "e"], None, None)]
    #[case::inclusive_start(Some(("c", false)), Some(1), false, &["c"], Some("c"), Some(2))]
    #[case::start_between_keys(Some(("bb", true)), Some(10), false, &["c", "d", "e"], None, None)]
    #[case::filtered_skips_non_matching_and_has_no_count(None, Some(2), true, &["a", "c"], Some("c"), None)]
    #[case::filtered_last_page_when_no_match_follows(Some(("c", true)), Some(1), true, &["e"], None, None)]
    fn pages(
        #[case] start: Option<(&str, bool)>,
        #[case] limit: Option<usize>,
        #[case] filtered: bool,
        #[case] want: &[&str],
        #[case] last: Option<&str>,
        #[case] remaining: Option<u64>,
    ) {
        let items: Vec<_> = ["a", "b", "c", "d", "e"]
            .iter()
            .enumerate()
            .map(|(i, n)| obj("", n, if i % 2 == 0 { "even" } else { "odd" }))
            .collect();
        let start = start.map(|(k, after)| Continue {
            rv: Some(1),
            start: (String::new(), k.to_string()),
            after,
        });
        let p = page(&items, start.as_ref(), limit, filtered, |o| {
            !filtered || o["metadata"]["labels"]["l"] == "even"
        });
        let got_last = p.last.map(|o| o["metadata"]["name"].as_str().unwrap_or(""));
        assert_eq!(
            (names(&p), got_last, p.remaining),
            (
                want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                last,
                remaining
            )
        );
    }

    #[test]
    fn snapshots_drop_the_least_recently_used() {
        let s = Snapshots::new(2);
        let items = |n: &str| {
            Arc::new(vec![Listed {
                namespace: String::new(),
                name: n.to_string(),
                encoded: axum::body::Bytes::new(),
            }])
        };
        s.keep("pods", Some("a"), 1, items("one"));
        s.keep("pods", None, 2, items("two"));
        let used = s.get("pods", Some("a"), 1).is_some();
        s.keep("nodes", None, 3, items("three"));
        let kept = |storage, ns, rv| s.get(storage, ns, rv).is_some();
        assert_eq!(
            (
                used,
                kept("pods", Some("a"), 1),
                kept("pods", None, 2),
                kept("nodes", None, 3),
                kept("pods", Some("b"), 1),
            ),
            (true, true, false, true, false)
        );
    }
}
