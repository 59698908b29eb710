//! HTTP extenders: webhooks a configuration's `extenders:` names, consulted at filter,
//! prioritize, preempt and bind.
//!
//! Upstream: pkg/scheduler/extender.go. An [`HttpExtender`] is built once from its
//! `extenders[]` entry and POSTs JSON ([`wire`]) to `urlPrefix/verb`, each call bounded by
//! `httpTimeout` (5 s when unset, as upstream). An `Error` string in a reply is an error, as a
//! non-200 status or an unreadable body is; whether an error fails the attempt is the caller's
//! decision ([`HttpExtender::is_ignorable`]).
//!
//! Where this differs from upstream, on purpose: TLS without a CA trusts no root (upstream
//! falls back to the system roots) unless `enableHTTPS` is set, where both skip verification
//! as upstream does.

pub mod wire;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_rustls::rustls;

use crate::config::{Extender, ExtenderTlsConfig};
use wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult,
    ExtenderPreemptionArgs, ExtenderPreemptionResult, FailedNodesMap, HostPriority, MetaPod,
    MetaVictims, NodeList, Victims,
};

/// Timeout of one call when `httpTimeout` is unset.
///
/// Upstream: DefaultExtenderTimeout.
pub const DEFAULT_EXTENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an extender could not be built or a call to it failed.
#[derive(Debug, thiserror::Error)]
pub enum ExtenderError {
    /// A `tlsConfig` file could not be read.
    #[error("extender {url}: cannot read tlsConfig file {path}")]
    ReadTlsFile {
        url: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The TLS settings do not make a client configuration.
    #[error("extender {url}: invalid tlsConfig: {message}")]
    Tls { url: String, message: String },
    /// The URL made of `urlPrefix` and a verb is not a URL.
    #[error("extender {url}: invalid URL")]
    InvalidUrl {
        url: String,
        #[source]
        source: hyper::http::uri::InvalidUri,
    },
    /// The request could not be sent or its reply not read.
    #[error("{verb} with extender at URL {url}")]
    Transport {
        verb: String,
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No complete reply within `httpTimeout`.
    #[error("{verb} with extender at URL {url} timed out after {timeout:?}")]
    Timeout {
        verb: String,
        url: String,
        timeout: Duration,
    },
    /// The extender answered with a status other than 200.
    #[error("failed {verb} with extender at URL {url}, code {code}")]
    Status {
        verb: String,
        url: String,
        code: u16,
    },
    /// The reply is not the JSON the verb returns.
    #[error("{verb} with extender at URL {url}: cannot decode the reply")]
    Decode {
        verb: String,
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// The reply carries an `Error`.
    #[error("{message}")]
    Extender { message: String },
    /// A filter reply names a node that was not sent.
    #[error(
        "extender {url} claims a filtered node {node} which is not found in the input node list"
    )]
    UnknownNode { url: String, node: String },
    /// A preempt reply names a pod that is not on the node it names.
    #[error(
        "extender {url} claims to preempt pod (UID: {uid}) on node {node}, but the pod is not found on that node"
    )]
    UnknownVictim {
        url: String,
        uid: String,
        node: String,
    },
    /// `ProcessPreemption` on an extender without `preemptVerb`.
    #[error("preempt verb is not defined for extender {url} but run with ProcessPreemption")]
    NoPreemptVerb { url: String },
    /// `Bind` on an extender without `bindVerb`.
    #[error("unexpected empty bindVerb in extender {url}")]
    NoBindVerb { url: String },
}

/// Outcome of a filter call: the nodes that pass, and why the others do not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterResult {
    /// Names of the nodes that pass, as the extender ordered them.
    pub feasible: Vec<String>,
    /// Rejected nodes another pod's preemption might help.
    pub failed: FailedNodesMap,
    /// Rejected nodes preemption cannot help.
    pub failed_and_unresolvable: FailedNodesMap,
}

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One `extenders[]` entry, ready to call.
///
/// Upstream: HTTPExtender.
#[derive(Clone)]
pub struct HttpExtender {
    url_prefix: String,
    filter_verb: String,
    prioritize_verb: String,
    preempt_verb: String,
    bind_verb: String,
    weight: i64,
    timeout: Duration,
    node_cache_capable: bool,
    managed_resources: BTreeSet<String>,
    ignorable: bool,
    client: HttpClient,
}

