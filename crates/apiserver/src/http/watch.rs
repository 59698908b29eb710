//! Watches: newline-framed chunked JSON answered from the store's event log, with selector
//! transitions, bookmarks, `sendInitialEvents` and the in-stream 410.
//!
//! Each watch queues its lines in an [`Outbox`] the connection drains. The queue is bounded
//! in lines (the watch then waits, reading on from the event log later) and in bytes:
//! a live event that would take a watcher past its byte bound ends that watch, its queue is
//! dropped and its response ends, as upstream's cacher closes a watcher too slow to take its
//! events (the client watches again from the last resourceVersion it saw, or relists).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::{rv_of, to_wire, ObjectPath, Req};
use crate::resources::ResourceInfo;
use crate::selectors::{Attrs, Selector};
use crate::status::ApiError;
use crate::store::{self, EventType, RecvError, WatchEvent};
use crate::table;

/// How long a watch without `timeoutSeconds` stays open (upstream: 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Lines a watch response may queue for a slow client before the task waits; beyond that,
/// its unread events wait in the store's event log, and a watcher whose unread events fall
/// out of the log is ended with 410.
const WATCH_QUEUE: usize = 64;

/// A watch response's lines not yet taken by the connection.
struct Outbox {
    state: Mutex<Queued>,
    /// A line was queued or the queue ended (one waiter: the response body).
    queued: Notify,
    /// A line was taken or the connection went away (one waiter: the watch task).
    taken: Notify,
    /// Bytes a watcher may have queued; see [`crate::Config::watch_backlog_bytes`].
    max_bytes: usize,
}

#[derive(Default)]
struct Queued {
    lines: VecDeque<Bytes>,
    bytes: usize,
    /// No more lines come: the body ends once it has sent the queued ones.
    ended: bool,
    /// The connection went away.
    gone: bool,
}

/// Why a line was not queued.
#[derive(Debug, PartialEq)]
enum NotQueued {
    /// The connection went away.
    Gone,
    /// The watcher is further behind than its byte bound; the watch is over.
    TooSlow,
}

