//! The HTTP settings every client request follows, as plain values: git's `http.*` and
//! `http.<url>.*` keys in configuration order, and the environment variables git and curl
//! read. The git layer fills this from its configuration snapshot; here it is resolved for
//! one URL by git's URL-matching rules ([`super::urlmatch`]).

use std::path::PathBuf;

use super::urlmatch::{self, UrlParts};

/// One `http.[<url>.]<key>` entry that git-xet follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpKey {
    /// `sslCAInfo`: a CA bundle trusted besides the system's certificate store.
    SslCaInfo(PathBuf),
    /// `sslCAPath`: a directory of CA certificates trusted besides the system's.
    SslCaPath(PathBuf),
    /// `sslVerify`.
    SslVerify(bool),
    /// `sslCert`: a PEM client certificate (with its key, unless `sslKey` is set).
    SslCert(PathBuf),
    /// `sslKey`: the PEM private key of `sslCert`.
    SslKey(PathBuf),
    /// `proxy`: `[protocol://][user[:password]@]host[:port]`; empty means none.
    Proxy(String),
    /// `extraHeader`: `Name: value`, multi-valued; an empty value clears the list so far.
    ExtraHeader(String),
}

impl HttpKey {
    fn same_key(&self, other: &HttpKey) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// The environment variables that override or complete the configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpEnv {
    /// `GIT_SSL_CAINFO` (overrides `http.sslCAInfo`).
    pub ssl_ca_info: Option<PathBuf>,
    /// `GIT_SSL_NO_VERIFY` set.
    pub ssl_no_verify: bool,
    /// `GIT_SSL_CERT`, `GIT_SSL_KEY`.
    pub ssl_cert: Option<PathBuf>,
    pub ssl_key: Option<PathBuf>,
    /// curl's proxy variables, used when no `http.proxy` applies: `http_proxy` (lower case
    /// only, as curl reads it), `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY`.
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub all_proxy: Option<String>,
    /// `no_proxy`/`NO_PROXY`: comma-separated hosts (and their subdomains), or `*`.
    pub no_proxy: Option<String>,
}

/// Everything the HTTP client factory follows. `Default`: nothing configured (the system's
/// certificate store, no proxy).
#[derive(Clone, Debug, Default)]
pub struct HttpSettings {
    /// In configuration order; the URL is `None` for plain `http.<key>`.
    entries: Vec<(Option<UrlParts>, HttpKey)>,
    pub env: HttpEnv,
}

/// The settings that apply to one URL.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resolved {
    pub ca_info: Option<PathBuf>,
    pub ca_path: Option<PathBuf>,
    pub verify: bool,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The proxy URL (with a scheme), when one applies.
    pub proxy: Option<String>,
    /// `(name, value)` pairs.
    pub extra_headers: Vec<(String, String)>,
}

