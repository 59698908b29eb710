//! A load check of the API server over loopback: pod creates/s, binds/s, and watch events/s
//! delivered to concurrent watchers, with kube-rs (the scheduler's client) as the client.
//!
//! By default the server runs in this process and shares its cores with the clients. With
//! `--server URL` the clients drive a server in another process (`kubesched apiserver`, as
//! users run it), so the two are scheduled, and measured, apart. Bounded in count and time:
//!
//! ```sh
//! cargo run --release -p kubesched-apiserver --example load -- [PODS] [CONCURRENCY] [WATCHERS] [DATA_DIR]
//! cargo run --release -p kubesched-apiserver --example load -- PODS CONCURRENCY WATCHERS --server http://127.0.0.1:PORT
//! ```
//!
//! An `https://` URL (a server started with `--tls-cert-file`) is reached without verifying
//! its certificate. With DATA_DIR the in-process server logs every write there and fsyncs before acknowledging
//! it. Each run works in a namespace of its own (`load-<pid>`), so runs against one external
//! server do not collide.

use std::error::Error;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// The whole run stops after this, finished or not.
const DEADLINE: Duration = Duration::from_secs(120);

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

async fn run_phase<F, Fut>(concurrency: usize, pods: usize, f: F) -> Result<Duration>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while i < pods {
                f(i).await?;
                i += concurrency;
            }
            Ok::<(), Box<dyn Error + Send + Sync>>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(start.elapsed())
}

fn main() -> Result<()> {
    let (pods, concurrency, watchers) = (arg(1, 5000), arg(2, 32), arg(3, 10));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        tokio::time::timeout(DEADLINE, run(pods, concurrency, watchers))
            .await
            .map_err(|_| format!("did not finish within {DEADLINE:?}"))?
    })
}

async fn run(pods: usize, concurrency: usize, watchers: usize) -> Result<()> {
    let external = match (std::env::args().nth(4).as_deref(), std::env::args().nth(5)) {
        (Some("--server"), Some(url)) => Some(url),
        (Some("--server"), None) => return Err("--server needs a URL".into()),
        _ => None,
    };
    let server = match external {
        Some(_) => None,
        None => {
            let config = apiserver::Config {
                listen: ([127, 0, 0, 1], 0).into(),
                data_dir: std::env::args().nth(4).map(std::path::PathBuf::from),
                ..apiserver::Config::default()
            };
            Some(apiserver::Server::start(config).await?)
        }
    };
    let url = match (&external, &server) {
        (Some(url), _) => url.clone(),
        (None, Some(s)) => s.url(),
        (None, None) => return Err("no server".into()),
    };
    let mut config = kube::Config::new(url.parse()?);
    // An https:// server here is one on loopback with a test certificate: its cost is the
    // TLS work, which verification would not change.
    config.accept_invalid_certs = url.starts_with("https://");
    let client = kube::Client::try_from(config)?;
    let namespace = format!("load-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);

    // Each watcher expects one ADDED and one MODIFIED (the binding) per pod.
    let expected = 2 * pods;
    let mut watching = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let mut stream = api
            .watch(&WatchParams::default().timeout(290), "0")
            .await?
            .boxed();
        watching.push(tokio::spawn(async move {
            let mut seen = 0usize;
            while seen < expected {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_) | WatchEvent::Modified(_))) => seen += 1,
                    Some(Ok(WatchEvent::Error(e))) => {
                        return Err(format!(
                            "watcher dropped after {seen} events: {}",
                            e.message
                        ))
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(format!("watch failed: {e}")),
                    None => return Err(format!("watch ended after {seen} events")),
                }
            }
            Ok(Instant::now())
        }));
    }

    let start = Instant::now();
    let create_api = api.clone();
    let created = run_phase(concurrency, pods, move |i| {
        let api = create_api.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                          "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}))?;
            api.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    })
    .await?;
    let bind_api = api.clone();
    let bound = run_phase(concurrency, pods, move |i| {
        let api = bind_api.clone();
        async move {
            let name = format!("p{i}");
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": format!("n{}", i % 100)}});
            let _: Value = api
                .create_subresource("binding", &name, &PostParams::default(), &binding)
                .await?;
            Ok(())
        }
    })
    .await?;
    let mut last = start;
    for w in watching {
        last = last.max(w.await??);
    }
    let delivered = start.elapsed().max(last - start);
    let per_sec = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
    let place = if server.is_some() {
        "in process"
    } else {
        "in another process"
    };
    println!("pods {pods}, client concurrency {concurrency}, watchers {watchers}, server {place}");
    println!("creates: {:>8.0}/s ({created:?})", per_sec(pods, created));
    println!("binds:   {:>8.0}/s ({bound:?})", per_sec(pods, bound));
    println!(
        "watch events delivered: {:>8.0}/s over {watchers} watchers ({} events in {delivered:?})",
        per_sec(expected * watchers, delivered),
        expected * watchers
    );
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
