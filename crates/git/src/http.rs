//! git's HTTP settings and credentials for the client side: [`settings`] turns the
//! configuration (read once) and the environment into the client layer's typed
//! [`HttpSettings`]; [`authenticator`] and [`RemoteHttp`] give the commands that talk to
//! an LFS server (filter, agent, migrate, status) one way to do it.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Config;
use crate::credentials::{self, GitCredentials};
use crate::repo::Repo;
use crate::GitError;
use git_xet_client::transport::urlmatch::{self, UrlParts};
use git_xet_client::transport::{
    Access, Authenticator, HttpEnv, HttpFactory, HttpKey, HttpSettings,
};
use git_xet_lfs::batch::{BatchClient, Endpoint};

/// The `http.*` keys git-xet follows, from `config` (all of them in one pass: a snapshot
/// answers without starting git) and the environment.
pub fn settings(config: &Config) -> Result<HttpSettings, GitError> {
    let mut settings = HttpSettings::default();
    for (key, value) in config.with_prefix("http.")? {
        let rest = &key["http.".len()..];
        let (url, name) = match rest.rsplit_once('.') {
            Some((url, name)) => (Some(url), name),
            None => (None, rest),
        };
        let parsed = match name.to_ascii_lowercase().as_str() {
            "sslcainfo" => HttpKey::SslCaInfo(path(&value)),
            "sslcapath" => HttpKey::SslCaPath(path(&value)),
            "sslcert" => HttpKey::SslCert(path(&value)),
            "sslkey" => HttpKey::SslKey(path(&value)),
            "sslverify" => {
                HttpKey::SslVerify(parse_bool(&value).ok_or_else(|| GitError::BadConfigValue {
                    key: key.clone(),
                    value: value.clone(),
                    expected: "boolean",
                })?)
            }
            "proxy" => HttpKey::Proxy(value),
            "extraheader" => HttpKey::ExtraHeader(value),
            _ => continue,
        };
        settings.push(url, parsed);
    }
    settings.env = environment(|name| std::env::var(name).ok());
    Ok(settings)
}

/// The variables git and curl read, from `var`.
pub fn environment(var: impl Fn(&str) -> Option<String>) -> HttpEnv {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    HttpEnv {
        ssl_ca_info: set("GIT_SSL_CAINFO").map(|v| path(&v)),
        ssl_no_verify: set("GIT_SSL_NO_VERIFY").is_some(),
        ssl_cert: set("GIT_SSL_CERT").map(|v| path(&v)),
        ssl_key: set("GIT_SSL_KEY").map(|v| path(&v)),
        // curl reads only the lower-case `http_proxy` (CGI programs get HTTP_PROXY from a
        // request header), both cases of the others, lower case first.
        http_proxy: set("http_proxy"),
        https_proxy: set("https_proxy").or_else(|| set("HTTPS_PROXY")),
        all_proxy: set("all_proxy").or_else(|| set("ALL_PROXY")),
        no_proxy: set("no_proxy").or_else(|| set("NO_PROXY")),
    }
}

/// git's pathname values: a leading `~/` is the home directory.
fn path(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// git's booleans (`true`/`yes`/`on`/non-zero, `false`/`no`/`off`/empty/zero).
fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        n => n.parse::<i64>().ok().map(|n| n != 0),
    }
}

/// The HTTP factory of a repository's configuration.
pub fn factory(repo: &Repo) -> Result<HttpFactory, GitError> {
    Ok(HttpFactory::new(settings(&repo.config())?))
}

/// `lfs.<url>.access` for `endpoint`, matched by git's URL rules (git-lfs's reading).
pub fn access(config: &Config, endpoint: &str) -> Result<Access, GitError> {
    let Some(target) = UrlParts::parse(endpoint) else {
        return Ok(Access::Unset);
    };
    let mut scoped = Vec::new();
    for (key, value) in config.with_prefix("lfs.")? {
        let Some((url, name)) = key["lfs.".len()..].rsplit_once('.') else {
            continue;
        };
        if name.eq_ignore_ascii_case("access") {
            if let Some(parts) = UrlParts::parse(url) {
                scoped.push((parts, value));
            }
        }
    }
    Ok(
        urlmatch::best(&target, scoped.iter().map(|(u, v)| (u, v.as_str())))
            .map(Access::parse)
            .unwrap_or_default(),
    )
}