impl std::fmt::Debug for HttpExtender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpExtender")
            .field("url_prefix", &self.url_prefix)
            .finish_non_exhaustive()
    }
}

impl HttpExtender {
    /// Builds the extender of a validated `extenders[]` entry. Reads the `tlsConfig` files.
    pub fn new(cfg: &Extender) -> Result<HttpExtender, ExtenderError> {
        let url_prefix = cfg.url_prefix.clone();
        let tls = client_tls_config(&url_prefix, cfg.enable_https, cfg.tls_config.as_ref())?;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let builder = match cfg.tls_config.as_ref() {
            Some(t) if !t.server_name.is_empty() => {
                let name = rustls::pki_types::ServerName::try_from(t.server_name.clone()).map_err(
                    |e| ExtenderError::Tls {
                        url: url_prefix.clone(),
                        message: format!("serverName: {e}"),
                    },
                )?;
                builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
            }
            _ => builder,
        };
        let connector = builder.enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpExtender {
            url_prefix,
            filter_verb: cfg.filter_verb.clone(),
            prioritize_verb: cfg.prioritize_verb.clone(),
            preempt_verb: cfg.preempt_verb.clone(),
            bind_verb: cfg.bind_verb.clone(),
            weight: cfg.weight,
            timeout: if cfg.http_timeout.is_zero() {
                DEFAULT_EXTENDER_TIMEOUT
            } else {
                cfg.http_timeout
            },
            node_cache_capable: cfg.node_cache_capable,
            managed_resources: cfg
                .managed_resources
                .iter()
                .map(|r| r.name.clone())
                .collect(),
            ignorable: cfg.ignorable,
            client,
        })
    }

    /// The extender's name in logs and messages: its `urlPrefix`, as upstream.
    pub fn name(&self) -> &str {
        &self.url_prefix
    }

    /// Whether a failure of this extender is skipped instead of failing the attempt.
    pub fn is_ignorable(&self) -> bool {
        self.ignorable
    }

    pub fn is_filter(&self) -> bool {
        !self.filter_verb.is_empty()
    }

    pub fn is_prioritizer(&self) -> bool {
        !self.prioritize_verb.is_empty()
    }

    pub fn is_binder(&self) -> bool {
        !self.bind_verb.is_empty()
    }

    pub fn supports_preemption(&self) -> bool {
        !self.preempt_verb.is_empty()
    }

    pub fn weight(&self) -> i64 {
        self.weight
    }

    /// Whether the extender is consulted for `pod`: always without `managedResources`, else
    /// only when a container or init container requests or limits one of them.
    pub fn is_interested(&self, pod: &Pod) -> bool {
        if self.managed_resources.is_empty() {
            return true;
        }
        let Some(spec) = pod.spec.as_ref() else {
            return false;
        };
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| self.uses_managed_resource(c))
    }

    fn uses_managed_resource(&self, c: &Container) -> bool {
        let Some(res) = c.resources.as_ref() else {
            return false;
        };
        [res.requests.as_ref(), res.limits.as_ref()]
            .into_iter()
            .flatten()
            .any(|m| m.keys().any(|k| self.managed_resources.contains(k)))
    }

    /// Asks which of `nodes` may run `pod`. Without `filterVerb` every node passes.
    pub async fn filter(&self, pod: &Pod, nodes: &[&Node]) -> Result<FilterResult, ExtenderError> {
        let sent: Vec<String> = nodes.iter().map(|n| node_name(n)).collect();
        if !self.is_filter() {
            return Ok(FilterResult {
                feasible: sent,
                ..FilterResult::default()
            });
        }
        let args = self.args(pod, nodes);
        let result: ExtenderFilterResult = self.send(&self.filter_verb, &args).await?;
        if let Some(message) = result.error.filter(|e| !e.is_empty()) {
            return Err(ExtenderError::Extender { message });
        }
        let returned: Vec<String> = match (self.node_cache_capable, result.node_names, result.nodes)
        {
            (true, Some(names), _) => names,
            (_, _, Some(list)) => list.items.iter().map(node_name).collect(),
            _ => Vec::new(),
        };
        let sent: BTreeSet<&str> = sent.iter().map(String::as_str).collect();
        if let Some(node) = returned.iter().find(|n| !sent.contains(n.as_str())) {
            return Err(ExtenderError::UnknownNode {
                url: self.url_prefix.clone(),
                node: node.clone(),
            });
        }
        Ok(FilterResult {
            feasible: returned,
            failed: result.failed_nodes.unwrap_or_default(),
            failed_and_unresolvable: result.failed_and_unresolvable_nodes.unwrap_or_default(),
        })
    }

    /// Asks for the extender's scores of `nodes` (0..=10 each). Without `prioritizeVerb`
    /// every node scores 0.
    pub async fn prioritize(
        &self,
        pod: &Pod,
        nodes: &[&Node],
    ) -> Result<Vec<HostPriority>, ExtenderError> {
        if !self.is_prioritizer() {
            return Ok(nodes
                .iter()
                .map(|n| HostPriority {
                    host: node_name(n),
                    score: 0,
                })
                .collect());
        }
        let args = self.args(pod, nodes);
        let scores: Option<Vec<HostPriority>> = self.send(&self.prioritize_verb, &args).await?;
        Ok(scores.unwrap_or_default())
    }

    /// Asks the extender to bind a pod to a node.
    pub async fn bind(&self, binding: &ExtenderBindingArgs) -> Result<(), ExtenderError> {
        if !self.is_binder() {
            return Err(ExtenderError::NoBindVerb {
                url: self.url_prefix.clone(),
            });
        }
        let result: ExtenderBindingResult = self.send(&self.bind_verb, binding).await?;
        match result.error.filter(|e| !e.is_empty()) {
            Some(message) => Err(ExtenderError::Extender { message }),
            None => Ok(()),
        }
    }

    /// Lets the extender trim the victims the scheduler chose, per node. Nodes the reply
    /// leaves out are dropped; a victim it names must be one of `pods_on_node(node)`.
    pub async fn process_preemption(
        &self,
        pod: &Pod,
        victims: BTreeMap<String, Victims>,
        pods_on_node: impl Fn(&str) -> Vec<Pod>,
    ) -> Result<BTreeMap<String, Victims>, ExtenderError> {
        if !self.supports_preemption() {
            return Err(ExtenderError::NoPreemptVerb {
                url: self.url_prefix.clone(),
            });
        }
        let args = if self.node_cache_capable {
            let meta = victims
                .iter()
                .map(|(node, v)| {
                    let pods = v
                        .pods
                        .iter()
                        .map(|p| MetaPod {
                            uid: p.metadata.uid.clone().unwrap_or_default(),
                        })
                        .collect();
                    (
                        node.clone(),
                        MetaVictims {
                            pods: Some(pods),
                            num_pdb_violations: v.num_pdb_violations,
                        },
                    )
                })
                .collect();
            ExtenderPreemptionArgs {
                pod,
                node_name_to_victims: None,
                node_name_to_meta_victims: Some(meta),
            }
        } else {
            ExtenderPreemptionArgs {
                pod,
                node_name_to_victims: Some(victims),
                node_name_to_meta_victims: None,
            }
        };
        let result: ExtenderPreemptionResult = self.send(&self.preempt_verb, &args).await?;
        let mut kept = BTreeMap::new();
        for (node, meta) in result.node_name_to_meta_victims.unwrap_or_default() {
            let on_node = pods_on_node(&node);
            let mut pods = Vec::new();
            for m in meta.pods.unwrap_or_default() {
                let found = on_node
                    .iter()
                    .find(|p| p.metadata.uid.as_deref() == Some(m.uid.as_str()));
                match found {
                    Some(p) => pods.push(p.clone()),
                    None => {
                        return Err(ExtenderError::UnknownVictim {
                            url: self.url_prefix.clone(),
                            uid: m.uid,
                            node,
                        })
                    }
                }
            }
            kept.insert(
                node,
                Victims {
                    pods,
                    num_pdb_violations: meta.num_pdb_violations,
                },
            );
        }
        Ok(kept)
    }

    fn args<'a>(&self, pod: &'a Pod, nodes: &[&Node]) -> ExtenderArgs<'a> {
        if self.node_cache_capable {
            ExtenderArgs {
                pod,
                nodes: None,
                node_names: Some(nodes.iter().map(|n| node_name(n)).collect()),
            }
        } else {
            ExtenderArgs {
                pod,
                nodes: Some(NodeList {
                    items: nodes.iter().map(|n| (*n).clone()).collect(),
                    metadata: Default::default(),
                }),
                node_names: None,
            }
        }
    }

    /// POSTs `args` as JSON to `urlPrefix/verb` and decodes the 200 reply, all within the
    /// timeout.
    async fn send<A: Serialize, R: DeserializeOwned>(
        &self,
        verb: &str,
        args: &A,
    ) -> Result<R, ExtenderError> {
        let url = format!("{}/{}", self.url_prefix.trim_end_matches('/'), verb);
        let transport =
            |source: Box<dyn std::error::Error + Send + Sync>| ExtenderError::Transport {
                verb: verb.to_string(),
                url: url.clone(),
                source,
            };
        let uri: hyper::Uri = url.parse().map_err(|source| ExtenderError::InvalidUrl {
            url: url.clone(),
            source,
        })?;
        let body = serde_json::to_vec(args).map_err(|e| transport(Box::new(e)))?;
        let request = hyper::Request::post(uri)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| transport(Box::new(e)))?;
        let call = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport(Box::new(e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| transport(Box::new(e)))?
                .to_bytes();
            Ok::<_, ExtenderError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| ExtenderError::Timeout {
                verb: verb.to_string(),
                url: url.clone(),
                timeout: self.timeout,
            })??;
        if status != hyper::StatusCode::OK {
            return Err(ExtenderError::Status {
                verb: verb.to_string(),
                url,
                code: status.as_u16(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| ExtenderError::Decode {
            verb: verb.to_string(),
            url,
            source,
        })
    }
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// The rustls client configuration of an extender. `enableHTTPS` without a CA skips
/// verification, as upstream's transport does.
fn client_tls_config(
    url: &str,
    enable_https: bool,
    tls: Option<&ExtenderTlsConfig>,
) -> Result<rustls::ClientConfig, ExtenderError> {
    let default = ExtenderTlsConfig::default();
    let tls = tls.unwrap_or(&default);
    let read =
        |data: &k8s_openapi::ByteString, file: &str| -> Result<Option<Vec<u8>>, ExtenderError> {
            if !data.0.is_empty() {
                return Ok(Some(data.0.clone()));
            }
            if file.is_empty() {
                return Ok(None);
            }
            std::fs::read(file)
                .map(Some)
                .map_err(|source| ExtenderError::ReadTlsFile {
                    url: url.to_string(),
                    path: file.to_string(),
                    source,
                })
        };
    let tls_error = |message: String| ExtenderError::Tls {
        url: url.to_string(),
        message,
    };
    let ca = read(&tls.ca_data, &tls.ca_file)?;
    let cert = read(&tls.cert_data, &tls.cert_file)?;
    let key = read(&tls.key_data, &tls.key_file)?;
    let insecure = tls.insecure || (enable_https && ca.is_none());

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(e.to_string()))?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = ca {
            use rustls::pki_types::pem::PemObject;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
                let cert = cert.map_err(|e| tls_error(format!("caData: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| tls_error(format!("caData: {e}")))?;
            }
        }
        builder.with_root_certificates(roots)
    };
    match (cert, key) {
        (Some(cert), Some(key)) => {
            use rustls::pki_types::pem::PemObject;
            let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| tls_error(format!("certData: {e}")))?;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| tls_error(format!("keyData: {e}")))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| tls_error(e.to_string()))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(tls_error(
            "a client certificate needs both a certificate and a key".to_string(),
        )),
    }
}

