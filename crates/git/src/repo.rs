//! Repository discovery and the paths git-lfs and git-xet keep inside it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::command::Git;
use crate::config::{Config, ConfigSnapshot};
use crate::url_alias::UrlAliases;
use crate::GitError;
use git_xet_lfs::pointer::Oid;
use git_xet_lfs::store::LfsStore;

/// A discovered repository.
#[derive(Clone, Debug)]
pub struct Repo {
    git: Git,
    /// `None` for a bare repository.
    pub work_tree: Option<PathBuf>,
    pub git_dir: PathBuf,
    /// Shared by all worktrees; LFS objects and the XET shard cache live here.
    pub common_dir: PathBuf,
    /// Configuration read once, for processes that only read it (the filter and the agent:
    /// see [`Repo::discover_with_config`]).
    config_snapshot: Option<Arc<ConfigSnapshot>>,
    /// The work tree's `.lfsconfig`, read at its first use when configuration is read once
    /// too (shared by clones of this `Repo`).
    lfsconfig: Arc<OnceLock<Arc<ConfigSnapshot>>>,
}

impl Repo {
    /// The repository containing `dir`.
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        Repo::discover_with(&Git::in_dir(dir))
    }

    /// The repository containing `git`'s directory (the current one when it has none), as
    /// git run with `git`'s environment sees it; the repository's git keeps that environment.
    pub fn discover_with(git: &Git) -> Result<Repo, GitError> {
        let dir = match git.dir() {
            Some(dir) => dir.to_path_buf(),
            None => std::env::current_dir()
                .map_err(|e| GitError::io("reading the current directory", e))?,
        };
        let dir = dir.as_path();
        // One git process: `--show-cdup` (the way up to the work tree's top) is printed only
        // inside a work tree, where `--show-toplevel` would need a second call to be safe.
        let out = git
            .run([
                "rev-parse",
                "--path-format=absolute",
                "--is-bare-repository",
                "--is-inside-work-tree",
                "--git-dir",
                "--git-common-dir",
                "--show-cdup",
            ])
            .map_err(|_| GitError::NotARepository(dir.to_path_buf()))?;
        let mut lines = out.lines();
        let (Some(bare), Some(inside), Some(git_dir), Some(common_dir)) =
            (lines.next(), lines.next(), lines.next(), lines.next())
        else {
            return Err(GitError::NotARepository(dir.to_path_buf()));
        };
        let work_tree = if bare == "false" && inside == "true" {
            // The final newline is gone: at the top, the empty line of `--show-cdup` is too.
            let up = lines.next().unwrap_or("");
            Some(
                std::fs::canonicalize(dir.join(up))
                    .map_err(|e| GitError::io("finding the top of the work tree", e))?,
            )
        } else {
            None
        };
        let run_dir = work_tree.clone().unwrap_or_else(|| PathBuf::from(git_dir));
        Ok(Repo {
            git: git.moved_to(run_dir),
            work_tree,
            git_dir: PathBuf::from(git_dir),
            common_dir: PathBuf::from(common_dir),
            config_snapshot: None,
            lfsconfig: Arc::default(),
        })
    }

    /// [`Repo::discover_with`] with the configuration read once (one `git config --list`
    /// rather than a git process per key, as git-lfs reads it), for processes that do not
    /// change it (the filter lives for one git command): git is asked both at once,
    /// so a start waits for one git process, not two in a row. A configuration that cannot
    /// be read leaves the repository reading it per key, as it would without a snapshot.
    pub fn discover_with_config(git: &Git) -> Result<Repo, GitError> {
        let snapshot = {
            let git = git.clone();
            std::thread::spawn(move || ConfigSnapshot::load(&git))
        };
        let repo = Repo::discover_with(git)?;
        match snapshot.join() {
            Ok(Ok(snapshot)) => Ok(repo.with_config_snapshot(Arc::new(snapshot))),
            Ok(Err(e)) => {
                tracing::debug!("configuration read per key: {e}");
                Ok(repo)
            }
            Err(_) => Ok(repo),
        }
    }

    /// Reads effective configuration from `snapshot` (taken in this repository).
    pub fn with_config_snapshot(mut self, snapshot: Arc<ConfigSnapshot>) -> Repo {
        self.config_snapshot = Some(snapshot);
        self
    }

    /// [`Repo::current`] with the configuration read once ([`Repo::discover_with_config`]).
    pub fn current_with_config() -> Result<Repo, GitError> {
        Repo::discover_with_config(&Git::new())
    }

    /// The repository containing the current directory.
    pub fn current() -> Result<Repo, GitError> {
        let cwd = std::env::current_dir()
            .map_err(|e| GitError::io("reading the current directory", e))?;
        Repo::discover(&cwd)
    }

    /// git, run at the top of the work tree.
    pub fn git(&self) -> &Git {
        &self.git
    }

    pub fn config(&self) -> Config {
        match &self.config_snapshot {
            Some(snapshot) => Config::with_snapshot(self.git.clone(), snapshot.clone()),
            None => Config::new(self.git.clone()),
        }
    }

    /// git-lfs's storage directory: `lfs.storage` (relative to the git dir) or `<git>/lfs`.
    pub fn lfs_dir(&self) -> PathBuf {
        let storage = self.config().get(None, "lfs.storage").ok().flatten();
        self.lfs_dir_from(storage.as_deref())
    }

    /// git-lfs's storage directory when `lfs.storage` is `storage`.
    pub fn lfs_dir_from(&self, storage: Option<&str>) -> PathBuf {
        match storage {
            Some(s) if !s.is_empty() => {
                let p = PathBuf::from(s);
                if p.is_absolute() {
                    p
                } else {
                    self.common_dir.join(p)
                }
            }
            _ => self.common_dir.join("lfs"),
        }
    }

    /// git-lfs's object store (one `lfs.storage` lookup for all its paths).
    pub fn lfs_store(&self) -> LfsStore {
        LfsStore::in_dir(&self.lfs_dir())
    }

    /// The local copy of an LFS object (present or not).
    pub fn lfs_object_path(&self, oid: &Oid) -> PathBuf {
        self.lfs_store().path(oid)
    }

    /// git-xet's per-repository state (shard cache, migrate progress).
    pub fn xet_dir(&self) -> PathBuf {
        self.common_dir.join("xet")
    }

    /// The remote to use when none is named: the current branch's, else `origin`, else the
    /// only remote.
    pub fn default_remote(&self) -> Result<String, GitError> {
        let config = self.config();
        if self.config_snapshot.is_some() && origin_settles(&config)? {
            return Ok("origin".into());
        }
        if let Some(branch) = self
            .git
            .try_run(["symbolic-ref", "--quiet", "--short", "HEAD"])?
        {
            if let Some(remote) = config.get(None, &format!("branch.{branch}.remote"))? {
                if remote != "." {
                    return Ok(remote);
                }
            }
        }
        let remotes: Vec<String> = self
            .git
            .run(["remote"])?
            .lines()
            .map(str::to_string)
            .collect();
        if remotes.iter().any(|r| r == "origin") {
            return Ok("origin".into());
        }
        match remotes.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(GitError::NoRemotes),
            _ => Err(GitError::SeveralRemotes(remotes.clone())),
        }
    }

    /// The URL a remote fetches from (a URL given as the remote is taken as it is), with
    /// `url.<base>.insteadOf` applied.
    pub fn remote_url(&self, remote: &str) -> Result<String, GitError> {
        self.remote_url_for(remote, false)
    }

    /// The URL of a remote for `upload` (its `pushurl` first, as git-lfs) or download,
    /// with its alias replaced as git-lfs replaces it (see [`UrlAliases`]).
    pub fn remote_url_for(&self, remote: &str, upload: bool) -> Result<String, GitError> {
        let config = self.config();
        let url = if remote.contains("://") {
            remote.to_string()
        } else {
            let push = match upload {
                true => config.get(None, &format!("remote.{remote}.pushurl"))?,
                false => None,
            };
            match push {
                Some(url) => url,
                None => config
                    .get(None, &format!("remote.{remote}.url"))?
                    .ok_or_else(|| GitError::NoRemote(remote.to_string()))?,
            }
        };
        Ok(UrlAliases::read(&config)?.rewrite(&url, upload))
    }

    /// The git-lfs endpoint of a remote, by git-lfs's rules: `lfs.url`, then
    /// `remote.<name>.lfsurl`, each from git config, else from `.lfsconfig` (git-lfs looks
    /// a key up in both before the next key); else derived from the remote URL.
    pub fn lfs_endpoint(&self, remote: &str) -> Result<String, GitError> {
        match self.configured_lfs_url(remote, false)? {
            Some(url) => Ok(url),
            None => Ok(lfs_endpoint_from_remote_url(&self.remote_url(remote)?)),
        }
    }

    /// The LFS endpoint set in configuration, if any: for `upload`, `lfs.pushurl` and
    /// `remote.<name>.lfspushurl` first; then `lfs.url`, `remote.<name>.lfsurl`; from git
    /// config, then `.lfsconfig` (not `lfspushurl`, as git-lfs); its alias replaced (git-lfs
    /// replaces them here too).
    pub fn configured_lfs_url(
        &self,
        remote: &str,
        upload: bool,
    ) -> Result<Option<String>, GitError> {
        let config = self.config();
        let mut keys = Vec::new();
        if upload {
            keys.extend([
                "lfs.pushurl".to_string(),
                format!("remote.{remote}.lfspushurl"),
            ]);
        }
        keys.extend(["lfs.url".to_string(), format!("remote.{remote}.lfsurl")]);
        // git-lfs looks a key up in git config and then in `.lfsconfig` before the next key;
        // `remote.<name>.lfspushurl` it ignores in `.lfsconfig` (not one of its safe keys).
        for key in &keys {
            let url = match config.get(None, key)? {
                Some(url) => Some(url),
                None if key.ends_with(".lfspushurl") => None,
                None => self.lfsconfig_get(key)?,
            };
            if let Some(url) = url {
                let url = UrlAliases::read(&config)?.rewrite(&url, upload);
                return Ok(Some(url.trim_end_matches('/').to_string()));
            }
        }
        Ok(None)
    }

    /// The endpoint a remote names for itself, ignoring `lfs.url` (which git-lfs applies to
    /// every remote): `remote.<name>.lfsurl` from git config, then `.lfsconfig`; else
    /// derived from the remote URL. Where `migrate` sends objects.
    pub fn own_lfs_endpoint(&self, remote: &str) -> Result<String, GitError> {
        let key = format!("remote.{remote}.lfsurl");
        let named = match self.config().get(None, &key)? {
            Some(url) => Some(url),
            None => self.lfsconfig_get(&key)?,
        };
        Ok(match named {
            Some(url) => UrlAliases::read(&self.config())?
                .rewrite(&url, false)
                .trim_end_matches('/')
                .to_string(),
            None => lfs_endpoint_from_remote_url(&self.remote_url(remote)?),
        })
    }

    /// The work tree's `.lfsconfig`, when there is one.
    pub fn lfsconfig_path(&self) -> Option<PathBuf> {
        let path = self.work_tree.as_ref()?.join(".lfsconfig");
        path.is_file().then_some(path)
    }

    /// A key of the work tree's `.lfsconfig` (git-lfs reads it after git config).
    pub fn lfsconfig_get(&self, key: &str) -> Result<Option<String>, GitError> {
        let Some(path) = self.lfsconfig_path() else {
            return Ok(None);
        };
        let file = path.to_string_lossy().into_owned();
        if self.config_snapshot.is_none() {
            // A process that may write `.lfsconfig` (migrate) reads it afresh.
            return self.git.try_run(["config", "--file", &file, "--get", key]);
        }
        // Listed once, like the configuration (`git config --file` follows no includes when
        // listing, as when asked per key).
        let snapshot = match self.lfsconfig.get() {
            Some(snapshot) => snapshot.clone(),
            None => {
                let out = self
                    .git
                    .run_bytes(["config", "--file", &file, "--list", "-z"], None)?;
                self.lfsconfig
                    .get_or_init(|| Arc::new(ConfigSnapshot::parse(&out)))
                    .clone()
            }
        };
        Ok(snapshot.get(key).map(str::to_string))
    }
}

