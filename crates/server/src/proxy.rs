//! Reverse proxies the server trusts (`--trusted-proxy`): only a connection from one of them
//! may say, with `Forwarded` or `X-Forwarded-Proto`/`X-Forwarded-Host`, which scheme and host
//! the client used, and so steer the URLs the server hands out. From anyone else those
//! headers are removed when the request arrives (listen.rs), so no handler can see them.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net};

use axum::http::{HeaderMap, HeaderName};

const FORWARDED: HeaderName = HeaderName::from_static("forwarded");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// An address or network, `ADDR[/PREFIX]`. An IPv4-mapped IPv6 network is kept as the
/// IPv4 network it names, as peers are compared in their canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network(IpNet);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetworkError {
    #[error("{0:?} is not an IP address (--trusted-proxy takes ADDR or ADDR/PREFIX, e.g. 10.0.0.5 or 10.0.0.0/8)")]
    Addr(String),
    #[error("{0:?}: the prefix must be a number up to 32 for IPv4 or 128 for IPv6")]
    Prefix(String),
}

impl FromStr for Network {
    type Err = NetworkError;

    fn from_str(s: &str) -> Result<Network, NetworkError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| NetworkError::Addr(s.into()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| NetworkError::Prefix(s.into()))?,
        };
        let net = match addr {
            IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => {
                let v4 = v6
                    .to_ipv4_mapped()
                    .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
                Ipv4Net::new(v4, prefix - 96).map(IpNet::V4)
            }
            _ => IpNet::new(addr, prefix),
        }
        .map_err(|_| NetworkError::Prefix(s.into()))?;
        Ok(Network(net.trunc()))
    }
}

impl Network {
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

/// The proxies whose forwarding headers are believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(pub Vec<Network>);

impl TrustedProxies {
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(peer))
    }

    /// Removes the forwarding headers of a request unless `peer` is a trusted proxy.
    pub fn screen(&self, peer: IpAddr, headers: &mut HeaderMap) {
        if !self.trusts(peer) {
            for name in [FORWARDED, X_FORWARDED_PROTO, X_FORWARDED_HOST] {
                headers.remove(name);
            }
        }
    }
}

/// Scheme and host the client used, as a trusted proxy forwarded them (the headers only
/// reach here from one: see [`TrustedProxies::screen`]). `Forwarded` wins over the
/// `X-Forwarded-*` pair; of several values the last is taken, the one the proxy next to
/// us added. Values that are not a plain scheme or host are ignored.
pub fn forwarded_origin(headers: &HeaderMap) -> (Option<&'static str>, Option<String>) {
    let last = |name: &HeaderName| -> Option<String> {
        let joined = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        joined
            .rsplit(',')
            .map(str::trim)
            .find(|v| !v.is_empty())
            .map(str::to_string)
    };
    let (mut proto, mut host) = (None, None);
    if let Some(element) = last(&FORWARDED) {
        for pair in element.split(';') {
            if let Some((k, v)) = pair.split_once('=') {
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "proto" => proto = Some(v.to_string()),
                    "host" => host = Some(v.to_string()),
                    _ => {}
                }
            }
        }
    } else {
        proto = last(&X_FORWARDED_PROTO);
        host = last(&X_FORWARDED_HOST);
    }
    let scheme = proto.and_then(|p| match p.to_ascii_lowercase().as_str() {
        "https" => Some("https"),
        "http" => Some("http"),
        _ => None,
    });
    (scheme, host.filter(|h| is_plain_host(h)))
}

/// A host or `host:port` with nothing that could change the URL's meaning (no `/`, `@`,
/// `?`, `#`, spaces).
pub fn is_plain_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn net(s: &str) -> Network {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_match() {
        assert!(net("10.0.0.0/8").contains("10.200.1.2".parse().unwrap()));
        assert!(!net("10.0.0.0/8").contains("11.0.0.1".parse().unwrap()));
        assert!(net("127.0.0.1").contains("127.0.0.1".parse().unwrap()));
        assert!(!net("127.0.0.1").contains("127.0.0.2".parse().unwrap()));
        assert!(net("192.168.4.0/22").contains("192.168.7.255".parse().unwrap()));
        assert!(!net("192.168.4.0/22").contains("192.168.8.0".parse().unwrap()));
        assert!(net("0.0.0.0/0").contains("8.8.8.8".parse().unwrap()));
        // An IPv4 peer seen on a dual-stack socket.
        assert!(net("127.0.0.1").contains("::ffff:127.0.0.1".parse().unwrap()));
        // A mapped address or network given on the command line.
        assert!(net("::ffff:127.0.0.1").contains("127.0.0.1".parse().unwrap()));
        assert!(net("::ffff:10.0.0.0/104").contains("::ffff:10.9.8.7".parse().unwrap()));
        assert!(!net("::ffff:10.0.0.0/104").contains("11.0.0.1".parse().unwrap()));
        assert!(net("fd00::/8").contains("fd12::1".parse().unwrap()));
        assert!(!net("fd00::/8").contains("10.0.0.1".parse().unwrap()));
        assert!(matches!(
            "nope".parse::<Network>(),
            Err(NetworkError::Addr(_))
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<Network>(),
            Err(NetworkError::Prefix(_))
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<Network>(),
            Err(NetworkError::Prefix(_))
        ));
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn untrusted_peers_lose_their_forwarding_headers() {
        let trusted = TrustedProxies(vec![net("127.0.0.2")]);
        let sent = [
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("forwarded", "proto=https;host=evil.example"),
            ("host", "127.0.0.1:1"),
        ];
        let mut h = headers(&sent);
        trusted.screen("127.0.0.1".parse().unwrap(), &mut h);
        assert_eq!(forwarded_origin(&h), (None, None));
        assert_eq!(h.len(), 1, "Host stays");
        let mut h = headers(&sent);
        trusted.screen("127.0.0.2".parse().unwrap(), &mut h);
        assert_eq!(
            forwarded_origin(&h),
            (Some("https"), Some("evil.example".into()))
        );
    }

    #[test]
    fn the_last_value_and_plain_hosts_only() {
        let h = headers(&[
            ("x-forwarded-proto", "http, https"),
            ("x-forwarded-host", "client.example"),
            ("x-forwarded-host", "xet.example.com:8443"),
        ]);
        assert_eq!(
            forwarded_origin(&h),
            (Some("https"), Some("xet.example.com:8443".into()))
        );
        let h = headers(&[
            ("forwarded", "for=1.2.3.4;proto=http;host=a.example"),
            ("forwarded", "for=10.0.0.1;proto=https;host=\"b.example\""),
            ("x-forwarded-host", "ignored.example"),
        ]);
        assert_eq!(
            forwarded_origin(&h),
            (Some("https"), Some("b.example".into()))
        );
        for bad in ["evil.example/x", "a@b", "x y", "h?q", ""] {
            assert!(!is_plain_host(bad), "{bad}");
        }
        let h = headers(&[("x-forwarded-proto", "gopher"), ("x-forwarded-host", "a/b")]);
        assert_eq!(forwarded_origin(&h), (None, None));
    }
}