/// Accepts any server certificate (`insecure`), still checking the handshake signatures.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Runs an extender call to completion from the synchronous scheduling cycle, on a scoped
/// thread that drives `runtime`'s I/O and timers: the cycle's thread may itself be inside
/// a runtime (tests, `simulate`), where blocking on it in place would panic. `runtime` must
/// be multi-threaded, or driven by another thread, for the call's timers to fire.
pub fn call_blocking<F>(runtime: &tokio::runtime::Handle, call: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| match s.spawn(|| runtime.block_on(call)).join() {
        Ok(out) => out,
        Err(payload) => std::panic::resume_unwind(payload),
    })
}

/// `e` and its sources, joined with `": "`: a status carries one string, and the cause of a
/// transport error (connection refused, TLS) is what the user needs.
pub fn error_chain(e: &ExtenderError) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// An extender with a preempt verb as DefaultPreemption sees it: its calls block on
/// `runtime` (the plugin runs inside the synchronous scheduling cycle).
#[derive(Debug)]
pub struct PreemptionCaller {
    extender: HttpExtender,
    runtime: tokio::runtime::Handle,
}

impl PreemptionCaller {
    pub fn new(extender: HttpExtender, runtime: tokio::runtime::Handle) -> Self {
        PreemptionCaller { extender, runtime }
    }
}

