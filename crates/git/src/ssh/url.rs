//! Which remote URLs are ssh, and the three parts git-lfs takes from them: `user@host`, the
//! port and the path given to `git-lfs-authenticate`.
//!
//! Forms (as git accepts them): `ssh://[user@]host[:port]/path` (also `git+ssh://`,
//! `ssh+git://`), scp-like `[user@]host:path`, `[user@host:port]:path`, and IPv6 hosts in
//! brackets in both (`ssh://u@[::1]:22/p`, `u@[::1]:p`).

use git_xet_io::url::percent_decode;

/// An ssh remote as git-lfs splits it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SshRemote {
    /// `user@host` or `host`, handed to ssh as the destination (IPv6 without brackets).
    pub user_and_host: String,
    /// Digits only, when the URL names a port.
    pub port: Option<String>,
    /// `/org/repo.git` for ssh:// URLs, `org/repo.git` for scp-like ones (as git-lfs).
    pub path: String,
    /// The host alone (for the https endpoint git-lfs falls back to).
    host: String,
}

impl SshRemote {
    /// The ssh remote `url` names, or `None` for http(s), file and local paths.
    pub fn parse(url: &str) -> Option<SshRemote> {
        let url = url.trim();
        for scheme in ["ssh://", "git+ssh://", "ssh+git://"] {
            if let Some(rest) = strip_prefix_ignore_case(url, scheme) {
                return parse_ssh_url(rest);
            }
        }
        if url.contains("://") || url.starts_with('/') || url.starts_with('.') {
            return None;
        }
        parse_scp_like(url)
    }

    /// git-lfs's endpoint when `git-lfs-authenticate` gives no `href`: https on the same
    /// host (the ssh port does not carry over), `/info/lfs` appended.
    pub fn https_endpoint(&self) -> String {
        let base = self.https_url();
        if base.ends_with(".git") {
            format!("{base}/info/lfs")
        } else {
            format!("{base}.git/info/lfs")
        }
    }

    /// The same host and path over https (git-lfs's guess for a configured ssh `lfs.url`).
    pub fn https_url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let path = self.path.trim_start_matches('/').trim_end_matches('/');
        format!("https://{host}/{path}")
    }

    /// `user@host[:port]` for messages (no path, no secrets: ssh URLs carry none).
    pub fn display_host(&self) -> String {
        match &self.port {
            Some(p) => format!("{}:{p}", self.user_and_host),
            None => self.user_and_host.clone(),
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// `[user[:password]@]host[:port]/path` after the scheme.
fn parse_ssh_url(rest: &str) -> Option<SshRemote> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (user, hostport) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    // git-lfs keeps the user name only (a password has no meaning to ssh).
    let user = user
        .map(|u| u.split(':').next().unwrap_or(""))
        .map(percent_decode)
        .filter(|u| !u.is_empty());
    let (host, port) = split_host_port(hostport)?;
    if host.is_empty() {
        return None;
    }
    Some(SshRemote {
        user_and_host: join_user(user.as_deref(), &host),
        port,
        path: percent_decode(path),
        host,
    })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; a port must be digits.
fn split_host_port(s: &str) -> Option<(String, Option<String>)> {
    let (host, port) = if let Some(inner) = s.strip_prefix('[') {
        let end = inner.find(']')?;
        let after = &inner[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return None,
        };
        (inner[..end].to_string(), port)
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (s.to_string(), None),
        }
    };
    let port = match port {
        Some("") | None => None,
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => Some(p.to_string()),
        Some(_) => return None,
    };
    Some((host, port))
}

/// `[user@]host:path`, `[user@host:port]:path`, `[user@][v6]:path`. git takes a slash
/// before the first colon to mean a local path.
fn parse_scp_like(url: &str) -> Option<SshRemote> {
    let (user, rest) = match (url.find('@'), url.find(':')) {
        (Some(at), Some(colon)) if at < colon && !url.starts_with('[') => {
            (Some(&url[..at]), &url[at + 1..])
        }
        _ => (None, url),
    };
    let (user, host, port, path) = if let Some(inner) = rest.strip_prefix('[') {
        let end = inner.find(']')?;
        let path = inner[end + 1..].strip_prefix(':')?;
        let bracketed = &inner[..end];
        if bracketed.matches(':').count() == 1 {
            // `[user@host:port]:path`, git's old form for a port in scp syntax.
            let (user_host, port) = bracketed.split_once(':').expect("one colon");
            if !port.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (u, h) = match user_host.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (user, user_host),
            };
            let port = (!port.is_empty()).then(|| port.to_string());
            (u, h.to_string(), port, path)
        } else {
            (user, bracketed.to_string(), None, path)
        }
    } else {
        let (host, path) = rest.split_once(':')?;
        if host.contains('/') {
            return None;
        }
        (user, host.to_string(), None, path)
    };
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(SshRemote {
        user_and_host: join_user(user.filter(|u| !u.is_empty()), &host),
        port,
        path: path.trim_start_matches('/').to_string(),
        host,
    })
}