impl HttpSettings {
    /// Adds `http.<key>` (`url` None) or `http.<url>.<key>`, after those added before. An
    /// entry whose URL cannot be parsed is ignored, as git ignores it.
    pub fn push(&mut self, url: Option<&str>, key: HttpKey) {
        match url {
            None => self.entries.push((None, key)),
            Some(u) => {
                if let Some(parts) = UrlParts::parse(u) {
                    self.entries.push((Some(parts), key));
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.env == HttpEnv::default()
    }

    /// The value of one key for `target`: the most specific matching `http.<url>.<key>`,
    /// else the last plain `http.<key>`.
    fn pick(&self, target: Option<&UrlParts>, like: &HttpKey) -> Option<&HttpKey> {
        let of_key = || self.entries.iter().filter(|(_, k)| k.same_key(like));
        if let Some(target) = target {
            let scoped = of_key().filter_map(|(u, k)| u.as_ref().map(|u| (u, k)));
            if let Some(k) = urlmatch::best(target, scoped) {
                return Some(k);
            }
        }
        of_key().rev().find(|(u, _)| u.is_none()).map(|(_, k)| k)
    }

    /// Everything that applies to `url`.
    pub fn resolve(&self, url: &str) -> Resolved {
        let target = UrlParts::parse(url);
        let target = target.as_ref();
        let path = |like: HttpKey| match self.pick(target, &like) {
            Some(HttpKey::SslCaInfo(p) | HttpKey::SslCaPath(p))
            | Some(HttpKey::SslCert(p) | HttpKey::SslKey(p)) => Some(p.clone()),
            _ => None,
        };
        let empty = PathBuf::new;
        let verify = match self.pick(target, &HttpKey::SslVerify(true)) {
            Some(HttpKey::SslVerify(v)) => *v,
            _ => true,
        } && !self.env.ssl_no_verify;
        let config_proxy = match self.pick(target, &HttpKey::Proxy(String::new())) {
            Some(HttpKey::Proxy(p)) => Some(p.clone()),
            _ => None,
        };
        Resolved {
            ca_info: self
                .env
                .ssl_ca_info
                .clone()
                .or_else(|| path(HttpKey::SslCaInfo(empty()))),
            ca_path: path(HttpKey::SslCaPath(empty())),
            verify,
            cert: self
                .env
                .ssl_cert
                .clone()
                .or_else(|| path(HttpKey::SslCert(empty()))),
            key: self
                .env
                .ssl_key
                .clone()
                .or_else(|| path(HttpKey::SslKey(empty()))),
            proxy: target.and_then(|t| self.proxy_for(t, config_proxy)),
            extra_headers: self.extra_headers(target),
        }
    }

    /// git's rule: `http.proxy` if set, else curl's environment variables; `NO_PROXY`
    /// applies to both.
    fn proxy_for(&self, target: &UrlParts, configured: Option<String>) -> Option<String> {
        let env = &self.env;
        let chosen = match configured {
            Some(p) => p,
            None => match target.scheme.as_str() {
                "https" => env.https_proxy.clone().or_else(|| env.all_proxy.clone())?,
                "http" => env.http_proxy.clone().or_else(|| env.all_proxy.clone())?,
                _ => return None,
            },
        };
        let chosen = chosen.trim();
        if chosen.is_empty() || no_proxy_matches(env.no_proxy.as_deref(), &target.host) {
            return None;
        }
        Some(if chosen.contains("://") {
            chosen.to_string()
        } else {
            format!("http://{chosen}") // curl's default proxy protocol
        })
    }

    /// Every matching `extraHeader` in configuration order (an empty one clears the list).
    fn extra_headers(&self, target: Option<&UrlParts>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (url, key) in &self.entries {
            let HttpKey::ExtraHeader(h) = key else {
                continue;
            };
            let applies = match (url, target) {
                (None, _) => true,
                (Some(u), Some(t)) => urlmatch::matches(u, t).is_some(),
                (Some(_), None) => false,
            };
            if !applies {
                continue;
            }
            match h.split_once(':') {
                _ if h.trim().is_empty() => out.clear(),
                Some((name, value)) => {
                    out.push((name.trim().to_string(), value.trim().to_string()))
                }
                None => tracing::warn!("ignoring http.extraHeader without a colon"),
            }
        }
        out
    }
}

/// curl's `NO_PROXY`: `*` for every host; otherwise a host is exempt when it equals an entry
/// or ends with `.entry` (a leading dot in the entry is ignored). Entries may carry a port,
/// which is ignored here.
fn no_proxy_matches(no_proxy: Option<&str>, host: &str) -> bool {
    let Some(list) = no_proxy else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    list.split([',', ' '])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            let entry = entry.trim_start_matches('.').to_ascii_lowercase();
            let entry = match entry.rsplit_once(':') {
                Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) && !h.contains(':') => {
                    h.to_string()
                }
                _ => entry,
            };
            let entry = entry.trim_start_matches('[').trim_end_matches(']');
            host == entry || host.ends_with(&format!(".{entry}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> HttpSettings {
        let mut s = HttpSettings::default();
        s.push(None, HttpKey::SslVerify(true));
        s.push(None, HttpKey::SslCaInfo("/all.pem".into()));
        s.push(
            Some("https://git.corp"),
            HttpKey::SslCaInfo("/corp.pem".into()),
        );
        s.push(
            Some("https://git.corp/team"),
            HttpKey::SslCaInfo("/team.pem".into()),
        );
        s.push(Some("https://*.corp"), HttpKey::SslVerify(false));
        s.push(None, HttpKey::Proxy("proxy.corp:3128".into()));
        s.push(Some("https://direct.corp"), HttpKey::Proxy(String::new()));
        s.push(None, HttpKey::ExtraHeader("X-A: 1".into()));
        s.push(
            Some("https://git.corp"),
            HttpKey::ExtraHeader("X-B: 2".into()),
        );
        s
    }

    #[test]
    fn resolves_by_git_url_rules() {
        let s = settings();
        let team = s.resolve("https://git.corp/team/repo.git/info/lfs");
        assert_eq!(team.ca_info, Some("/team.pem".into()));
        assert!(!team.verify);
        assert_eq!(team.proxy.as_deref(), Some("http://proxy.corp:3128"));
        assert_eq!(
            team.extra_headers,
            [("X-A".into(), "1".into()), ("X-B".into(), "2".into())]
        );
        let other = s.resolve("https://git.corp/other");
        assert_eq!(other.ca_info, Some("/corp.pem".into()));
        let elsewhere = s.resolve("https://example.org/x");
        assert_eq!(elsewhere.ca_info, Some("/all.pem".into()));
        assert!(elsewhere.verify);
        assert_eq!(elsewhere.extra_headers, [("X-A".into(), "1".into())]);
        assert_eq!(s.resolve("https://direct.corp/x").proxy, None);
    }

    #[test]
    fn environment_overrides_and_completes() {
        let mut s = settings();
        s.env.ssl_ca_info = Some("/env.pem".into());
        s.env.ssl_no_verify = true;
        s.env.no_proxy = Some("localhost,.example.org".into());
        let r = s.resolve("https://a.example.org/x");
        assert_eq!(r.ca_info, Some("/env.pem".into()));
        assert!(!r.verify);
        assert_eq!(r.proxy, None, "NO_PROXY applies to http.proxy too");

        let mut s = HttpSettings::default();
        s.env.http_proxy = Some("http://p:1".into());
        s.env.https_proxy = Some("p:2".into());
        assert_eq!(s.resolve("http://h/").proxy.as_deref(), Some("http://p:1"));
        assert_eq!(s.resolve("https://h/").proxy.as_deref(), Some("http://p:2"));
        s.env.no_proxy = Some("*".into());
        assert_eq!(s.resolve("https://h/").proxy, None);
    }

    #[test]
    fn no_proxy_rules() {
        assert!(no_proxy_matches(Some("example.com"), "a.example.com"));
        assert!(no_proxy_matches(Some(".example.com"), "example.com"));
        assert!(!no_proxy_matches(Some("example.com"), "badexample.com"));
        assert!(no_proxy_matches(Some("127.0.0.1:8080, ::1"), "127.0.0.1"));
        assert!(no_proxy_matches(Some("[::1]"), "[::1]"));
        assert!(!no_proxy_matches(None, "h"));
    }
}
