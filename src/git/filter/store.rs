//! git-lfs's local object store (`.git/lfs/objects/ab/cd/<oid>`), as the filter writes it:
//! new objects are written under `.git/lfs/tmp` and renamed into place, so a crash or a
//! failed hash check never leaves a partial object where git-lfs would trust it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::pointer::Oid;

#[derive(Clone, Debug)]
pub struct LfsStore {
    objects: PathBuf,
    tmp: PathBuf,
}

impl LfsStore {
    pub fn of(repo: &Repo) -> LfsStore {
        // One `lfs.storage` lookup for both paths.
        LfsStore::in_dir(&repo.lfs_dir())
    }

    /// The store of git-lfs's storage directory `lfs` (see [`Repo::lfs_dir`]).
    pub fn in_dir(lfs: &Path) -> LfsStore {
        LfsStore {
            objects: lfs.join("objects"),
            tmp: lfs.join("tmp"),
        }
    }

    pub fn objects_dir(&self) -> &Path {
        &self.objects
    }

    /// git-lfs's temp directory: downloads are written here so they can be renamed into
    /// the store on the same file system.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    pub fn path(&self, oid: &Oid) -> PathBuf {
        self.objects.join(oid.storage_path())
    }

    /// The object's path when it is present with the expected size.
    pub fn find(&self, oid: &Oid, size: u64) -> Option<PathBuf> {
        let path = self.path(oid);
        std::fs::metadata(&path)
            .is_ok_and(|m| m.is_file() && m.len() == size)
            .then_some(path)
    }

    /// A new, empty file under the temp directory (created with the usual permissions, as
    /// git-lfs's objects are).
    pub fn temp_file(&self, purpose: &str) -> Result<(File, PathBuf), GitError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(&self.tmp)
            .map_err(|e| GitError::io(format!("creating {}", self.tmp.display()), e))?;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = self
                .tmp
                .join(format!("xet-{purpose}-{}-{n}", std::process::id()));
            match File::options().write(true).create_new(true).open(&path) {
                Ok(f) => return Ok((f, path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(GitError::io(format!("creating {}", path.display()), e)),
            }
        }
    }

    /// Moves a complete, verified file into the store as `oid`. If the object is already
    /// there (another process stored it), the temp file is dropped instead.
    pub fn commit(&self, temp: &Path, oid: &Oid) -> Result<PathBuf, GitError> {
        let dest = self.path(oid);
        if dest.exists() {
            let _ = std::fs::remove_file(temp);
            return Ok(dest);
        }
        self.replace(temp, oid)
    }

    /// Moves a complete, verified file into the store as `oid`, over any copy there (one
    /// found damaged).
    pub fn replace(&self, temp: &Path, oid: &Oid) -> Result<PathBuf, GitError> {
        let dest = self.path(oid);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| GitError::io(format!("creating {}", parent.display()), e))?;
        }
        std::fs::rename(temp, &dest).map_err(|e| {
            let _ = std::fs::remove_file(temp);
            GitError::io(format!("storing {}", dest.display()), e)
        })?;
        Ok(dest)
    }
}

/// Removes a temp file when dropped, unless it was kept.
pub struct TempGuard(pub Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
