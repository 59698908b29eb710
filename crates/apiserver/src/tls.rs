//! HTTPS: the certificate and key given with `--tls-cert-file`/`--tls-private-key-file`,
//! served with rustls (ring provider); the connection loop (`serve`) runs each handshake in
//! the connection's own task, bounded by `HANDSHAKE_TIMEOUT`.
//!
//! Upstream: kube-apiserver's `--tls-cert-file`/`--tls-private-key-file` (PEM; the
//! certificate file may carry intermediates after the serving certificate), and its
//! `--cert-dir`, where it keeps a self-signed certificate it generates when given none.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Errors loading the serving certificate and key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is not PEM or holds no item of the expected kind.
    #[error("{}: no {what} in PEM form: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// "certificate" or "private key".
        what: &'static str,
        /// What the PEM parser said.
        reason: String,
    },
    /// A self-signed certificate could not be made or written.
    #[error("generating a self-signed certificate in {}: {reason}", dir.display())]
    Generate {
        /// The certificate directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, an unsupported
    /// key type).
    #[error("certificate {} with key {}: {reason}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A loaded serving certificate: the rustls configuration and the certificate in PEM, which
/// a kubeconfig carries as `certificate-authority-data` so clients verify a self-signed
/// certificate.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    server: Arc<ServerConfig>,
    cert_pem: Vec<u8>,
}

impl TlsConfig {
    /// Reads a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_files(cert: &Path, key: &Path) -> Result<TlsConfig, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_path_buf(),
                source,
            })
        };
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        Self::from_pem_named(cert_pem, &key_pem, cert, key)
    }

    /// [`TlsConfig::from_files`] on PEM already in memory (tests, generated certificates).
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsConfig, TlsError> {
        Self::from_pem_named(
            cert_pem.to_vec(),
            key_pem,
            Path::new("certificate"),
            Path::new("private key"),
        )
    }

    fn from_pem_named(
        cert_pem: Vec<u8>,
        key_pem: &[u8],
        cert: &Path,
        key: &Path,
    ) -> Result<TlsConfig, TlsError> {
        let pem_error = |path: &Path, what, reason: String| TlsError::Pem {
            path: path.to_path_buf(),
            what,
            reason,
        };
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_error(cert, "certificate", e.to_string()))?;
        if chain.is_empty() {
            return Err(pem_error(
                cert,
                "certificate",
                "no CERTIFICATE block".into(),
            ));
        }
        let private_key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| pem_error(key, "private key", e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private_key))
            .map_err(|e| TlsError::Pair {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                reason: match e {
                    rustls::Error::InconsistentKeys(_) => {
                        "the private key does not belong to the certificate".to_string()
                    }
                    other => other.to_string(),
                },
            })?;
        // The API is served over HTTP/1.1 only: ALPN says so, and clients that offer h2
        // (kubectl does) fall back to it.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsConfig {
            server: Arc::new(server),
            cert_pem,
        })
    }

    /// The certificate in `dir` (`apiserver.crt`, `apiserver.key`), made there first if it is
    /// not: self-signed, ECDSA P-256, for `hosts` (IP addresses and DNS names), valid for a
    /// year from the start of the current month. A later start reuses it, so kubeconfigs
    /// written before stay valid.
    pub fn self_signed_in(dir: &Path, hosts: &[String]) -> Result<TlsConfig, TlsError> {
        let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        if cert.exists() || key.exists() {
            return Self::from_files(&cert, &key);
        }
        let generate = |reason: String| TlsError::Generate {
            dir: dir.to_path_buf(),
            reason,
        };
        let mut params =
            rcgen::CertificateParams::new(hosts.to_vec()).map_err(|e| generate(e.to_string()))?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kubesched-apiserver");
        // The current year and month from `YYYY-MM-…`.
        let now = crate::meta::now_rfc3339();
        let year: i32 = now.get(..4).and_then(|y| y.parse().ok()).unwrap_or(2026);
        let month: u8 = now.get(5..7).and_then(|m| m.parse().ok()).unwrap_or(1);
        params.not_before = rcgen::date_time_ymd(year, month, 1);
        params.not_after = rcgen::date_time_ymd(year + 1, month, 1);
        let key_pair = rcgen::KeyPair::generate().map_err(|e| generate(e.to_string()))?;
        let certificate = params
            .self_signed(&key_pair)
            .map_err(|e| generate(e.to_string()))?;
        let (cert_pem, key_pem) = (certificate.pem(), key_pair.serialize_pem());
        let write = |path: &Path, text: &str, private: bool| -> Result<(), TlsError> {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            if private {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            #[cfg(not(unix))]
            let _ = private;
            let mut file = options
                .open(path)
                .map_err(|e| generate(format!("{}: {e}", path.display())))?;
            std::io::Write::write_all(&mut file, text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| generate(format!("{}: {e}", path.display())))
        };
        std::fs::create_dir_all(dir).map_err(|e| generate(e.to_string()))?;
        write(&key, &key_pem, true)?;
        write(&cert, &cert_pem, false)?;
        Self::from_pem_named(cert_pem.into_bytes(), key_pem.as_bytes(), &cert, &key)
    }

    /// The certificate chain as given, in PEM.
    pub fn cert_pem(&self) -> &[u8] {
        &self.cert_pem
    }

    /// An acceptor that runs the server side of handshakes with this certificate.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.server.clone())
    }
}

