//! Who may write a hosted repository, and recovery from lock files a crashed git left.
//!
//! git takes a ref by creating `<ref>.lock` and renaming it into place; a git killed in
//! between leaves the `.lock` behind, and git refuses that ref ("File exists") until
//! someone deletes it. git cannot tell a stale lock file from a live one, but the server
//! can: every git it starts to write a repository (receive-pack over HTTP or ssh, HEAD's
//! fix-up) runs holding a shared `flock` on `git-xet-writers.flock` in the repository, an
//! open file that git and everything it starts (hooks, `gc --auto` in the background)
//! inherit, so the kernel holds the lock until the last of them has exited, even when the
//! server process that started them is gone. Whoever gets the lock exclusively therefore
//! knows no git of any server process sharing the disk is inside the repository: every
//! lock file there is stale and is removed. Pushes stay concurrent (shared locks);
//! recovery happens on the first push after the repository was left by every git.
//!
//! A git an operator runs by hand in a hosted repository takes no such lock: run it with
//! `flock -s git-xet-writers.flock git ...`, or with the server stopped.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use git_xet_io::platform::file::{lock, Lock};

/// The lock file, at the top of the bare repository (no `.lock` ending: it is no git lock).
pub const WRITERS_FILE: &str = "git-xet-writers.flock";

/// Lock files git's own commands leave at the top of a repository.
const TOP_LOCKS: [&str; 4] = [
    "HEAD.lock",
    "config.lock",
    "packed-refs.lock",
    "shallow.lock",
];

/// A shared hold on a repository's writer lock, passed on to the git processes started
/// with [`WriterLock::inherit`]. Dropping it releases this process's hold only.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
}

fn open(repo_dir: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(repo_dir.join(WRITERS_FILE))
}

/// Runs `f` while holding the exclusive lock, if no one holds the lock at all; `None`
/// when a writer is inside.
fn when_alone<T>(file: &File, f: impl FnOnce() -> T) -> std::io::Result<Option<T>> {
    match lock(file, Lock::ExclusiveNow) {
        Ok(()) => Ok(Some(f())),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

impl WriterLock {
    /// Takes a shared hold on the repository's writer lock (blocking only while a recovery
    /// or a check holds it exclusively), first removing stale lock files if no writer is
    /// inside. Blocking: call it off the async runtime.
    pub fn acquire(repo_dir: &Path) -> std::io::Result<WriterLock> {
        let file = open(repo_dir)?;
        let removed = when_alone(&file, || remove_all(&lock_files(repo_dir)))?
            .transpose()?
            .unwrap_or_default();
        for path in &removed {
            tracing::warn!(
                "removed {}: a lock file left by a git process that no longer runs",
                path.display()
            );
        }
        // From exclusive (or nothing) to shared: others may now come in.
        lock(&file, Lock::Shared)?;
        Ok(WriterLock { file })
    }

    /// The descriptor the child must keep open across `exec` (see [`keep_open`]).
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// For `pre_exec`: keeps `fd` (the writer lock) open in git, and held, for as long as git
/// and whatever it starts run.
pub fn keep_open(fd: RawFd) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    git_xet_io::platform::process::keep_open_across_exec(fd)
}

fn remove_all(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for path in paths {
        match std::fs::remove_file(path) {
            Ok(()) => removed.push(path.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// The lock files of git's ref and config storage in a repository: `HEAD.lock`,
/// `config.lock`, `packed-refs.lock`, `shallow.lock`, and `*.lock` under `refs/` and
/// `reftable/`.
pub fn lock_files(repo_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = TOP_LOCKS
        .iter()
        .map(|name| repo_dir.join(name))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let mut dirs = vec![repo_dir.join("refs"), repo_dir.join("reftable")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(_) if path.extension().is_some_and(|e| e == "lock") => found.push(path),
                _ => {}
            }
        }
    }
    found.sort();
    found
}

/// The stale lock files of a repository (for `git xet server check`, which repairs
/// nothing): `Ok(None)` when a writer is inside, so none can be told stale.
pub fn stale_lock_files(repo_dir: &Path) -> std::io::Result<Option<Vec<PathBuf>>> {
    if !repo_dir.join("HEAD").exists() {
        return Ok(Some(Vec::new()));
    }
    let file = open(repo_dir)?;
    when_alone(&file, || lock_files(repo_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planted(repo: &Path) -> Vec<PathBuf> {
        let paths = [
            "HEAD.lock",
            "packed-refs.lock",
            "refs/heads/main.lock",
            "refs/heads/team/topic.lock",
            "refs/tags/v1.lock",
        ];
        for p in paths {
            let path = repo.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "0000\n").unwrap();
        }
        // Not git locks: left alone.
        std::fs::write(repo.join("refs/heads/main"), "x\n").unwrap();
        std::fs::write(repo.join("objects.lock"), "").unwrap();
        let mut want: Vec<PathBuf> = paths.iter().map(|p| repo.join(p)).collect();
        want.sort();
        want
    }

    #[test]
    fn stale_locks_are_removed_only_when_no_writer_is_inside() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let want = planted(repo);
        assert_eq!(lock_files(repo), want);
        assert_eq!(stale_lock_files(repo).unwrap(), Some(want.clone()));

        // A writer inside (a shared hold, as a running git has): nothing is stale, nothing
        // removed, and a second writer still gets in.
        let inside = open(repo).unwrap();
        lock(&inside, Lock::Shared).unwrap();
        assert_eq!(stale_lock_files(repo).unwrap(), None);
        let second = WriterLock::acquire(repo).unwrap();
        assert_eq!(lock_files(repo), want, "nothing removed");
        drop(second);
        drop(inside);

        // Alone: removed, and the files that are no locks stay.
        let _alone = WriterLock::acquire(repo).unwrap();
        assert!(lock_files(repo).is_empty());
        assert!(repo.join("refs/heads/main").exists() && repo.join("objects.lock").exists());
        // Its hold is shared: a check sees a writer inside.
        assert_eq!(stale_lock_files(repo).unwrap(), None);
    }

    /// A child started with `keep_open` holds the lock after the parent let go.
    #[test]
    fn a_child_keeps_the_lock_after_its_parent_lets_go() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let lock = WriterLock::acquire(repo).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("2");
        // SAFETY: keep_open only calls fcntl.
        unsafe { cmd.pre_exec(keep_open(lock.fd())) };
        let mut child = cmd.spawn().unwrap();
        drop(lock);
        assert_eq!(stale_lock_files(repo).unwrap(), None, "the child holds it");
        child.wait().unwrap();
        assert_eq!(stale_lock_files(repo).unwrap(), Some(Vec::new()));
    }
}