fn join_user(user: Option<&str>, host: &str) -> String {
    match user {
        Some(u) => format!("{u}@{host}"),
        None => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> Option<(String, Option<String>, String)> {
        SshRemote::parse(url).map(|r| (r.user_and_host, r.port, r.path))
    }

    fn some(u: &str, p: Option<&str>, path: &str) -> Option<(String, Option<String>, String)> {
        Some((u.to_string(), p.map(str::to_string), path.to_string()))
    }

    #[test]
    fn every_form_git_accepts() {
        let cases = [
            (
                "git@host:org/repo.git",
                some("git@host", None, "org/repo.git"),
            ),
            ("host:org/repo", some("host", None, "org/repo")),
            (
                "git@host:/abs/repo.git",
                some("git@host", None, "abs/repo.git"),
            ),
            (
                "ssh://git@host:2222/org/repo.git",
                some("git@host", Some("2222"), "/org/repo.git"),
            ),
            ("ssh://host/org/r", some("host", None, "/org/r")),
            ("SSH://git@host/r", some("git@host", None, "/r")),
            ("git+ssh://u@h:22/r", some("u@h", Some("22"), "/r")),
            ("ssh+git://u@h/r", some("u@h", None, "/r")),
            ("ssh://u:pw@h/r", some("u@h", None, "/r")),
            ("ssh://u%40x@h/a%20b", some("u@x@h", None, "/a b")),
            (
                "ssh://git@[::1]:2222/org/r.git",
                some("git@::1", Some("2222"), "/org/r.git"),
            ),
            ("ssh://[fe80::1]/r", some("fe80::1", None, "/r")),
            ("git@[::1]:org/r.git", some("git@::1", None, "org/r.git")),
            (
                "[git@host:2222]:org/r.git",
                some("git@host", Some("2222"), "org/r.git"),
            ),
            (
                "[host:2222]:org/r.git",
                some("host", Some("2222"), "org/r.git"),
            ),
        ];
        for (url, want) in cases {
            assert_eq!(parts(url), want, "{url}");
        }
    }

    #[test]
    fn http_file_and_local_paths_are_not_ssh() {
        for url in [
            "http://h/r.git",
            "https://u:p@h:1/r",
            "file:///srv/r.git",
            "/srv/r.git",
            "./r.git",
            "../r",
            "dir/sub:x",
            "ssh://h:port/r",
            "ssh:///r",
            "host:",
        ] {
            assert_eq!(SshRemote::parse(url), None, "{url}");
        }
    }

    #[test]
    fn the_https_fallback_drops_the_ssh_port() {
        let e = |u: &str| SshRemote::parse(u).unwrap().https_endpoint();
        assert_eq!(e("git@host:org/r.git"), "https://host/org/r.git/info/lfs");
        assert_eq!(
            e("ssh://git@host:22/org/r"),
            "https://host/org/r.git/info/lfs"
        );
        assert_eq!(e("ssh://[::1]:22/r.git"), "https://[::1]/r.git/info/lfs");
    }
}