/// Whether configuration alone settles [`Repo::default_remote`] as `origin`: `origin` is a
/// configured remote and every branch that names a remote names `origin` (or `.`, which
/// falls back to it), so whichever branch is current, or none, the answer is `origin`
/// without asking git for the current branch or the list of remotes.
fn origin_settles(config: &Config) -> Result<bool, GitError> {
    if config.get(None, "remote.origin.url")?.is_none() {
        return Ok(false);
    }
    Ok(config
        .with_prefix("branch.")?
        .iter()
        .filter(|(key, _)| key.ends_with(".remote"))
        .all(|(_, remote)| remote == "origin" || remote == "."))
}

/// git-lfs's default endpoint for a remote URL: `<url>.git/info/lfs` (no double `.git`);
/// scp-style and ssh:// URLs map to https on the same host, as git-lfs does.
pub fn lfs_endpoint_from_remote_url(url: &str) -> String {
    let url = url.trim_end_matches('/');
    let http = if url.starts_with("http://") || url.starts_with("https://") {
        url.to_string()
    } else if let Some(ssh) = crate::ssh::SshRemote::parse(url) {
        ssh.https_url()
    } else {
        url.to_string()
    };
    if http.ends_with(".git") {
        format!("{http}/info/lfs")
    } else {
        format!("{http}.git/info/lfs")
    }
}

