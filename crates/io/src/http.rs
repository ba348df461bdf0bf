//! Where every reqwest client starts: the settings all of them share (rustls, the
//! platform's root certificates read once per process, the user agent, the connect timeout,
//! no Nagle delay). The client side adds git's HTTP
//! settings on top (crates/client/src/transport/factory.rs); the ssh shell's relay to its own
//! server on loopback adds no proxy and no overall timeout
//! (crates/shell/src/transfer/upstream.rs). It lives under both because neither may import
//! the other.

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

/// What every request says it is.
pub const USER_AGENT: &str = concat!("git-xet/", env!("CARGO_PKG_VERSION"));
/// How long a connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// An async client's builder with the shared settings.
pub fn builder() -> reqwest::ClientBuilder {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .user_agent(USER_AGENT)
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    for cert in platform_roots() {
        builder = builder.add_root_certificate(cert.clone());
    }
    builder
}

/// A blocking client's builder with the same settings, for synchronous relays.
pub fn blocking_builder() -> reqwest::blocking::ClientBuilder {
    let mut builder = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .user_agent(USER_AGENT)
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    for cert in platform_roots() {
        builder = builder.add_root_certificate(cert.clone());
    }
    builder
}

/// The platform's root certificates, as reqwest would load them (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`, else the system's bundle and certificate directory), read once per
/// process: reqwest reads them at every client build, each file of the directory too (7-11 ms
/// a build measured on a 2-core VM), and a pull builds two clients, a push's coordinator one
/// per lane. Duplicates (the bundle and the directory hold the same certificates) are
/// dropped; certificates rustls does not take as roots are skipped, as reqwest skips them
/// when it loads them itself (a root added by hand that rustls refuses fails the build).
fn platform_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: OnceLock<Vec<reqwest::Certificate>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let loaded = rustls_native_certs::load_native_certs();
        for e in &loaded.errors {
            tracing::debug!("reading the platform's root certificates: {e}");
        }
        let mut seen = HashSet::new();
        let mut usable = rustls::RootCertStore::empty();
        loaded
            .certs
            .into_iter()
            .filter(|der| seen.insert(der.as_ref().to_vec()))
            .filter(|der| usable.add(der.clone()).is_ok())
            .filter_map(|der| reqwest::Certificate::from_der(der.as_ref()).ok())
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_roots_are_read_once_without_duplicates() {
        let first = platform_roots();
        assert!(std::ptr::eq(first, platform_roots()));
        // What the loader found that rustls takes, once each (the bundle and the directory
        // repeat each other).
        let distinct: HashSet<Vec<u8>> = rustls_native_certs::load_native_certs()
            .certs
            .into_iter()
            .filter(|der| rustls::RootCertStore::empty().add(der.clone()).is_ok())
            .map(|der| der.as_ref().to_vec())
            .collect();
        assert_eq!(first.len(), distinct.len());
        assert!(builder().build().is_ok() && blocking_builder().build().is_ok());
    }
}