impl framework::PreemptionExtender for PreemptionCaller {
    fn name(&self) -> &str {
        self.extender.name()
    }

    fn is_ignorable(&self) -> bool {
        self.extender.is_ignorable()
    }

    fn is_interested(&self, pod: &Pod) -> bool {
        self.extender.is_interested(pod)
    }

    fn process_preemption(
        &self,
        pod: &Pod,
        victims: &BTreeMap<String, framework::ExtenderVictims>,
        snapshot: &framework::Snapshot,
    ) -> Result<BTreeMap<String, framework::ExtenderVictims>, String> {
        let sent = victims
            .iter()
            .map(|(node, v)| {
                let pods = v.pods.iter().map(|p| (*p.pod).clone()).collect();
                let v = Victims {
                    pods,
                    num_pdb_violations: v.num_pdb_violations,
                };
                (node.clone(), v)
            })
            .collect();
        let pods_on_node = |node: &str| -> Vec<Pod> {
            snapshot
                .get(node)
                .map(|n| n.pods.iter().map(|p| (*p.pod).clone()).collect())
                .unwrap_or_default()
        };
        let kept = call_blocking(
            &self.runtime,
            self.extender.process_preemption(pod, sent, pods_on_node),
        )
        .map_err(|e| error_chain(&e))?;
        // The extender named pods by UID and each was found on its node: take the
        // snapshot's PodInfo of each.
        Ok(kept
            .into_iter()
            .map(|(node, v)| {
                let on_node = snapshot.get(&node);
                let pods = v
                    .pods
                    .iter()
                    .filter_map(|kept| {
                        on_node?
                            .pods
                            .iter()
                            .find(|p| p.pod.metadata.uid == kept.metadata.uid)
                            .cloned()
                    })
                    .collect();
                let v = framework::ExtenderVictims {
                    pods,
                    num_pdb_violations: v.num_pdb_violations,
                };
                (node, v)
            })
            .collect())
    }
}
