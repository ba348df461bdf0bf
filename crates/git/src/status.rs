//! `git xet status`: whether git-xet is in use for the current repository, what the
//! remote's LFS server offers, the local XET state (the chunk store, which whole objects
//! stay), and for each LFS file its XET hash and where its content is. Gathered into a
//! [`StatusReport`]; the program prints it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::credentials;
use crate::endpoint::{self, Source};
use crate::install::{KEY_ARGS, KEY_PATH};
use crate::lfs_objects::tracked_files;
use crate::repo::Repo;
use crate::store::{chunk_store_of, keep_checked_out, keep_objects, KeepCheckedOut};
use crate::GitError;
use git_xet_client::records::RecordStore;
use git_xet_client::store::ChunkStore;
use git_xet_lfs::pointer::{Oid, Pointer};
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
    /// Where old versions live and which whole objects stay.
    pub objects: ObjectsSetting,
    /// LFS files in HEAD.
    pub files: Vec<FileStatus>,
}

/// The chunk store and which whole objects stay in `.git/lfs/objects` (docs/store.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectsSetting {
    /// No chunk store (`xet.store = off`) or `xet.keepObjects`: every whole object stays,
    /// as with git-lfs.
    AllWhole,
    /// Old versions live as chunks in the store at this path; `keep` says whether the
    /// checked-out version stays whole too.
    Store { path: PathBuf, keep: KeepCheckedOut },
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
    /// Known from a transfer or the chunk store, else computed from a local copy; `None`:
    /// not local.
    pub xet_hash: Option<String>,
    pub size: u64,
    pub path: String,
    pub location: Location,
}

/// Where a file's content (the version HEAD names) is on this machine. None of them: only
/// on the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Location {
    /// The working tree file holds this version (not a pointer, not modified).
    pub work_tree: bool,
    /// Whole in `.git/lfs/objects`, where git-lfs's commands read it.
    pub whole: bool,
    /// The chunk store holds every chunk of it: rebuilt with no network.
    pub store: bool,
}

impl Location {
    pub fn only_on_server(&self) -> bool {
        !(self.work_tree || self.whole || self.store)
    }
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

    let objects = match chunk_store_of(&repo) {
        Some((path, _)) if !keep_objects(&repo) => ObjectsSetting::Store {
            path,
            keep: keep_checked_out(&repo),
        },
        _ => ObjectsSetting::AllWhole,
    };
    let files = file_statuses(&repo, &objects)?;
    Ok(StatusReport {
        agent,
        filter,
        remotes,
        xet_dir,
        shard_cache_bytes,
        objects,
        files,
    })
}

/// The LFS files of HEAD: each one's XET hash and where its content is.
fn file_statuses(repo: &Repo, objects: &ObjectsSetting) -> Result<Vec<FileStatus>, GitError> {
    let files = tracked_files(repo, "HEAD")?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let records = RecordStore::new(&repo.xet_dir());
    // Only an existing store is opened: status creates nothing.
    let store = match objects {
        ObjectsSetting::Store { path, .. } if path.is_dir() => {
            ChunkStore::open(path, u64::MAX).ok()
        }
        _ => None,
    };
    let changed = changed_since_head(repo)?;
    let lfs = repo.lfs_store();
    Ok(files
        .into_iter()
        .map(|f| {
            let whole = lfs.find(&f.oid, f.size);
            let work_file = repo.work_tree.as_ref().map(|w| w.join(&f.path));
            let work_tree = !changed.contains(&f.path)
                && work_file
                    .as_deref()
                    .is_some_and(|p| holds_content(p, f.size));
            let location = Location {
                work_tree,
                whole: whole.is_some(),
                store: store.as_ref().is_some_and(|s| s.holds(&f.oid.0, f.size)),
            };
            // Known from a transfer or the store's record, else hashed from a local copy.
            let known = records
                .file_hash_for_sha256(&f.oid.0)
                .or_else(|| store.as_ref()?.records().file_hash_for_sha256(&f.oid.0));
            let local = whole.or(work_file.filter(|_| work_tree));
            let xet_hash = known.map(|h| h.to_hex()).or_else(|| {
                let file = std::fs::File::open(local?).ok()?;
                let hashed = git_xet_io::pipeline::hash_stream(file, false).ok()?;
                Some(hashed.file_hash.to_hex())
            });
            FileStatus {
                xet_hash,
                size: f.size,
                path: f.path,
                location,
            }
        })
        .collect())
}

/// Paths whose working tree or index content differs from HEAD's (`git diff HEAD`, which
/// compares by the index's file stats and cleans only files whose stats changed).
fn changed_since_head(repo: &Repo) -> Result<HashSet<String>, GitError> {
    if repo.work_tree.is_none() {
        return Ok(HashSet::new());
    }
    let listing = repo.git().run([
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--no-relative",
        "--no-ext-diff",
        "HEAD",
        "--",
    ])?;
    Ok(listing
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect())
}

/// Whether the working tree file at `path` holds an object of `size` bytes rather than its
/// pointer (a checkout with `GIT_LFS_SKIP_SMUDGE`, which git does not count as a change).
fn holds_content(path: &Path, size: u64) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() != size {
        return false;
    }
    if size as usize > git_xet_lfs::pointer::MAX_POINTER_SIZE {
        return true;
    }
    std::fs::read(path).is_ok_and(|bytes| Pointer::detect(&bytes).is_none())
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
        let rt = git_xet_io::runtime::handle().map_err(GitError::Runtime)?;
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
