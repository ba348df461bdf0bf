//! `git xet status`: whether git-xet is in use for the current repository, what the
//! remote's LFS server offers, the local XET state, and the XET hash of each LFS file.
//! Gathered into a [`StatusReport`]; the program prints it.

use std::path::{Path, PathBuf};

use crate::credentials;
use crate::endpoint::{self, Source};
use crate::install::{KEY_ARGS, KEY_PATH};
use crate::lfs_objects::tracked_files;
use crate::repo::Repo;
use crate::GitError;
use git_xet_client::records::RecordStore;
use git_xet_lfs::pointer::Oid;
use git_xet_lfs::protocol::Operation;

/// Everything `git xet status` shows, for the program to print.
#[derive(Debug)]
pub struct StatusReport {
    /// The configured transfer agent; `None`: not configured.
    pub agent: Option<AgentSetting>,
    pub filter: FilterSetting,
    /// The remotes asked about, in `git remote`'s order (none: the repository has none).
    pub remotes: Vec<RemoteStatus>,
    pub xet_dir: PathBuf,
    /// Bytes of cached shards under `xet_dir`.
    pub shard_cache_bytes: u64,
    /// LFS files in HEAD.
    pub files: Vec<FileStatus>,
}

/// `lfs.customtransfer.xet.*` and where it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSetting {
    /// The config file's scope (`global`, `local`...).
    pub scope: String,
    pub path: String,
    pub args: String,
    /// The program exists (as a path or on `PATH`).
    pub usable: bool,
}

/// `filter.lfs.process`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSetting {
    Ours,
    GitLfs,
    Missing,
}

#[derive(Debug)]
pub struct RemoteStatus {
    pub name: String,
    /// Its LFS endpoint, or why its configuration cannot be read.
    pub endpoint: Result<EndpointStatus, GitError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStatus {
    /// The endpoint without credentials, or how ssh names it.
    pub shown: String,
    pub authentication: String,
    /// Which way transfers go and whether the server offers xet; `None` when offline.
    pub transfers: Option<Transfers>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfers {
    /// `xet`, or `git-lfs (hand-off: why)`.
    pub path: String,
    /// `yes`, `no (why)` or `unknown (why)`.
    pub offers_xet: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStatus {
    /// Known from a transfer, else computed from the local copy; `None`: not local.
    pub xet_hash: Option<String>,
    pub size: u64,
    pub path: String,
}

/// Gathers the status of the current repository (`remote`: only that one; `offline`: no
/// request to the LFS server).
pub fn run(remote: Option<&str>, offline: bool) -> Result<StatusReport, GitError> {
    let repo = Repo::current()?;
    let config = repo.config();

    // The agent, and which config file it comes from.
    let agent = match config
        .git()
        .try_run(["config", "--show-scope", "--get", KEY_PATH])?
    {
        Some(line) => {
            let (scope, path) = line.split_once('\t').unwrap_or(("?", line.as_str()));
            let args = config.get(None, KEY_ARGS)?.unwrap_or_default();
            let usable = Path::new(path).is_file() || which(path);
            Some(AgentSetting {
                scope: scope.to_string(),
                path: path.to_string(),
                args,
                usable,
            })
        }
        None => None,
    };
    let filter = match config.get(None, "filter.lfs.process")? {
        Some(_) if crate::install::filter_is_ours(&config)? => FilterSetting::Ours,
        Some(_) => FilterSetting::GitLfs,
        None => FilterSetting::Missing,
    };

    // Each remote's LFS endpoint, how it authenticates and which way transfers go.
    let names: Vec<String> = match remote {
        Some(r) => vec![r.to_string()],
        None => repo
            .git()
            .run(["remote"])?
            .lines()
            .map(str::to_string)
            .collect(),
    };
    let remotes = names
        .into_iter()
        .map(|name| {
            let endpoint = remote_status(&repo, &name, offline);
            RemoteStatus { name, endpoint }
        })
        .collect();

    // Local XET state.
    let xet_dir = repo.xet_dir();
    let shard_cache_bytes = dir_size(&xet_dir.join("servers"));

    // Tracked files and their XET hashes.
    let records = RecordStore::new(&xet_dir);
    let files = tracked_files(&repo, "HEAD")?
        .into_iter()
        .map(|f| {
            let object = repo.lfs_object_path(&f.oid);
            // Known from a transfer, else computed from the local copy, else unknown.
            let xet_hash = records
                .file_hash_for_sha256(&f.oid.0)
                .map(|h| h.to_hex())
                .or_else(|| {
                    let file = std::fs::File::open(&object).ok()?;
                    Some(
                        git_xet_io::pipeline::hash_stream(file, false)
                            .ok()?
                            .file_hash
                            .to_hex(),
                    )
                });
            FileStatus {
                xet_hash,
                size: f.size,
                path: f.path,
            }
        })
        .collect();
    Ok(StatusReport {
        agent,
        filter,
        remotes,
        xet_dir,
        shard_cache_bytes,
        files,
    })
}

fn remote_status(repo: &Repo, remote: &str, offline: bool) -> Result<EndpointStatus, GitError> {
    let source = endpoint::source(repo, remote, Operation::Download)?;
    let shown = match &source {
        Source::Http(url) | Source::Other(url) => credentials::strip_userinfo(url),
        Source::Ssh {
            remote, fallback, ..
        } => format!(
            "named by git-lfs-authenticate on {} (else {fallback})",
            remote.display_host()
        ),
    };
    let transfers = (!offline).then(|| {
        let (path, offers_xet) = transfer_path(repo, remote);
        Transfers { path, offers_xet }
    });
    Ok(EndpointStatus {
        shown,
        authentication: source.auth_method(),
        transfers,
    })
}

/// Which way a download from `remote` goes (xet, or git-lfs and why), and whether the
/// server offers xet, from one Batch API request offering `basic` and `xet`.
fn transfer_path(repo: &Repo, remote: &str) -> (String, String) {
    let handoff = |why: String| format!("git-lfs (hand-off: {why})");
    let resolved = match endpoint::resolve(repo, remote, Operation::Download) {
        Ok(Some(r)) => r,
        Ok(None) => {
            let why = "the LFS endpoint is not an HTTP server".to_string();
            return (handoff(why), "no (not an HTTP server)".into());
        }
        Err(e @ GitError::SshAuthenticate { .. }) => {
            return (handoff(e.to_string()), format!("unknown ({e})"));
        }
        Err(e) => return (handoff(e.to_string()), format!("unknown ({e})")),
    };
    let answer = resolved.batch_client().and_then(|client| {
        let rt = git_xet_client::runtime::handle().map_err(GitError::Runtime)?;
        Ok(rt.block_on(client.batch(
            Operation::Download,
            &["basic", "xet"],
            &[(Oid([0; 32]), 0)],
        ))?)
    });
    match answer {
        Ok(a) if a.transfer == "xet" => ("xet".into(), "yes".into()),
        Ok(a) => (
            handoff(format!("the server chose `{}`", a.transfer)),
            format!("no (the server chose `{}`)", a.transfer),
        ),
        Err(e) => (
            handoff(format!("LFS batch request failed: {e}")),
            format!("unknown ({e})"),
        ),
    }
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}
