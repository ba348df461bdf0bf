//! Where every reqwest client starts: the settings all of them share (rustls, the
//! user agent, the connect timeout, no Nagle delay). The client side adds git's HTTP
//! settings on top (crates/client/src/transport/factory.rs); the ssh shell's relay to its own
//! server on loopback adds no proxy and no overall timeout
//! (crates/server/src/ssh/transfer/upstream.rs). It lives under both because neither may import
//! the other.

use std::time::Duration;

/// What every request says it is.
pub const USER_AGENT: &str = concat!("git-xet/", env!("CARGO_PKG_VERSION"));
/// How long a connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// An async client's builder with the shared settings.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent(USER_AGENT)
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
}

/// A blocking client's builder with the same settings, for synchronous relays.
pub fn blocking_builder() -> reqwest::blocking::ClientBuilder {
    reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .user_agent(USER_AGENT)
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
}
