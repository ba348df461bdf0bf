//! git's rules for `<section>.<url>.<key>` settings (`git help config`, `http.<url>.*`):
//! a configured URL matches a request URL when the scheme is the same, the host is the same
//! (each `*` in the configured host matches within one dot-separated label), the port is the
//! same (the scheme's default when absent), the configured path is a prefix ending at a `/`
//! boundary, and the configured user, if any, is the request's user. Of several matches the
//! most specific wins: longer host, then longer path, then a user match; on a tie the later
//! one.

use git_xet_io::url::percent_decode;

/// A URL split into the parts the rules compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    pub scheme: String,
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// Starts with `/`; without a query or fragment.
    pub path: String,
}

impl UrlParts {
    /// Splits `url`; `None` when it has no `scheme://`.
    pub fn parse(url: &str) -> Option<UrlParts> {
        let (scheme, rest) = url.split_once("://")?;
        if scheme.is_empty() {
            return None;
        }
        let rest = rest.split(['?', '#']).next().unwrap_or("");
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, h)) => {
                let user = userinfo.split(':').next().unwrap_or("");
                (Some(percent_decode(user)), h)
            }
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport)?;
        Some(UrlParts {
            scheme: scheme.to_ascii_lowercase(),
            user,
            host: host.to_ascii_lowercase(),
            port,
            path: path.to_string(),
        })
    }

    fn effective_port(&self) -> Option<u16> {
        self.port.or(match self.scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        })
    }
}

/// `host[:port]`, with IPv6 hosts in brackets.
fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) if !p.is_empty() => Some(p.parse().ok()?),
            _ => None,
        };
        return Some((host, port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() => Some((h, Some(p.parse().ok()?))),
        Some((h, _)) => Some((h, None)),
        None => Some((s, None)),
    }
}

/// How specifically a configured URL matched; compare with `Ord` (greater wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Specificity {
    host_len: usize,
    path_len: usize,
    user_matched: bool,
}

/// Whether the configured URL `pattern` applies to `target`, and how specifically.
pub fn matches(pattern: &UrlParts, target: &UrlParts) -> Option<Specificity> {
    if pattern.scheme != target.scheme
        || !host_matches(&pattern.host, &target.host)
        || pattern.effective_port() != target.effective_port()
    {
        return None;
    }
    let user_matched = match &pattern.user {
        Some(u) => {
            if target.user.as_deref() != Some(u.as_str()) {
                return None;
            }
            true
        }
        None => false,
    };
    let prefix = pattern.path.trim_end_matches('/');
    let path_ok = prefix.is_empty()
        || target.path == prefix
        || target
            .path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'));
    if !path_ok {
        return None;
    }
    Some(Specificity {
        host_len: pattern.host.len(),
        path_len: prefix.len().max(1),
        user_matched,
    })
}

/// Label by label; `*` within a label matches any run of characters of that label.
fn host_matches(pattern: &str, host: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let h: Vec<&str> = host.split('.').collect();
    p.len() == h.len() && p.iter().zip(&h).all(|(p, h)| glob(p, h))
}

fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// Of `candidates` (configured URL, value) in configuration order, the value whose URL
/// matches `target` most specifically (the later one on a tie).
pub fn best<'a, T>(
    target: &UrlParts,
    candidates: impl IntoIterator<Item = (&'a UrlParts, T)>,
) -> Option<T> {
    let mut chosen: Option<(Specificity, T)> = None;
    for (pattern, value) in candidates {
        if let Some(s) = matches(pattern, target) {
            if chosen.as_ref().is_none_or(|(best, _)| s >= *best) {
                chosen = Some((s, value));
            }
        }
    }
    chosen.map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, target: &str) -> Option<Specificity> {
        matches(
            &UrlParts::parse(pattern).unwrap(),
            &UrlParts::parse(target).unwrap(),
        )
    }

    #[test]
    fn git_url_rules() {
        let t = "https://user@a.example.com/org/repo.git/info/lfs";
        assert!(m("https://a.example.com", t).is_some());
        assert!(m("https://A.Example.COM:443/", t).is_some());
        assert!(m("http://a.example.com", t).is_none(), "scheme");
        assert!(m("https://a.example.com:8443", t).is_none(), "port");
        assert!(m("https://*.example.com", t).is_some());
        assert!(m("https://*.com", t).is_none(), "one label per *");
        assert!(m("https://a.example.com/org", t).is_some());
        assert!(m("https://a.example.com/org/", t).is_some());
        assert!(m("https://a.example.com/or", t).is_none(), "path boundary");
        assert!(m("https://user@a.example.com", t).is_some());
        assert!(m("https://other@a.example.com", t).is_none());
        assert!(m("https://[::1]:8080/x", "https://[::1]:8080/x/y").is_some());
        // Most specific: longer configured host (git compares lengths, so a wildcard of the
        // same length ties and the later entry wins), longer path, then a user match.
        assert_eq!(m("https://a.example.com", t), m("https://*.example.com", t));
        assert!(m("https://a.example.com/org", t) > m("https://a.example.com", t));
        assert!(m("https://user@a.example.com", t) > m("https://a.example.com", t));
    }

    #[test]
    fn best_prefers_specific_then_later() {
        let urls: Vec<UrlParts> = [
            "https://h/org/repo",
            "https://h",
            "https://h/org",
            "https://h/org",
        ]
        .iter()
        .map(|u| UrlParts::parse(u).unwrap())
        .collect();
        let target = UrlParts::parse("https://h/org/x").unwrap();
        let got = best(&target, urls.iter().zip(["repo", "host", "org1", "org2"]));
        assert_eq!(got, Some("org2"));
    }
}
