//! The running server's record in its data directory. `git xet server` writes
//! `DATA/server.json` once it listens: its loopback URL (for the pre-receive hook and the
//! ssh shell's own LFS requests), its public URL (for the `href` git-lfs-authenticate hands
//! out) and where it keeps the hosted repositories (for the shell and the upkeep commands).

use std::path::{Path, PathBuf};

/// The record is missing or not valid: no server has run with this data directory, or the
/// file was damaged. The message says which and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoServer(pub String);

const FILE: &str = "server.json";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerUrls {
    /// The listener on loopback, for processes on the server's machine.
    pub internal_url: String,
    /// `--public-url` of the server, if it was given.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Where the server keeps hosted repositories (`--git-dir`, default `DATA/repos`).
    #[serde(default)]
    pub repos_dir: Option<PathBuf>,
}

/// Where hosted repositories are: as the running server said, else `DATA/repos`.
pub fn repos_dir(data_dir: &Path) -> PathBuf {
    read(data_dir)
        .ok()
        .and_then(|urls| urls.repos_dir)
        .unwrap_or_else(|| data_dir.join("repos"))
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Written by the server once its listener is bound.
pub fn write(data_dir: &Path, urls: &ServerUrls) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(urls).expect("urls serialize");
    crate::write_atomically(&path(data_dir), &json)
}

/// The running server's URLs, as it wrote them.
pub fn read(data_dir: &Path) -> Result<ServerUrls, NoServer> {
    let file = path(data_dir);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        NoServer(format!(
            "cannot read {} ({e}): start `git xet server --data {}` (it writes that file), \
             or check the shell's --data",
            file.display(),
            data_dir.display()
        ))
    })?;
    let urls: ServerUrls = serde_json::from_str(&text)
        .map_err(|e| NoServer(format!("{} is not valid: {e}", file.display())))?;
    for url in std::iter::once(&urls.internal_url).chain(urls.public_url.iter()) {
        check_url(url).map_err(|why| NoServer(format!("{}: {why}", file.display())))?;
    }
    Ok(urls)
}

/// A URL that [`check_url`] refused.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not an http:// or https:// base URL without a trailing slash")]
pub struct BadBaseUrl(pub String);

/// An `http://` or `https://` base URL without a trailing slash.
pub fn check_url(url: &str) -> Result<(), BadBaseUrl> {
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && !url.ends_with('/')
        && url.bytes().all(|b| b.is_ascii_graphic());
    match ok {
        true => Ok(()),
        false => Err(BadBaseUrl(url.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_file_round_trips_and_bad_urls_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).is_err());
        let urls = ServerUrls {
            internal_url: "http://127.0.0.1:5".into(),
            public_url: Some("https://xet.example".into()),
            repos_dir: Some(dir.path().join("git")),
        };
        write(dir.path(), &urls).unwrap();
        assert_eq!(read(dir.path()).unwrap(), urls);
        std::fs::write(path(dir.path()), r#"{"internal_url":"file:///etc"}"#).unwrap();
        assert!(read(dir.path()).is_err());
        assert!(check_url("http://h/").is_err());
        assert!(check_url("http://h x").is_err());
    }
}