/// How requests to `endpoint` of `remote_url` authenticate: user:password in the remote URL
/// (percent-decoded), else git's credential helpers as `lfs.<url>.access` says.
pub fn authenticator(
    repo: &Repo,
    remote_url: Option<&str>,
    endpoint: &str,
) -> Result<Arc<Authenticator>, GitError> {
    let from_url = remote_url.and_then(|r| credentials::userinfo_for(r, endpoint));
    let access = access(&repo.config(), endpoint)?;
    let user = remote_url.and_then(UrlParts::parse).and_then(|u| u.user);
    let store: Arc<dyn git_xet_client::transport::CredentialStore> =
        Arc::new(GitCredentials::new(repo.git().clone()).for_user(user));
    Ok(Arc::new(Authenticator::new(access, from_url, Some(store))))
}

/// How to talk to a remote's LFS server: its endpoint (and the headers its requests
/// carry), git's HTTP settings, and one authenticator for all the requests of a command
/// (credentials are asked for once). [`crate::endpoint::resolve`] makes it.
#[derive(Clone)]
pub struct RemoteHttp {
    pub endpoint: Endpoint,
    pub http: HttpFactory,
    pub auth: Arc<Authenticator>,
}

impl RemoteHttp {
    /// A Batch API client of the endpoint.
    pub fn batch_client(&self) -> Result<BatchClient, GitError> {
        Ok(BatchClient::new(
            self.endpoint.clone(),
            &self.http,
            self.auth.clone(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Git;
    use crate::config::ConfigSnapshot;

    /// The keys as git lists them (case, subsections with dots) reach the typed settings.
    #[test]
    fn settings_from_git_config() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::in_dir(dir.path())
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
            .with_env("GIT_CONFIG_NOSYSTEM", "1");
        git.run(["init", "-q"]).unwrap();
        for (k, v) in [
            ("http.sslCAInfo", "/all.pem"),
            ("http.https://git.example.com/team.sslCAInfo", "/team.pem"),
            ("http.https://*.example.com.sslVerify", "no"),
            ("http.proxy", "127.0.0.1:3128"),
            ("http.extraHeader", "X-Trace: 1"),
            (
                "lfs.https://git.example.com/team/r.git/info/lfs.access",
                "basic",
            ),
        ] {
            git.run(["config", k, v]).unwrap();
        }
        let config =
            Config::with_snapshot(git.clone(), Arc::new(ConfigSnapshot::load(&git).unwrap()));
        let mut s = settings(&config).unwrap();
        s.env = HttpEnv::default();
        let r = s.resolve("https://git.example.com/team/r.git/info/lfs");
        assert_eq!(r.ca_info, Some("/team.pem".into()));
        assert!(!r.verify);
        assert_eq!(r.proxy.as_deref(), Some("http://127.0.0.1:3128"));
        assert_eq!(r.extra_headers, [("X-Trace".into(), "1".into())]);
        let r = s.resolve("https://other.org/r");
        assert_eq!(r.ca_info, Some("/all.pem".into()));
        assert!(r.verify);
        assert_eq!(
            access(&config, "https://git.example.com/team/r.git/info/lfs").unwrap(),
            Access::Basic
        );
        assert_eq!(
            access(&config, "https://git.example.com/other.git/info/lfs").unwrap(),
            Access::Unset
        );
    }

    #[test]
    fn environment_as_curl_reads_it() {
        let env = environment(|name| match name {
            "HTTP_PROXY" => Some("http://upper:1".into()),
            "HTTPS_PROXY" => Some("http://s:2".into()),
            "NO_PROXY" => Some("localhost".into()),
            "GIT_SSL_NO_VERIFY" => Some("1".into()),
            _ => None,
        });
        assert_eq!(env.http_proxy, None, "upper-case HTTP_PROXY is ignored");
        assert_eq!(env.https_proxy.as_deref(), Some("http://s:2"));
        assert_eq!(env.no_proxy.as_deref(), Some("localhost"));
        assert!(env.ssl_no_verify);
    }
}
