//! Watches: newline-framed chunked JSON answered from the store's event log, with selector
//! transitions, bookmarks, `sendInitialEvents` and the in-stream 410.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::{rv_of, to_wire, ObjectPath, Req};
use crate::resources::ResourceInfo;
use crate::selectors::{Attrs, Selector};
use crate::status::ApiError;
use crate::store::{self, EventType, WatchEvent};
use crate::table;

/// How long a watch without `timeoutSeconds` stays open (upstream: 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Lines a watch response may queue for a slow client before the task waits; beyond that,
/// the broadcast buffer absorbs bursts and a watcher that falls too far behind is dropped.
const WATCH_QUEUE: usize = 64;

fn watch_line(kind: &str, object: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        object: &'a Value,
    }
    let mut line = serde_json::to_vec(&Line { kind, object }).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn streaming(rx: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, Infallible>(b), rx))
    });
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from_stream(stream),
    )
        .into_response()
}

/// What one watch delivers and how.
struct WatchFilter {
    info: &'static ResourceInfo,
    ns: Option<String>,
    sel: Selector,
    table: bool,
}

impl WatchFilter {
    fn matches(&self, obj: &Value) -> bool {
        self.ns
            .as_deref()
            .is_none_or(|ns| obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
            && self.sel.matches(obj)
    }

    fn matches_attrs(&self, attrs: &Attrs) -> bool {
        self.ns.as_deref().is_none_or(|ns| attrs.namespace == ns) && self.sel.matches_attrs(attrs)
    }

    fn encode(&self, kind: &str, obj: &Value) -> Bytes {
        let wire = to_wire(self.info, obj);
        if self.table {
            let rv = rv_of(obj).unwrap_or("");
            return watch_line(kind, &table::table(self.info, [&*wire], rv, false));
        }
        watch_line(kind, &wire)
    }

    /// The line for a logged event, with selector transitions as ADDED/DELETED.
    fn event(&self, ev: &WatchEvent) -> Option<Bytes> {
        if ev.storage != self.info.storage {
            return None;
        }
        let now = self.matches_attrs(&ev.attrs);
        let before = ev.previous.as_ref().is_some_and(|p| self.matches_attrs(p));
        let kind = match ev.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return None,
        };
        if self.table || self.info.group == "events.k8s.io" {
            return Some(self.encode(kind, &ev.object()));
        }
        let object = &ev.encoded;
        let mut line = Vec::with_capacity(object.len() + 32);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(object);
        line.extend_from_slice(b"}\n");
        Some(Bytes::from(line))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        watch_line(
            "BOOKMARK",
            &json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta}),
        )
    }
}

pub(super) fn watch(req: &Req<'_>, p: &ObjectPath) -> Result<Response, ApiError> {
    let info = p.info;
    let filter = WatchFilter {
        info,
        ns: p.ns.clone(),
        sel: req.selector(info)?,
        table: req.wants_table(),
    };
    let send_initial = req.query.flag("sendInitialEvents");
    let bookmarks = req.query.flag("allowWatchBookmarks");
    let from = match req.query.get("resourceVersion").unwrap_or("") {
        "" | "0" => None,
        _ if send_initial => None,
        rv => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let timeout = req
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Bytes>(WATCH_QUEUE);
    let start = match req.st.store.watch(info.storage, from) {
        Ok(s) => s,
        Err(e) => {
            // Too old: 200 with one in-stream ERROR, as the real cacher answers.
            let line = watch_line("ERROR", &e.to_status());
            let _ = tx.try_send(line);
            drop(tx);
            return Ok(streaming(rx));
        }
    };
    let interval = req.st.bookmark_interval;
    tokio::spawn(async move {
        let mut last_rv = start.rv;
        let mut live = start.live;
        let initial = start.initial.iter().map(store::decode);
        for obj in initial.filter(|o| filter.matches(o)) {
            if tx.send(filter.encode("ADDED", &obj)).await.is_err() {
                return;
            }
        }
        if send_initial && tx.send(filter.bookmark(start.rv, true)).await.is_err() {
            return;
        }
        for ev in &start.backlog {
            if let Some(line) = filter.event(ev) {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = &mut deadline => return,
                () = tx.closed() => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(filter.bookmark(last_rv, false)).await.is_err() {
                        return;
                    }
                }
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= start.rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        if let Some(line) = filter.event(&ev) {
                            if tx.send(line).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Too slow: end with 410 so the client relists, rather than block writers.
                        let e = ApiError::expired(last_rv, last_rv + 1);
                        let _ = tx.send(watch_line("ERROR", &e.to_status())).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    Ok(streaming(rx))
}
