//! The objects a Hub write makes, kept apart until the write is accepted, as git's
//! receive-pack keeps a push's: blobs, trees, commits and tags go into a temporary object
//! directory under the repository's `objects/` (git runs with `GIT_OBJECT_DIRECTORY` there and
//! the repository's objects as an alternate), and move into the repository only after the
//! write passed the checks of a push, just before its ref moves (ref_update.rs). A refused or
//! failed write deletes the directory, so nothing it made can be named later (a branch created
//! from a refused commit's id, say). A crash leaves at most a stale directory, which a later
//! write to the repository removes once it is old.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the directories are named by (git's own are `tmp_objdir-incoming-*`).
const PREFIX: &str = "hub-incoming-";
/// A quarantine this old belongs to no running write (commit bodies are bounded, and their
/// clients time out long before): removed.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// A write's object directory; removed when dropped, with whatever is still in it.
#[derive(Debug)]
pub struct Quarantine {
    repo_dir: PathBuf,
    dir: PathBuf,
}

impl Quarantine {
    /// A new, empty one in the repository at `repo_dir`, stale ones removed first. Blocking.
    pub fn create(repo_dir: &Path) -> io::Result<Quarantine> {
        let repo_dir = std::path::absolute(repo_dir)?;
        remove_stale(&repo_dir.join("objects"), STALE_AFTER);
        let dir = repo_dir
            .join("objects")
            .join(format!("{PREFIX}{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&dir)?;
        Ok(Quarantine { repo_dir, dir })
    }

    /// [`Quarantine::create`] off the async runtime.
    pub async fn open(repo_dir: &Path) -> crate::error::ServerResult<Quarantine> {
        let repo_dir = repo_dir.to_path_buf();
        Ok(tokio::task::spawn_blocking(move || Quarantine::create(&repo_dir)).await??)
    }

    /// The repository it belongs to.
    pub fn repo_dir(&self) -> &Path {
        &self.repo_dir
    }

    /// The environment of a git that writes into it and reads the repository's objects too.
    /// `GIT_QUARANTINE_PATH` makes git refuse to move refs from there, as in a hook.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.objects_env();
        env.push(("GIT_QUARANTINE_PATH".into(), self.dir.clone().into()));
        env
    }

    /// [`Quarantine::env`] without `GIT_QUARANTINE_PATH`, for `git fast-import`, which ends
    /// with a (here empty) ref transaction that git refuses under it.
    pub fn objects_env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("GIT_OBJECT_DIRECTORY".into(), self.dir.clone().into()),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES".into(),
                self.repo_dir.join("objects").into(),
            ),
        ]
    }

    /// Moves its objects into the repository: loose objects, then packs, each pack's index
    /// last (git finds a pack by its index, so none is seen without its data). An object the
    /// repository has already stays as it is there. Blocking; call it under the repository's
    /// writer lock, before the ref moves.
    pub fn migrate(&self) -> io::Result<()> {
        let objects = self.repo_dir.join("objects");
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_fanout = name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_fanout || !entry.file_type()?.is_dir() {
                continue;
            }
            let into = objects.join(&*name);
            std::fs::create_dir_all(&into)?;
            for object in std::fs::read_dir(entry.path())? {
                let object = object?;
                if is_object_name(&object.file_name().to_string_lossy()) {
                    move_in(&object.path(), &into.join(object.file_name()))?;
                }
            }
        }
        let packs = self.dir.join("pack");
        let Ok(entries) = std::fs::read_dir(&packs) else {
            return Ok(());
        };
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("pack-") && !n.ends_with(".keep"))
            .collect();
        files.sort_by_key(|n| (n.ends_with(".idx"), n.clone()));
        if files.is_empty() {
            return Ok(());
        }
        let into = objects.join("pack");
        std::fs::create_dir_all(&into)?;
        for name in files {
            move_in(&packs.join(&name), &into.join(&name))?;
        }
        Ok(())
    }
}

impl Drop for Quarantine {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(dir = %self.dir.display(), "removing a Hub write's objects: {e}");
            }
        }
    }
}

/// A loose object's file name: the id's hex digits after the first two.
fn is_object_name(name: &str) -> bool {
    matches!(name.len(), 38 | 62) && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Links `from` in at `to` (never replacing what is there: an object's name is its content),
/// then removes `from`.
fn move_in(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        // A file system without hard links: a rename, which replaces an equal file.
        Err(_) => return std::fs::rename(from, to),
    }
    std::fs::remove_file(from)
}

/// Removes the quarantines under `objects` older than `age` (by their directory's time).
fn remove_stale(objects: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(objects) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|elapsed| elapsed > age);
        if old {
            let path = entry.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::warn!(
                    dir = %path.display(),
                    "removed the objects of a Hub write that never finished"
                ),
                Err(e) => tracing::warn!(dir = %path.display(), "removing a stale quarantine: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("objects/pack")).unwrap();
        dir
    }

    #[test]
    fn objects_move_in_and_the_directory_goes() {
        let repo = repo();
        let q = Quarantine::create(repo.path()).unwrap();
        let loose = format!("ab/{}", "c".repeat(38));
        for name in [
            loose.as_str(),
            "ab/tmp_obj_x",
            "pack/pack-1.pack",
            "pack/pack-1.idx",
            "pack/pack-1.rev",
            "pack/tmp_pack_y",
        ] {
            let path = q.dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, name).unwrap();
        }
        // An object the repository has already keeps its file.
        let have = repo.path().join("objects/pack/pack-1.rev");
        std::fs::write(&have, "theirs").unwrap();
        q.migrate().unwrap();
        let objects = repo.path().join("objects");
        assert_eq!(
            std::fs::read(objects.join(&loose)).unwrap(),
            loose.as_bytes()
        );
        assert!(objects.join("pack/pack-1.pack").is_file());
        assert!(objects.join("pack/pack-1.idx").is_file());
        assert_eq!(std::fs::read(have).unwrap(), b"theirs");
        // Temporary files of a git that was cut short stay out.
        assert!(!objects.join("ab/tmp_obj_x").exists());
        assert!(!objects.join("pack/tmp_pack_y").exists());
        let dir = q.dir.clone();
        drop(q);
        assert!(!dir.exists());
    }

    #[test]
    fn a_dropped_quarantine_leaves_nothing_and_stale_ones_are_swept() {
        let repo = repo();
        let q = Quarantine::create(repo.path()).unwrap();
        std::fs::create_dir_all(q.dir.join("ab")).unwrap();
        std::fs::write(q.dir.join("ab").join("d".repeat(38)), "x").unwrap();
        let dir = q.dir.clone();
        drop(q);
        assert!(!dir.exists());
        assert!(!repo.path().join("objects/ab").exists());

        let objects = repo.path().join("objects");
        let live = Quarantine::create(repo.path()).unwrap();
        let stale = objects.join(format!("{PREFIX}0000000000000001"));
        std::fs::create_dir(&stale).unwrap();
        let two_days_ago = std::time::SystemTime::now() - 2 * STALE_AFTER;
        std::fs::File::open(&stale)
            .unwrap()
            .set_modified(two_days_ago)
            .unwrap();
        let other = objects.join("info");
        std::fs::create_dir(&other).unwrap();
        let next = Quarantine::create(repo.path()).unwrap();
        assert!(!stale.exists(), "a stale quarantine is swept");
        assert!(live.dir.exists() && next.dir.exists() && other.exists());
    }
}