impl Outbox {
    fn new(max_bytes: usize) -> Arc<Self> {
        Arc::new(Outbox {
            state: Mutex::new(Queued::default()),
            queued: Notify::new(),
            taken: Notify::new(),
            max_bytes,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a line, waiting while the queue is full. A `live` event that does not fit in
    /// the byte bound ends the watch instead ([`NotQueued::TooSlow`]); other lines (initial
    /// objects, the logged backlog) wait for room, as a list would. A line larger
    /// than the bound alone is queued when the queue is empty.
    async fn send(&self, line: Bytes, live: bool) -> Result<(), NotQueued> {
        loop {
            {
                let mut q = self.lock();
                if q.gone {
                    return Err(NotQueued::Gone);
                }
                let fits = q.lines.is_empty() || q.bytes + line.len() <= self.max_bytes;
                if !fits && live {
                    q.lines.clear();
                    q.bytes = 0;
                    q.ended = true;
                    self.queued.notify_one();
                    return Err(NotQueued::TooSlow);
                }
                if fits && q.lines.len() < WATCH_QUEUE {
                    q.bytes += line.len();
                    q.lines.push_back(line);
                    self.queued.notify_one();
                    return Ok(());
                }
            }
            self.taken.notified().await;
        }
    }

    /// Queues a line if it fits now; otherwise drops it.
    fn offer(&self, line: Bytes) {
        let mut q = self.lock();
        let fits = q.lines.len() < WATCH_QUEUE && q.bytes + line.len() <= self.max_bytes;
        if fits && !q.ended {
            q.bytes += line.len();
            q.lines.push_back(line);
            self.queued.notify_one();
        }
    }

    /// Queues a last line whatever the bounds and ends the queue.
    fn finish(&self, line: Option<Bytes>) {
        let mut q = self.lock();
        if let Some(line) = line {
            q.bytes += line.len();
            q.lines.push_back(line);
        }
        q.ended = true;
        self.queued.notify_one();
    }

    /// Returns once the connection has gone away.
    async fn closed(&self) {
        while !self.lock().gone {
            self.taken.notified().await;
        }
    }

    /// The next line for the connection; None once the queue has ended and is empty.
    async fn take(&self) -> Option<Bytes> {
        loop {
            {
                let mut q = self.lock();
                if let Some(line) = q.lines.pop_front() {
                    q.bytes -= line.len();
                    self.taken.notify_one();
                    return Some(line);
                }
                if q.ended {
                    return None;
                }
            }
            self.queued.notified().await;
        }
    }
}

/// The response body's hold on an [`Outbox`]: dropped with the body when the connection goes
/// away, which tells the watch task.
struct Draining(Arc<Outbox>);

impl Drop for Draining {
    fn drop(&mut self) {
        self.0.lock().gone = true;
        self.0.taken.notify_one();
    }
}

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

fn streaming(outbox: Arc<Outbox>) -> Response {
    let stream = futures_util::stream::unfold(Draining(outbox), |d| async move {
        let line = d.0.take().await?;
        Some((Ok::<Bytes, Infallible>(line), d))
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
        self.ns.as_deref().is_none_or(|ns| attrs.namespace() == ns) && self.sel.matches_attrs(attrs)
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
    let outbox = Outbox::new(req.st.watch_backlog_bytes);
    let start = match req.st.store.watch(info.storage, from) {
        Ok(s) => s,
        Err(e) => {
            // Too old: 200 with one in-stream ERROR, as the real cacher answers.
            outbox.finish(Some(watch_line("ERROR", &e.to_status())));
            return Ok(streaming(outbox));
        }
    };
    let interval = req.st.bookmark_interval;
    let tx = outbox.clone();
    tokio::spawn(async move {
        let mut last_rv = start.rv;
        let mut live = start.live;
        // What the watch starts from is sent only once it is durable, as every event after.
        if !live.wait_durable(start.rv).await {
            tx.finish(None);
            return;
        }
        let initial = start.initial.iter().map(store::decode);
        for obj in initial.filter(|o| filter.matches(o)) {
            if tx.send(filter.encode("ADDED", &obj), false).await.is_err() {
                return;
            }
        }
        if send_initial
            && tx
                .send(filter.bookmark(start.rv, true), false)
                .await
                .is_err()
        {
            return;
        }
        for ev in &start.backlog {
            if let Some(line) = filter.event(ev) {
                if tx.send(line, false).await.is_err() {
                    return;
                }
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        let sent = loop {
            tokio::select! {
                () = &mut deadline => break Ok(()),
                () = tx.closed() => return,
                _ = ticker.tick(), if bookmarks => {
                    // A watcher whose queue is full is skipped, as upstream does: it gets
                    // the next one.
                    tx.offer(filter.bookmark(last_rv, false));
                }
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= start.rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        if let Some(line) = filter.event(&ev) {
                            // The deadline holds while the line waits for room.
                            let sent = tokio::select! {
                                sent = tx.send(line, true) => sent,
                                () = &mut deadline => break Ok(()),
                            };
                            if let Err(e) = sent {
                                break Err(e);
                            }
                        }
                    }
                    Err(RecvError::Lagged) => {
                        // Too slow: end with 410 so the client relists, rather than block writers.
                        let e = ApiError::expired(last_rv, last_rv + 1);
                        tx.finish(Some(watch_line("ERROR", &e.to_status())));
                        return;
                    }
                    Err(RecvError::Closed) => break Ok(()),
                },
            }
        };
        if sent == Err(NotQueued::TooSlow) {
            tracing::warn!(
                resource = filter.info.resource,
                rv = last_rv,
                max_bytes = tx.max_bytes,
                "forcing watcher close due to unresponsiveness: its unsent events passed the byte bound"
            );
        }
        tx.finish(None);
    });
    Ok(streaming(outbox))
}

#[cfg(test)]
mod tests {
    use std::future::Future as _;

    use super::*;

    fn line(byte: u8, len: usize) -> Bytes {
        Bytes::from(vec![byte; len])
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    #[test]
    fn a_live_line_past_the_byte_bound_ends_the_watch_and_drops_what_is_queued() {
        let o = Outbox::new(10);
        let got = block_on(async {
            let first = o.send(line(b'a', 6), true).await;
            // A bookmark that does not fit is dropped, not waited for.
            o.offer(line(b'b', 6));
            let queued = o.lock().lines.len();
            let second = o.send(line(b'c', 6), true).await;
            let bytes = o.lock().bytes;
            let left = (bytes, o.take().await);
            (first, queued, second, left)
        });
        assert_eq!(got, (Ok(()), 1, Err(NotQueued::TooSlow), (0, None)));
    }

    #[test]
    fn a_line_larger_than_the_bound_is_sent_alone() {
        let o = Outbox::new(10);
        let got = block_on(async {
            let sent = o.send(line(b'a', 25), true).await;
            (sent, o.take().await.map(|l| l.len()))
        });
        assert_eq!(got, (Ok(()), Some(25)));
    }

    #[test]
    fn an_initial_line_waits_for_room_instead_of_ending_the_watch() {
        let o = Outbox::new(10);
        let got = block_on(async {
            let first = o.send(line(b'a', 6), false).await;
            let mut second = std::pin::pin!(o.send(line(b'b', 6), false));
            let waiting = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(second.as_mut().poll(cx).is_pending())
            })
            .await;
            let taken = o.take().await.map(|l| l.len());
            let second = second.await;
            (first, waiting, taken, second, o.lock().bytes)
        });
        assert_eq!(got, (Ok(()), true, Some(6), Ok(()), 6));
    }

    /// With `--data-dir`, a get, a list and a watch answer only once the writes they show
    /// are fsynced: what a client sees, a crash cannot undo.
    #[test]
    fn reads_and_watches_wait_for_the_fsync_of_what_they_show() {
        use crate::http::{handle, AppState};

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Arc::new(
            crate::Store::open(16, dir.path(), 1 << 20, false).unwrap_or_else(|e| panic!("{e}")),
        );
        let ns = crate::resources::lookup("", "v1", "namespaces").unwrap_or_else(|| panic!());
        store
            .create(
                ns,
                "",
                serde_json::json!({"metadata": {"name": "default"}}),
                false,
            )
            .unwrap_or_else(|e| panic!("{e:?}"));
        let st = Arc::new(AppState {
            store: store.clone(),
            max_body_bytes: 1 << 20,
            addr: ([127, 0, 0, 1], 0).into(),
            bookmark_interval: Duration::from_secs(30),
            tokens: Vec::new(),
            snapshots: crate::paging::Snapshots::new(4),
            cors_allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            watch_backlog_bytes: 1 << 20,
            garbage_collector: false,
            disabled_api_groups: Vec::new(),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(store.sync())
            .unwrap_or_else(|e| panic!("{e:?}"));
        let wal = store.wal().unwrap_or_else(|| panic!("a data directory"));
        wal.hold_fsync(true);
        let pods = crate::resources::lookup("", "v1", "pods").unwrap_or_else(|| panic!());
        let pod =
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}});
        store
            .create(pods, "default", pod, false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let get = |uri: &str| {
            let req = axum::http::Request::get(uri)
                .body(Body::empty())
                .unwrap_or_else(|e| panic!("{e}"));
            handle(st.clone(), req)
        };
        let paths = [
            "/api/v1/namespaces/default/pods/a",
            "/api/v1/namespaces/default/pods",
            "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=5",
        ];
        let mut reads: Vec<_> = paths.iter().map(|p| Box::pin(get(p))).collect();
        // Each read polled once while the fsync is held: its status if it answered.
        let answered: Vec<Option<u16>> = rt.block_on(std::future::poll_fn(|cx| {
            let polled = reads.iter_mut().map(|r| match r.as_mut().poll(cx) {
                std::task::Poll::Ready(resp) => Some(resp.status().as_u16()),
                std::task::Poll::Pending => None,
            });
            std::task::Poll::Ready(polled.collect())
        }));
        wal.hold_fsync(false);
        let pending_before: Vec<bool> = answered.iter().map(Option::is_none).collect();
        let codes: Vec<u16> = reads
            .into_iter()
            .zip(answered)
            .map(|(r, a)| a.unwrap_or_else(|| rt.block_on(r).status().as_u16()))
            .collect();
        assert_eq!((pending_before, codes), (vec![true; 3], vec![200; 3]));
    }
}
