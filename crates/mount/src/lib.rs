//! `git xet mount`: any revision of a repository as a lazy, read-only file system.
//!
//! The file-system logic lives here apart from any kernel interface, so that the FUSE
//! binding ([`fuse`], feature `fuse`) and another front end later (a loopback NFS server
//! for macOS) call the same [`fs::MountFs`]:
//!
//! | module     | job                                                                      |
//! |------------|--------------------------------------------------------------------------|
//! | [`tree`]   | the tree at a revision from git's objects, as an inode table             |
//! | [`blocks`] | range reads in blocks: single flight, memory LRU, sequential read-ahead  |
//! | [`block_data`] | block buffers reused through a pool; reads answered from a block     |
//! | [`remote`] | the blocks' source: the chunk store, the filter's Batch API and CAS      |
//! |            | client, ranged reads                                                     |
//! | [`edges`]  | chunks at the edges of ranges read, so adjacent ranges fetch them once   |
//! | [`fs`]     | lookup, attributes, directory listing, symlinks, reads (local or remote) |

pub mod block_data;
pub mod blocks;
pub mod edges;
pub mod fs;
#[cfg(feature = "fuse")]
pub mod fuse;
pub mod remote;
pub mod tree;

use std::path::{Path, PathBuf};

/// What can go wrong in a mount. Reads map every variant to EIO except [`MountError::NotFound`].
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("revision {rev:?} is not a commit of this repository: {source}")]
    Revision {
        rev: String,
        source: Box<git_xet_git::GitError>,
    },
    #[error("reading the tree: {0}")]
    BadTree(String),
    #[error(transparent)]
    Git(Box<git_xet_git::GitError>),
    #[error(transparent)]
    Client(#[from] git_xet_client::ClientError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot catch SIGINT and SIGTERM to unmount on them: {0}")]
    Signals(std::io::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no such file")]
    NotFound,
    #[error("{0}")]
    Unavailable(String),
    #[error("reading {oid} at {offset}: no answer within {seconds} s (is the server reachable?)")]
    Timeout {
        oid: String,
        offset: u64,
        seconds: u64,
    },
    #[error("reading {oid}: the data ends at {offset}, before the object's size")]
    Short { oid: String, offset: u64 },
    #[error(
        "FUSE is not available: {0} (on Debian/Ubuntu: `apt-get install fuse3`, and load the \
         kernel module with `modprobe fuse` if /dev/fuse is missing)"
    )]
    NoFuse(String),
}

impl MountError {
    pub fn io(path: &Path, source: std::io::Error) -> MountError {
        MountError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<git_xet_git::GitError> for MountError {
    fn from(e: git_xet_git::GitError) -> Self {
        MountError::Git(Box::new(e))
    }
}

/// Errors are cloned to every reader waiting for the same block.
impl Clone for MountError {
    fn clone(&self) -> Self {
        match self {
            MountError::NotFound => MountError::NotFound,
            MountError::Timeout {
                oid,
                offset,
                seconds,
            } => MountError::Timeout {
                oid: oid.clone(),
                offset: *offset,
                seconds: *seconds,
            },
            MountError::Short { oid, offset } => MountError::Short {
                oid: oid.clone(),
                offset: *offset,
            },
            MountError::NoFuse(s) => MountError::NoFuse(s.clone()),
            MountError::BadTree(s) => MountError::BadTree(s.clone()),
            other => MountError::Unavailable(other.to_string()),
        }
    }
}

/// Whether `dir` (an absolute, canonical path) is a mount point, from /proc/self/mountinfo.
pub fn is_mounted(dir: &Path) -> bool {
    mount_device(dir).is_some()
}

/// The device of the topmost mount on `dir` (an absolute, canonical path), as
/// /proc/self/mountinfo writes it (`major:minor`): it tells one mount on a directory from a
/// later one on the same directory.
pub fn mount_device(dir: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = dir.to_string_lossy();
    // Later lines are mounted later: the last one on a directory is the one seen there.
    info.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let device = fields.nth(2)?;
        let mount_point = fields.nth(1)?;
        (unescape_mount_path(mount_point) == wanted).then(|| device.to_string())
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
            out.push(v as u8); // at most \377 in practice
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/a\\04"), "/a\\04");
        assert!(is_mounted(Path::new("/proc")));
        assert!(!is_mounted(Path::new("/no/such/dir")));
    }

    #[test]
    fn the_mount_device_is_the_one_stat_sees() {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata("/proc").unwrap().dev();
        let expected = format!("{}:{}", libc::major(dev), libc::minor(dev));
        assert_eq!(mount_device(Path::new("/proc")), Some(expected));
        assert_eq!(mount_device(Path::new("/no/such/dir")), None);
    }
}
