//! What an HTTP exchange failed with, by kind, so that callers decide by variant (retry,
//! hand the object to git-lfs, tell the user which setting to check).

/// What to do when a server refuses the credentials (401, 403), in every message that says so.
pub const CREDENTIALS_HINT: &str = "check the credentials git uses for this remote (a credential \
     helper, or user:token in the remote URL)";

/// A failed HTTP exchange. URLs in messages carry no user information or query.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The TLS handshake failed: an unknown CA, a wrong host name, a refused client
    /// certificate. Retrying does not help.
    #[error(
        "{url}: TLS failed: {detail} (if the server uses an internal CA, point http.sslCAInfo \
         at it; client certificates come from http.sslCert and http.sslKey)"
    )]
    Tls { url: String, detail: String },
    /// The proxy could not be reached or refused the request.
    #[error(
        "{url}: the proxy {proxy} failed: {detail} (check http.proxy, HTTPS_PROXY and NO_PROXY)"
    )]
    Proxy {
        url: String,
        proxy: String,
        detail: String,
    },
    /// Nothing answered at the server's address.
    #[error("{url}: cannot connect: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url}: timed out")]
    Timeout { url: String },
    /// The connection broke during the exchange.
    #[error("{url}: connection failed: {detail}")]
    Connection { url: String, detail: String },
    /// The server refused the credentials (or their absence).
    #[error("{url}: authentication refused (HTTP {status}); {CREDENTIALS_HINT}")]
    AuthRefused { url: String, status: u16 },
    /// The server asks for an authentication scheme git-xet does not speak.
    #[error("{url}: lfs.<url>.access is {scheme}, which git-xet does not support")]
    UnsupportedAuth { url: String, scheme: String },
    /// No credentials could be had (no helper answered, prompting not possible).
    #[error("{url}: no credentials: {reason}")]
    NoCredentials { url: String, reason: String },
    /// A setting (CA file, client certificate, proxy URL) cannot be used.
    #[error("{setting}: {detail}")]
    Settings { setting: String, detail: String },
}

impl TransportError {
    /// Whether trying the same request again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            TransportError::Unreachable { .. }
                | TransportError::Timeout { .. }
                | TransportError::Connection { .. }
                | TransportError::Proxy { .. }
        )
    }
}

/// `url` without user information, query or fragment, for messages.
pub fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or(url);
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

/// Sorts a reqwest failure for `url` (sent through `proxy`, if any) into its kind.
pub fn classify(url: &str, proxy: Option<&str>, e: &reqwest::Error) -> TransportError {
    let url = shown_url(url);
    let detail = innermost(e);
    if is_tls(e) {
        return TransportError::Tls { url, detail };
    }
    if e.is_timeout() {
        return TransportError::Timeout { url };
    }
    if e.is_connect() {
        return match proxy {
            Some(p) => TransportError::Proxy {
                url,
                proxy: shown_url(p),
                detail,
            },
            None => TransportError::Unreachable { url, detail },
        };
    }
    TransportError::Connection { url, detail }
}

/// Whether a rustls error is in the source chain. Handshake failures come wrapped in
/// `io::Error`s (tokio-rustls's, then hyper-rustls's), whose `source()` skips the error
/// they wrap: look inside them instead.
fn is_tls(e: &reqwest::Error) -> bool {
    git_xet_io::error_chain::causes(e).any(|s| s.downcast_ref::<rustls::Error>().is_some())
}

/// The deepest cause's text (reqwest's own message names the URL, query included).
fn innermost(e: &reqwest::Error) -> String {
    match git_xet_io::error_chain::innermost(e) {
        Some(detail) if !detail.is_empty() => detail,
        _ => "request failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_messages_lose_secrets() {
        assert_eq!(
            shown_url("https://u:secret@h:1/a/b?sig=x"),
            "https://h:1/a/b"
        );
        assert_eq!(shown_url("http://h"), "http://h");
    }
}
