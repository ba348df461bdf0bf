//! The one place the client side's HTTP clients are made: every request of the client side
//! (Batch API, CAS, token refresh, the pre-receive check) goes through a client from
//! [`HttpFactory`], so they all trust the same certificates, use the same proxy and send the
//! same extra headers. Each starts from [`git_xet_io::http::builder`], the base the server's
//! ssh relay shares.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, RequestBuilder};

use super::error::{classify, TransportError};
use super::settings::{HttpSettings, Resolved};

/// Builds (and keeps, per TLS configuration) the HTTP clients.
///
/// A clone shares the settings but not the clients: a client's pooled connections are
/// driven by the runtime that opened them, and the filter runs the Batch API and the CAS
/// client on different runtimes, so each user of the factory holds its own clone.
#[derive(Default)]
pub struct HttpFactory {
    settings: Arc<HttpSettings>,
    clients: Mutex<HashMap<TlsKey, reqwest::Client>>,
}

impl Clone for HttpFactory {
    fn clone(&self) -> Self {
        HttpFactory {
            settings: self.settings.clone(),
            clients: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for HttpFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFactory")
            .field("configured", &!self.settings.is_empty())
            .finish()
    }
}

/// What makes two clients differ: everything else is decided per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TlsKey {
    ca_info: Option<std::path::PathBuf>,
    ca_path: Option<std::path::PathBuf>,
    verify: bool,
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
}

impl HttpFactory {
    pub fn new(settings: HttpSettings) -> HttpFactory {
        HttpFactory {
            settings: Arc::new(settings),
            clients: Mutex::default(),
        }
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// The settings that apply to `url`.
    pub fn resolve(&self, url: &str) -> Resolved {
        self.settings.resolve(url)
    }

    /// The client for requests to `url` (and to other URLs of the same exchange: the proxy
    /// and extra headers are chosen per request).
    pub fn client_for(&self, url: &str) -> Result<reqwest::Client, TransportError> {
        let r = self.settings.resolve(url);
        let key = TlsKey {
            ca_info: r.ca_info,
            ca_path: r.ca_path,
            verify: r.verify,
            cert: r.cert,
            key: r.key,
        };
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let client = self.build(&key)?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// A request to `url` with the extra headers that apply to it.
    pub fn request(&self, method: Method, url: &str) -> Result<RequestBuilder, TransportError> {
        Ok(self.with_extra_headers(self.client_for(url)?.request(method, url), url))
    }

    /// `request` with `http.extraHeader` values that apply to `url` added.
    pub fn with_extra_headers(&self, mut request: RequestBuilder, url: &str) -> RequestBuilder {
        for (name, value) in self.settings.resolve(url).extra_headers {
            request = request.header(name, value);
        }
        request
    }

    /// Sorts a failed request to `url` by kind.
    pub fn classify(&self, url: &str, e: &reqwest::Error) -> TransportError {
        let proxy = self.settings.resolve(url).proxy;
        classify(url, proxy.as_deref(), e)
    }

    fn build(&self, key: &TlsKey) -> Result<reqwest::Client, TransportError> {
        let settings = self.settings.clone();
        let proxy = reqwest::Proxy::custom(move |url| {
            settings
                .resolve(url.as_str())
                .proxy
                .and_then(|p| reqwest::Url::parse(&p).ok())
        });
        let mut builder = git_xet_io::http::builder()
            .read_timeout(Duration::from_secs(120))
            .proxy(proxy);
        if let Some(file) = &key.ca_info {
            for cert in read_certificates(file, "http.sslCAInfo")? {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(dir) = &key.ca_path {
            let entries = std::fs::read_dir(dir).map_err(|e| TransportError::Settings {
                setting: format!("http.sslCAPath {}", dir.display()),
                detail: e.to_string(),
            })?;
            for entry in entries.flatten() {
                // A CA directory holds hash links and other files too: take what parses.
                if let Ok(certs) = read_certificates(&entry.path(), "http.sslCAPath") {
                    for cert in certs {
                        builder = builder.add_root_certificate(cert);
                    }
                }
            }
        }
        if !key.verify {
            tracing::debug!("TLS certificate verification is off (http.sslVerify)");
            builder = builder.danger_accept_invalid_certs(true);
        }
        if let Some(cert) = &key.cert {
            builder = builder.identity(read_identity(cert, key.key.as_deref())?);
        }
        builder.build().map_err(|e| TransportError::Settings {
            setting: "HTTP client".into(),
            // With its causes: reqwest's own text is only "builder error".
            detail: git_xet_io::error_chain::chain(&e),
        })
    }
}

fn read_certificates(
    path: &Path,
    setting: &str,
) -> Result<Vec<reqwest::Certificate>, TransportError> {
    let err = |detail: String| TransportError::Settings {
        setting: format!("{setting} {}", path.display()),
        detail,
    };
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| err(format!("not a PEM certificate bundle: {e}")))?;
    if certs.is_empty() {
        return Err(err("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// A client certificate and its key as one PEM identity (the key from `sslKey`, else from
/// the certificate's file).
fn read_identity(cert: &Path, key: Option<&Path>) -> Result<reqwest::Identity, TransportError> {
    let read = |p: &Path, setting: &str| {
        std::fs::read(p).map_err(|e| TransportError::Settings {
            setting: format!("{setting} {}", p.display()),
            detail: e.to_string(),
        })
    };
    let mut pem = read(cert, "http.sslCert")?;
    if let Some(key) = key {
        pem.push(b'\n');
        pem.extend(read(key, "http.sslKey")?);
    }
    reqwest::Identity::from_pem(&pem).map_err(|e| TransportError::Settings {
        setting: format!("http.sslCert {}", cert.display()),
        detail: format!(
            "not a PEM certificate with an unencrypted PEM key (PKCS#8, RSA or EC): {e}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::settings::HttpKey;

    #[test]
    fn unusable_settings_are_named() {
        let mut s = HttpSettings::default();
        s.push(None, HttpKey::SslCaInfo("/nonexistent/ca.pem".into()));
        let e = HttpFactory::new(s).client_for("https://h/").unwrap_err();
        assert!(
            matches!(&e, TransportError::Settings { setting, .. } if setting.contains("http.sslCAInfo")),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.pem");
        std::fs::write(&bad, "not a certificate").unwrap();
        let mut s = HttpSettings::default();
        s.push(None, HttpKey::SslCert(bad));
        assert!(matches!(
            HttpFactory::new(s).client_for("https://h/"),
            Err(TransportError::Settings { .. })
        ));
    }

    #[test]
    fn clients_are_kept_per_tls_configuration_and_not_shared_by_clones() {
        let f = HttpFactory::default();
        f.client_for("https://a/").unwrap();
        f.client_for("https://b/").unwrap();
        assert_eq!(f.clients.lock().unwrap().len(), 1);
        assert_eq!(f.clone().clients.lock().unwrap().len(), 0);
    }
}
