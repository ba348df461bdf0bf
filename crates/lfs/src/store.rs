//! git-lfs's local object store (`.git/lfs/objects/ab/cd/<oid>`), the one place that knows
//! its layout, for the filter, the agent and migrate alike: new objects are written under
//! `.git/lfs/tmp` and renamed into place, so a crash or a failed hash check never leaves a
//! partial object where git-lfs would trust it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::pointer::Oid;
use crate::LfsError;

#[derive(Clone, Debug)]
pub struct LfsStore {
    objects: PathBuf,
    tmp: PathBuf,
}

fn io_error(context: &'static str, path: &Path, source: std::io::Error) -> LfsError {
    LfsError::LocalIo {
        context,
        path: path.to_path_buf(),
        source,
    }
}

impl LfsStore {
    /// The store of git-lfs's storage directory `lfs` (`lfs.storage`, else `.git/lfs`; the
    /// git layer's `Repo::lfs_store` works it out).
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
    pub fn temp_file(&self, purpose: &str) -> Result<(File, PathBuf), LfsError> {
        self.create_tmp_dir()?;
        loop {
            let path = self.temp_path(purpose);
            match File::options().write(true).create_new(true).open(&path) {
                Ok(f) => return Ok((f, path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error("cannot create", &path, e)),
            }
        }
    }

    /// Creates the temp directory (downloads are written there).
    pub fn create_tmp_dir(&self) -> Result<(), LfsError> {
        std::fs::create_dir_all(&self.tmp).map_err(|e| io_error("cannot create", &self.tmp, e))
    }

    /// A fresh name in the temp directory, unique across the processes sharing it (the
    /// agent, the filter and migrate name theirs one way): `xet-<purpose>-<pid>-<n>-<ns>`.
    pub fn temp_path(&self, purpose: &str) -> PathBuf {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        self.tmp
            .join(format!("xet-{purpose}-{}-{n}-{nanos}", std::process::id()))
    }

    /// The objects in the store, newest first (a download reuses chunks of recent ones).
    pub fn newest_objects(&self) -> Vec<(Oid, PathBuf)> {
        let mut found: Vec<(SystemTime, Oid, PathBuf)> = Vec::new();
        let entries = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten();
        for d1 in entries(&self.objects) {
            for d2 in entries(&d1.path()) {
                for f in entries(&d2.path()) {
                    let Some(oid) = f.file_name().to_str().and_then(|n| n.parse::<Oid>().ok())
                    else {
                        continue;
                    };
                    let modified = f
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(UNIX_EPOCH);
                    found.push((modified, oid, f.path()));
                }
            }
        }
        found.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        found
            .into_iter()
            .map(|(_, oid, path)| (oid, path))
            .collect()
    }

    /// Moves a complete, verified file into the store as `oid`. If the object is already
    /// there (another process stored it), the temp file is dropped instead.
    pub fn commit(&self, temp: &Path, oid: &Oid) -> Result<PathBuf, LfsError> {
        let dest = self.path(oid);
        if dest.exists() {
            let _ = std::fs::remove_file(temp);
            return Ok(dest);
        }
        self.replace(temp, oid)
    }

    /// Moves a complete, verified file into the store as `oid`, over any copy there (one
    /// found damaged).
    pub fn replace(&self, temp: &Path, oid: &Oid) -> Result<PathBuf, LfsError> {
        let dest = self.path(oid);
        // Twice: the filter removes fan-out directories a dropped object leaves empty, so
        // one made here an instant earlier may be gone at the rename.
        let mut result = Ok(());
        for _ in 0..2 {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| io_error("cannot create", parent, e))?;
            }
            result = std::fs::rename(temp, &dest);
            match &result {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && temp.exists() => continue,
                _ => break,
            }
        }
        result.map_err(|e| {
            let _ = std::fs::remove_file(temp);
            io_error("cannot store", &dest, e)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent's reuse of local objects and the filter's writes see one layout: what
    /// `commit` stores, `newest_objects` lists (newest first) and `find` finds; other
    /// files in the tree are passed over.
    #[test]
    fn one_layout_for_writes_and_walks() {
        let dir = tempfile::tempdir().unwrap();
        let store = LfsStore::in_dir(dir.path());
        let (a, b) = (Oid([0xab; 32]), Oid([0xcd; 32]));
        for (age, oid, content) in [(60, a, &b"old"[..]), (0, b, &b"newer"[..])] {
            let (mut file, temp) = store.temp_file("test").unwrap();
            std::io::Write::write_all(&mut file, content).unwrap();
            let when = SystemTime::now() - std::time::Duration::from_secs(age);
            file.set_modified(when).unwrap();
            assert!(temp.starts_with(store.tmp_dir()));
            store.commit(&temp, &oid).unwrap();
        }
        std::fs::write(store.objects_dir().join("ab/ab/not-an-oid"), b"x").unwrap();
        let listed: Vec<Oid> = store.newest_objects().into_iter().map(|(o, _)| o).collect();
        assert_eq!(listed, vec![b, a]);
        assert_eq!(store.find(&a, 3), Some(store.path(&a)));
        assert_eq!(store.find(&a, 4), None, "another size is another object");
        assert_ne!(store.temp_path("x"), store.temp_path("x"));
    }
}
