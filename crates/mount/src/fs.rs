//! The file system of a mount, whatever the kernel interface: the inode table of a
//! revision, and reads: git blobs from git's objects, LFS objects from `.git/lfs/objects`
//! when present (no request), else in blocks from the remote.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::block_data::Data;
use crate::blocks::{BlockCache, RangeSource};
use crate::tree::{self, Content, InodeTable, Node};
use crate::MountError;
use git_xet_git::command::Git;
use git_xet_lfs::store::LfsStore;

/// Git blobs kept in memory (non-LFS files are small as a rule).
const BLOB_CACHE_BYTES: usize = 64 << 20;

/// What kind of node an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// What `stat` shows of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub executable: bool,
    /// The commit's time, for every node.
    pub mtime: SystemTime,
}

/// A mounted revision.
pub struct MountFs<S: RangeSource> {
    table: InodeTable,
    git: Git,
    store: LfsStore,
    blocks: BlockCache<S>,
    mtime: SystemTime,
    blobs: Mutex<BlobCache>,
}

#[derive(Default)]
struct BlobCache {
    blobs: HashMap<String, (Arc<Vec<u8>>, u64)>,
    bytes: usize,
    tick: u64,
}

impl<S: RangeSource> MountFs<S> {
    /// The tree of `rev` in the repository `git` runs in; LFS objects from `store` when
    /// present, else from `source`; a read waits at most `timeout` for the network.
    pub fn new(
        git: Git,
        store: LfsStore,
        rev: &str,
        source: S,
        timeout: Duration,
    ) -> Result<Self, MountError> {
        let table = tree::load(&git, rev)?;
        let time = git.run(["show", "-s", "--format=%ct", &format!("{rev}^{{commit}}")])?;
        let mtime = UNIX_EPOCH + Duration::from_secs(time.trim().parse().unwrap_or(0));
        Ok(MountFs {
            table,
            git,
            store,
            blocks: BlockCache::new(source, timeout),
            mtime,
            blobs: Default::default(),
        })
    }

    pub fn table(&self) -> &InodeTable {
        &self.table
    }

    pub fn blocks(&self) -> &BlockCache<S> {
        &self.blocks
    }

    pub fn attr(&self, ino: u64) -> Option<Attr> {
        let (kind, size, executable) = match self.table.get(ino)? {
            Node::Dir { .. } => (Kind::Dir, 0, true),
            Node::File {
                size, executable, ..
            } => (Kind::File, *size, *executable),
            Node::Symlink { target } => (Kind::Symlink, target.len() as u64, false),
        };
        Some(Attr {
            ino,
            kind,
            size,
            executable,
            mtime: self.mtime,
        })
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Option<Attr> {
        self.attr(self.table.lookup(parent, name)?)
    }

    /// A directory's entries with `.` and `..` first; None if `ino` is not a directory.
    pub fn children(&self, ino: u64) -> Option<Vec<(u64, Kind, OsString)>> {
        let Node::Dir { parent, children } = self.table.get(ino)? else {
            return None;
        };
        let mut out = vec![
            (ino, Kind::Dir, OsString::from(".")),
            (*parent, Kind::Dir, OsString::from("..")),
        ];
        for (name, &child) in children {
            let kind = self.attr(child).map_or(Kind::File, |a| a.kind);
            out.push((child, kind, name.clone()));
        }
        Some(out)
    }

    pub fn readlink(&self, ino: u64) -> Option<&[u8]> {
        match self.table.get(ino)? {
            Node::Symlink { target } => Some(target),
            _ => None,
        }
    }

    /// Bytes `offset..offset + size` of the file `ino` (fewer at its end).
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Data, MountError> {
        let Some(Node::File { content, .. }) = self.table.get(ino) else {
            return Err(MountError::NotFound);
        };
        match content {
            Content::Blob(oid) => {
                let blob = self.blob(oid)?;
                let start = (offset.min(blob.len() as u64)) as usize;
                let end = start.saturating_add(size as usize).min(blob.len());
                Ok(blob[start..end].to_vec().into())
            }
            Content::Lfs(pointer) => {
                if let Some(path) = self.store.find(&pointer.oid, pointer.size) {
                    return read_local(&path, offset, size, pointer.size).map(Data::from);
                }
                self.blocks.read(pointer, offset, size)
            }
        }
    }

    fn blob(&self, oid: &str) -> Result<Arc<Vec<u8>>, MountError> {
        {
            let mut cache = self.blobs.lock().expect("blobs");
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((blob, used)) = cache.blobs.get_mut(oid) {
                *used = tick;
                return Ok(blob.clone());
            }
        }
        let blob = Arc::new(self.git.run_bytes(["cat-file", "blob", oid], None)?);
        let mut cache = self.blobs.lock().expect("blobs");
        cache.bytes += blob.len();
        let tick = cache.tick;
        cache.blobs.insert(oid.to_string(), (blob.clone(), tick));
        while cache.bytes > BLOB_CACHE_BYTES && cache.blobs.len() > 1 {
            let oldest = cache
                .blobs
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            if let Some((b, _)) = cache.blobs.remove(&oldest) {
                cache.bytes -= b.len();
            }
        }
        Ok(blob)
    }
}

/// A range of an object present in `.git/lfs/objects`.
fn read_local(
    path: &std::path::Path,
    offset: u64,
    size: u32,
    len: u64,
) -> Result<Vec<u8>, MountError> {
    let end = len.min(offset.saturating_add(u64::from(size)));
    if offset >= end {
        return Ok(Vec::new());
    }
    let file = std::fs::File::open(path).map_err(|e| MountError::io(path, e))?;
    let mut buf = vec![0u8; (end - offset) as usize];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| MountError::io(path, e))?;
    Ok(buf)
}

#[cfg(test)]
#[path = "fs_tests.rs"]
mod tests;
