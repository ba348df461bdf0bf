//! The per-user chunk store as the git side sees it (docs/store.md): where it is
//! (`GIT_XET_STORE`, else `xet.store`, else the user data directory), how large it may grow
//! (`xet.storeSize`), whether whole objects stay in `.git/lfs/objects` (`xet.keepObjects`,
//! `xet.keepCheckedOut`),
//! and `git xet materialize`, which puts whole objects back for git-lfs.

use std::path::PathBuf;

use crate::filter::fetch::{Fetched, Fetcher};
use crate::lfs_objects::reachable_objects;
use crate::repo::Repo;
use crate::GitError;
use git_xet_client::store::{
    default_store_root, ChunkStore, PruneReport, Rebuilt, DEFAULT_STORE_BYTES,
};
use git_xet_io::human::parse_size;
use git_xet_lfs::pointer::Pointer;

/// The store's root and size bound for `repo`, or `None` when it is turned off
/// (`GIT_XET_STORE=off` or `xet.store = off`).
pub fn chunk_store_of(repo: &Repo) -> Option<(PathBuf, u64)> {
    let config = repo.config();
    let configured = |key: &str| config.get(None, key).ok().flatten();
    let root = match std::env::var("GIT_XET_STORE")
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(v) => v,
        None => match configured("xet.store") {
            Some(v) => v,
            None => return default_store_root().map(|r| (r, store_size(&configured))),
        },
    };
    if is_off(&root) {
        return None;
    }
    Some((expand_home(&root), store_size(&configured)))
}

fn is_off(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "off" | "false" | "no" | "0" | "none"
    )
}

/// `~/` as git expands it in paths.
fn expand_home(v: &str) -> PathBuf {
    match (v.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(v),
    }
}

fn store_size(configured: &dyn Fn(&str) -> Option<String>) -> u64 {
    let Some(value) = configured("xet.storeSize") else {
        return DEFAULT_STORE_BYTES;
    };
    parse_size(&value).unwrap_or_else(|e| {
        tracing::warn!("xet.storeSize: {e}; the store keeps the default bound");
        DEFAULT_STORE_BYTES
    })
}

/// Whether whole objects stay in `.git/lfs/objects` after checkout (`xet.keepObjects`,
/// default false: the store holds them as chunks), or there is no store to hold them.
pub fn keep_objects(repo: &Repo) -> bool {
    chunk_store_of(repo).is_none()
        || repo
            .config()
            .get_bool(None, "xet.keepObjects")
            .ok()
            .flatten()
            .unwrap_or(false)
}

/// `xet.keepCheckedOut`: whether the objects of checked-out files stay whole in
/// `.git/lfs/objects`, where git-lfs's own commands read them (docs/store.md, "File systems").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeepCheckedOut {
    /// `auto` (or `true`): kept, sharing their extents with the working tree files where the
    /// file system can (XFS with reflink, btrfs: no extra disk), a second copy elsewhere.
    /// `git lfs fsck`, `checkout`, `push` and `ls-files` then see what git-lfs would.
    #[default]
    Keep,
    /// `false`, the smallest disk: the checked-out version lives in the working tree only,
    /// and the git-lfs commands of [`KeepCheckedOut::NEEDS_MATERIALIZE`] need
    /// `git xet materialize` first.
    Never,
}

impl KeepCheckedOut {
    /// The git-lfs commands that read the checked-out version from `.git/lfs/objects`, which
    /// `xet.keepCheckedOut=false` leaves without whole objects: fsck fails, checkout skips the
    /// files. (`git lfs ls-files` looks at the working tree file, and `git lfs push` of new
    /// commits reads what you `git add`ed, which stays whole until pushed: both work.)
    pub const NEEDS_MATERIALIZE: &'static str = "`git lfs fsck` and `git lfs checkout`";

    pub fn parse(v: &str) -> Option<KeepCheckedOut> {
        match v.trim().to_ascii_lowercase().as_str() {
            "auto" | "true" | "yes" | "on" | "1" => Some(KeepCheckedOut::Keep),
            "false" | "no" | "off" | "0" => Some(KeepCheckedOut::Never),
            _ => None,
        }
    }
}

/// `xet.keepCheckedOut` of `repo` (kept when unset; an unknown value is said and taken as
/// `auto`).
pub fn keep_checked_out(repo: &Repo) -> KeepCheckedOut {
    let Some(v) = repo.config().get(None, "xet.keepCheckedOut").ok().flatten() else {
        return KeepCheckedOut::Keep;
    };
    KeepCheckedOut::parse(&v).unwrap_or_else(|| {
        tracing::warn!("xet.keepCheckedOut is {v:?}: expected auto, true or false; using auto");
        KeepCheckedOut::Keep
    })
}

/// The chunk store of `repo`, opened, with the clone registered as one of its users (what
/// it references is kept by `git xet prune`).
pub fn open(repo: &Repo) -> Option<ChunkStore> {
    let (root, max) = chunk_store_of(repo)?;
    let store = ChunkStore::open(&root, max)
        .map_err(|e| tracing::warn!("working without the chunk store: {e}"))
        .ok()?;
    if let Err(e) = store.register_clone(&repo.common_dir) {
        tracing::debug!("could not register the clone with the chunk store: {e}");
    }
    Some(store)
}

