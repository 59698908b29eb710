//! Connections: the accept loop, the limit on open connections, and the two timeouts that
//! close a connection which sends nothing useful.
//!
//! Each connection is served by hyper (HTTP/1.1, over TLS when configured) in its own task,
//! with a watchdog beside it that knows whether a request is in flight: a request counts
//! from its head until its response body is done, so a watch, however long, keeps its
//! connection. A new connection must send its first request head within the header-read
//! timeout; after a response, a kept-alive connection must start its next request within
//! the idle timeout and, once it has sent a first byte, finish the head within the
//! header-read timeout; otherwise it is closed.
//!
//! At the connection limit, the connection idle longest is closed to make room for the new
//! one, so a client (a `/healthz` probe) still gets in while idle or stalled sockets fill the
//! limit; only when every connection has a request in flight is a new one refused. Running
//! out of file descriptors below the limit closes the idlest connection the same way.
//!
//! Upstream: kube-apiserver's HTTP server closes idle keep-alive connections after 90 s and
//! gives a client 32 s to send a request head (secure_serving.go); it has no connection
//! limit (it limits requests in flight instead). Where this differs, on purpose: the idle
//! and header timers are one watchdog per connection rather than socket deadlines, and the
//! limit exists because a local server has one process's file descriptors to share.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::http::{self, AppState};

/// How connections are bounded (see [`crate::Config`] for each field).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

/// After closing an idle connection to make room, how long to wait for its slot. Its task
/// ends as soon as it is told, so this only bounds a stalled runtime.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Pause after a failed accept (out of file descriptors and the like), as axum's own
/// listener does, so a persistent error does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts and serves connections until `stop` fires, then asks every connection to finish
/// its requests and waits for them. Dropping the returned future (the server task aborted
/// by [`crate::Server::shutdown`]) drops every connection at once, open watches included.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    state: Arc<AppState>,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let open = Arc::new(Registry::default());
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    // Warn once each time the limit is reached, not once per connection.
    let mut at_limit = false;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
            // Reap finished connection tasks so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (tcp, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                // Out of file descriptors: an idle connection gives one back.
                open.evict_idlest();
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                at_limit = false;
                slot
            }
            Err(_) => {
                let evicted = open.evict_idlest();
                if !at_limit {
                    at_limit = true;
                    tracing::warn!(
                        limit = limits.max_connections,
                        "at the connection limit: closing the idlest connection for each new \
                         one, refusing new ones while every connection has a request in flight"
                    );
                }
                let slot = if evicted {
                    tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok)
                } else {
                    None
                };
                match slot {
                    Some(slot) => slot,
                    None => {
                        tracing::debug!(%peer, "connection refused at the connection limit");
                        continue;
                    }
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let activity = open.register();
        let (tls, state, open, shutdown) = (
            tls.clone(),
            state.clone(),
            open.clone(),
            shutdown_rx.clone(),
        );
        connections.spawn(async move {
            connection(tcp, tls, state, activity.clone(), limits, shutdown).await;
            open.remove(activity.id);
            drop(slot);
        });
    }
    drop(listener);
    let _ = shutdown.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection: the TLS handshake if any, then HTTP/1.1 under the watchdog.