#[cfg(test)]
#[path = "repo_tests.rs"]
mod read_once_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// One rev-parse finds the work tree's top from anywhere below it (through a symlink
    /// too), and no work tree in a bare repository or inside the git directory.
    #[test]
    fn discovery_finds_the_top_or_no_work_tree() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap().join("work");
        Git::new()
            .run(["init", "-q", top.to_str().unwrap()])
            .unwrap();
        let deep = top.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        let link = top.parent().unwrap().join("link");
        std::os::unix::fs::symlink(&deep, &link).unwrap();
        for start in [&top, &deep, &link] {
            let repo = Repo::discover(start).unwrap();
            assert_eq!(
                repo.work_tree.as_deref(),
                Some(top.as_path()),
                "from {start:?}"
            );
            assert_eq!(repo.git_dir, top.join(".git"));
            assert_eq!(repo.common_dir, top.join(".git"));
        }
        let inside = Repo::discover(&top.join(".git")).unwrap();
        assert_eq!((inside.work_tree, inside.git_dir), (None, top.join(".git")));

        let bare = top.parent().unwrap().join("bare.git");
        Git::new()
            .run(["init", "-q", "--bare", bare.to_str().unwrap()])
            .unwrap();
        let repo = Repo::discover(&bare).unwrap();
        assert_eq!((repo.work_tree, repo.git_dir), (None, bare.clone()));
        assert!(matches!(
            Repo::discover(top.parent().unwrap()),
            Err(GitError::NotARepository(_))
        ));
    }

    #[test]
    fn endpoints_follow_git_lfs_rules() {
        let cases = [
            (
                "http://127.0.0.1:8080/org/repo.git",
                "http://127.0.0.1:8080/org/repo.git/info/lfs",
            ),
            (
                "http://127.0.0.1:8080/org/repo",
                "http://127.0.0.1:8080/org/repo.git/info/lfs",
            ),
            (
                "https://host/org/repo/",
                "https://host/org/repo.git/info/lfs",
            ),
            (
                "git@host:org/repo.git",
                "https://host/org/repo.git/info/lfs",
            ),
            (
                "ssh://git@host:22/org/repo",
                "https://host/org/repo.git/info/lfs",
            ),
            (
                "ssh://git@[::1]:22/org/repo",
                "https://[::1]/org/repo.git/info/lfs",
            ),
        ];
        for (remote, endpoint) in cases {
            assert_eq!(lfs_endpoint_from_remote_url(remote), endpoint, "{remote}");
        }
    }
}