/// What `git xet prune` did.
#[derive(Debug, Default, Clone)]
pub struct PruneOutcome {
    pub store: PathBuf,
    pub report: PruneReport,
    /// Registered clones whose references were kept.
    pub clones: usize,
    /// Registered clones that no longer exist: forgotten, they pin nothing.
    pub forgotten: Vec<PathBuf>,
}

/// Deletes from the chunk store what no registered clone references from any of its refs
/// (`git rev-list --all`); registrations of clones that are gone are dropped first. A clone
/// that exists but cannot be read stops the prune: nothing a live clone needs is deleted.
pub fn prune(repo: Option<&Repo>, dry: bool) -> Result<PruneOutcome, GitError> {
    let located = match repo {
        Some(repo) => chunk_store_of(repo),
        None => match std::env::var("GIT_XET_STORE")
            .ok()
            .filter(|v| !v.is_empty())
        {
            Some(v) if is_off(&v) => None,
            Some(v) => Some((expand_home(&v), DEFAULT_STORE_BYTES)),
            None => default_store_root().map(|r| (r, DEFAULT_STORE_BYTES)),
        },
    };
    let Some((root, max)) = located else {
        return Err(GitError::NotConfigured {
            what: "chunk store (it is `off`)",
            env: "GIT_XET_STORE",
            key: "xet.store",
        });
    };
    let store = ChunkStore::open(&root, max)
        .map_err(|e| GitError::io("opening the chunk store", std::io::Error::other(e)))?;
    let mut outcome = PruneOutcome {
        store: root,
        ..Default::default()
    };
    let mut needed = std::collections::HashSet::new();
    for (registration, git_dir) in store.clones() {
        if !git_dir.join("HEAD").is_file() {
            if !dry {
                let _ = std::fs::remove_file(&registration);
            }
            outcome.forgotten.push(git_dir);
            continue;
        }
        let clone = Repo::discover(&git_dir)?;
        for object in reachable_objects(&clone, &["--all"])? {
            needed.insert(object.oid.0);
        }
        outcome.clones += 1;
    }
    outcome.report = store.prune(&needed, dry);
    Ok(outcome)
}

/// What `git xet materialize` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MaterializeReport {
    /// Objects already whole in `.git/lfs/objects`.
    pub present: usize,
    /// Rebuilt from the chunk store.
    pub rebuilt: usize,
    /// Downloaded (not, or not all, in the store).
    pub downloaded: usize,
    /// Neither: their paths, for the message.
    pub failed: Vec<String>,
}

/// Puts every LFS object reachable from `revs` (`["HEAD"]`, `["--all"]`...) whole into
/// `.git/lfs/objects`: from the chunk store when it holds them, else through XET (or
/// git-lfs, for what XET cannot bring). For the git-lfs commands that read that directory
/// directly (`git lfs fsck`, `checkout`, `push --all`), and before uninstalling git-xet.
pub fn materialize(repo: &Repo, revs: &[&str]) -> Result<MaterializeReport, GitError> {
    let objects = reachable_objects(repo, revs)?;
    let lfs = repo.lfs_store();
    let mut report = MaterializeReport::default();
    let store = open(repo);
    let mut missing = Vec::new();
    for object in &objects {
        if lfs.find(&object.oid, object.size).is_some() {
            report.present += 1;
            continue;
        }
        if let Some(store) = &store {
            lfs.create_tmp_dir()?;
            let tmp = lfs.temp_path("materialize");
            match store.rebuild(&object.oid.0, object.size, &tmp) {
                Ok(Rebuilt::Done) => {
                    lfs.commit(&tmp, &object.oid)?;
                    report.rebuilt += 1;
                    continue;
                }
                Ok(Rebuilt::Missing | Rebuilt::Damaged(_)) => {}
                Err(e) => tracing::warn!("rebuilding {}: {e}", object.path),
            }
        }
        missing.push(object);
    }
    if missing.is_empty() {
        return Ok(report);
    }
    let pointers: Vec<(String, Pointer)> = missing
        .iter()
        .map(|o| (o.path.clone(), Pointer::new(o.oid, o.size)))
        .collect();
    let files: Vec<(&str, &Pointer)> = pointers.iter().map(|(p, o)| (p.as_str(), o)).collect();
    let mut fetcher = Fetcher::new(repo)?;
    for ((path, _), result) in files.iter().zip(fetcher.fetch_many(&files, &lfs)) {
        match result {
            Ok(Fetched::Stored(_)) => report.downloaded += 1,
            Ok(Fetched::GitLfs(why)) => {
                tracing::debug!("{path}: {why}");
                report.failed.push(path.to_string());
            }
            Err(e) => {
                tracing::warn!("{path}: {e}");
                report.failed.push(path.to_string());
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_as_documented() {
        assert!(is_off("off") && is_off("FALSE") && !is_off("/tmp/s"));
        assert_eq!(KeepCheckedOut::parse(" Auto"), Some(KeepCheckedOut::Keep));
        assert_eq!(KeepCheckedOut::parse("yes"), Some(KeepCheckedOut::Keep));
        assert_eq!(KeepCheckedOut::parse("false"), Some(KeepCheckedOut::Never));
        assert_eq!(KeepCheckedOut::parse("sometimes"), None);
    }
}