/// The self-signed certificate's file in a `--cert-dir` (upstream's name).
pub const CERT_FILE: &str = "apiserver.crt";
/// Its private key's file.
pub const KEY_FILE: &str = "apiserver.key";

/// A client that has not finished its handshake in this time is disconnected.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed() -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap_or_else(|e| unreachable!("{e}"));
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    #[test]
    fn loads_a_matching_pair_and_keeps_the_certificate_pem() {
        let (cert, key) = self_signed();
        let loaded = TlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).map(|c| c.cert_pem);
        assert_eq!(loaded.ok(), Some(cert.into_bytes()));
    }

    #[test]
    fn a_cert_dir_gets_a_certificate_once_and_reuses_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let certs = dir.path().join("certs");
        let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
        let first = TlsConfig::self_signed_in(&certs, &hosts).map(|c| c.cert_pem);
        let again = TlsConfig::self_signed_in(&certs, &hosts).map(|c| c.cert_pem);
        #[cfg(unix)]
        let key_mode = {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(certs.join(KEY_FILE))
                .map(|m| m.permissions().mode() & 0o777)
                .ok()
        };
        #[cfg(not(unix))]
        let key_mode = Some(0o600);
        let on_disk = std::fs::read(certs.join(CERT_FILE)).ok();
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(
            (again.ok(), key_mode),
            (first.as_ref().ok().cloned(), Some(0o600))
        );
        assert_eq!(on_disk, first.ok());
    }

    #[test]
    fn rejects_bad_input_naming_the_file() {
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| unreachable!("{e}"));
            path
        };
        let (cert_file, key_file) = (write("tls.crt", &cert), write("tls.key", &key));
        let other_key_file = write("other.key", &other_key);
        let garbage = write("garbage", "not pem\n");
        let missing = dir.path().join("missing.crt");
        let d = dir.path().display();
        let cases = [
            (&missing, &key_file, format!("reading {d}/missing.crt: No such file or directory (os error 2)")),
            (&garbage, &key_file, format!("{d}/garbage: no certificate in PEM form: no CERTIFICATE block")),
            (&cert_file, &garbage, format!("{d}/garbage: no private key in PEM form: no items found")),
            (&key_file, &key_file, format!("{d}/tls.key: no certificate in PEM form: no CERTIFICATE block")),
            (&cert_file, &other_key_file, format!("certificate {d}/tls.crt with key {d}/other.key: the private key does not belong to the certificate")),
        ];
        for (c, k, want) in cases {
            let got = TlsConfig::from_files(c, k)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(got, Err(want));
        }
    }
}