async fn connection(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    state: Arc<AppState>,
    activity: Arc<Activity>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    let io = Watched {
        inner: tcp,
        activity: activity.clone(),
    };
    match tls {
        None => serve_http(io, state, activity, limits, shutdown).await,
        Some(acceptor) => {
            let handshake =
                tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, acceptor.accept(io));
            // A connection still in its handshake has no request in flight: closing it to
            // make room must not wait for the handshake timeout.
            let shaken = tokio::select! {
                shaken = handshake => shaken,
                () = activity.evicted() => return,
            };
            match shaken {
                Ok(Ok(tls)) => serve_http(tls, state, activity, limits, shutdown).await,
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<I>(
    io: I,
    state: Arc<AppState>,
    activity: Arc<Activity>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let busy = InFlight::start(activity.clone());
            let state = state.clone();
            async move {
                let response = http::handle(state, req.map(axum::body::Body::new)).await;
                Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times request heads; hyper's own timer would also run while a kept-alive
    // connection waits for its next request, cutting it at the header timeout.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut stopping = *shutdown.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = activity.deadline(limits);
        let expired = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = expired => {
                if activity.deadline(limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing a connection with no request in time");
                    return;
                }
            }
            () = activity.changed.notified() => {}
            changed = shutdown.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// What the watchdog of one connection knows.
#[derive(Debug)]
struct Activity {
    id: u64,
    state: Mutex<ActivityState>,
    /// Woken when a request starts or ends, a request head starts, or the connection is to
    /// be closed to make room.
    changed: Notify,
}

#[derive(Debug)]
struct ActivityState {
    /// Requests whose response is not finished.
    in_flight: usize,
    /// When the connection last had nothing in flight (accepted, or the last response done).
    idle_since: Instant,
    /// When the request head being waited for started: the accept for the first request,
    /// the first byte after `idle_since` for later ones.
    head_since: Option<Instant>,
    /// Close it as soon as nothing is in flight.
    evict: bool,
}

impl Activity {
    fn new(id: u64) -> Activity {
        let now = Instant::now();
        Activity {
            id,
            state: Mutex::new(ActivityState {
                in_flight: 0,
                idle_since: now,
                // A new connection is there to send a request: its first head is timed from
                // the accept, as Go's server (upstream) times it.
                head_since: Some(now),
                evict: false,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ActivityState> {
        // Every update is a few assignments that cannot panic halfway.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When the connection is to be closed if nothing changes; None while a request is in
    /// flight.
    fn deadline(&self, limits: Limits) -> Option<Instant> {
        let s = self.lock();
        if s.in_flight > 0 {
            return None;
        }
        if s.evict {
            return Some(s.idle_since);
        }
        Some(match s.head_since {
            Some(at) => at + limits.header_read_timeout,
            None => s.idle_since + limits.idle_timeout,
        })
    }

    /// Returns once the connection is told to close to make room.
    async fn evicted(&self) {
        loop {
            if self.lock().evict {
                return;
            }
            self.changed.notified().await;
        }
    }

    /// Bytes arrived: with nothing in flight they start a request head.
    fn received(&self) {
        let mut s = self.lock();
        if s.in_flight == 0 && s.head_since.is_none() {
            s.head_since = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }
}

/// A request in flight, from its head until its response body is done or dropped.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: Arc<Activity>) -> InFlight {
        {
            let mut s = activity.lock();
            s.in_flight += 1;
            s.head_since = None;
        }
        activity.changed.notify_one();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut s = self.0.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.in_flight == 0 {
                s.idle_since = Instant::now();
                s.head_since = None;
            }
        }
        self.0.changed.notify_one();
    }
}

/// A response body that keeps its request in flight until it is done.
struct Tracked {
    body: axum::body::Body,
    _busy: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, telling the watchdog when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The open connections, for choosing one to close at the limit.
#[derive(Debug, Default)]
struct Registry {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        // Inserts and removes only: a panic cannot leave the map half-changed.
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn register(&self) -> Arc<Activity> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(id));
        self.lock().insert(id, activity.clone());
        activity
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Tells the connection idle longest (no request in flight, whether or not a request head
    /// has started) to close. False when every connection has a request in flight.
    fn evict_idlest(&self) -> bool {
        let idlest = self
            .lock()
            .values()
            .filter_map(|a| {
                let s = a.lock();
                (s.in_flight == 0 && !s.evict).then(|| (s.idle_since, a.clone()))
            })
            .min_by_key(|(since, _)| *since);
        let Some((_, activity)) = idlest else {
            return false;
        };
        activity.lock().evict = true;
        activity.changed.notify_one();
        true
    }
}
