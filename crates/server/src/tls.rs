//! HTTPS served by the server itself (`--tls-cert`, `--tls-key`): the certificate chain and
//! key are read once at start, and every accepted connection does its handshake with them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The PEM files of `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why the certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}: {error} (--tls-cert wants a PEM file: the server certificate, then its intermediates)")]
    Cert {
        path: PathBuf,
        error: rustls_pki_types::pem::Error,
    },
    #[error("the TLS certificate file {0} holds no certificate (--tls-cert wants PEM `BEGIN CERTIFICATE` blocks)")]
    NoCert(PathBuf),
    #[error("cannot read the TLS key {path}: {error} (--tls-key wants a PEM private key: PKCS#8, PKCS#1 or SEC1)")]
    Key {
        path: PathBuf,
        error: rustls_pki_types::pem::Error,
    },
    #[error("the TLS key {key} does not fit the certificate {cert}: {error} (give the key the certificate was issued for)")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        error: rustls::Error,
    },
}

impl TlsFiles {
    /// Reads both files and checks that the key belongs to the certificate.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let certs = read_certs(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|error| TlsError::Key {
            path: self.key.clone(),
            error,
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mismatch = |error| TlsError::Mismatch {
            cert: self.cert.clone(),
            key: self.key.clone(),
            error,
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(mismatch)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(mismatch)?;
        // The listener speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|error| TlsError::Cert {
            path: path.to_path_buf(),
            error,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert(path.to_path_buf()));
    }
    Ok(certs)
}
