//! The local-directory object store: `xorbs/ab/<hash>.xorb`, `shards/ab/<hash>.shard`.
//!
//! Writes go to `tmp/` on the same filesystem, are fsynced, then linked into place (never
//! over an existing object: write-once per key) and the directory fsynced, so an object is
//! either absent or complete, even after a power loss, and once there it never changes.
//! Leftovers in `tmp/` (a crash mid-write) are removed at startup.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;

use crate::{
    map_range, BoxFuture, ByteStream, ObjectInfo, ObjectKey, ObjectKind, ObjectStore, ObjectTail,
    ObjectVersion, Staged,
};
use git_xet_core::MerkleHash;

/// Size of the blocks a streamed range is sent in.
const STREAM_BLOCK: u64 = 2 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
    tmp: PathBuf,
    fsync: bool,
}

impl FsStore {
    /// Opens (creating) the store under `root`; `tmp` must be on the same filesystem.
    pub fn open(root: &Path, tmp: &Path, fsync: bool) -> std::io::Result<FsStore> {
        for kind in ["xorbs", "shards"] {
            std::fs::create_dir_all(root.join(kind))?;
        }
        std::fs::create_dir_all(tmp)?;
        Ok(FsStore {
            root: root.to_path_buf(),
            tmp: tmp.to_path_buf(),
            fsync,
        })
    }

    pub fn path(&self, key: &ObjectKey) -> PathBuf {
        let (dir, ext) = layout(key.kind);
        let hex = key.hash.to_hex();
        self.root
            .join(dir)
            .join(&hex[..2])
            .join(format!("{hex}.{ext}"))
    }

    fn put_blocking(&self, key: ObjectKey, data: &[u8]) -> std::io::Result<bool> {
        if self.path(&key).exists() {
            return Ok(false);
        }
        let mut tmp = tempfile::Builder::new()
            .prefix(".put-")
            .tempfile_in(&self.tmp)?;
        tmp.write_all(data)?;
        Ok(self.commit(key, Staged::new(tmp))?.is_some())
    }

    /// Makes a fully written staging file the object `key`: fsync, link into place, fsync
    /// the directory; returns the new object's version. An existing object is kept as it is
    /// and the staging file deleted (`None`): a concurrent writer of the same key may hold
    /// other bytes (another layout of one xorb), and replacing them would pull them from
    /// under what the index says of them.
    fn commit(&self, key: ObjectKey, staged: Staged) -> std::io::Result<Option<ObjectVersion>> {
        let path = self.path(&key);
        if path.exists() {
            return Ok(None);
        }
        let dir = path.parent().expect("object path has a parent");
        std::fs::create_dir_all(dir)?;
        let (file, tmp) = staged.into_parts();
        if self.fsync {
            file.sync_all()?;
        }
        // link(2) (or renameat2 with RENAME_NOREPLACE): fails when the key exists.
        match tmp.persist_noclobber(&path) {
            Ok(()) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(e.error),
        }
        if self.fsync {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(Some(file_version(&file.metadata()?)))
    }

    fn read_tail_blocking(&self, key: ObjectKey, max: u64) -> std::io::Result<ObjectTail> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(self.path(&key))?;
        let meta = file.metadata()?;
        let len = meta.len();
        let n = max.min(len);
        let mut bytes = vec![0u8; n as usize];
        file.read_exact_at(&mut bytes, len - n)?;
        Ok(ObjectTail {
            bytes: bytes.into(),
            len,
            version: file_version(&meta),
        })
    }
}

/// A stored file's identity: objects are never rewritten in place, so the inode, size and
/// modification time name its bytes (a delete and re-store gives a new one).
fn file_version(meta: &std::fs::Metadata) -> ObjectVersion {
    use std::os::unix::fs::MetadataExt;
    ObjectVersion(format!(
        "{}:{}:{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

/// Directory and file extension of a kind of object.
fn layout(kind: ObjectKind) -> (&'static str, &'static str) {
    match kind {
        ObjectKind::Xorb => ("xorbs", "xorb"),
        ObjectKind::Shard => ("shards", "shard"),
    }
}

/// Every object of `kind` under `root`: `DIR/ab/<hash>.EXT`. Other names (a stray file, an
/// editor's backup) are skipped, never deleted or reported as objects.
fn list_blocking(root: &Path, kind: ObjectKind) -> std::io::Result<Vec<ObjectInfo>> {
    let (dir, ext) = layout(kind);
    let mut out = Vec::new();
    let top = match std::fs::read_dir(root.join(dir)) {
        Ok(top) => top,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for sub in top {
        let sub = sub?;
        if !sub.file_type()?.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(sub.path())? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(hash) = name
                .to_str()
                .and_then(|n| n.strip_suffix(ext)?.strip_suffix('.'))
                .and_then(|hex| MerkleHash::from_hex(hex).ok())
            else {
                continue;
            };
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                // Deleted since the directory was read.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            out.push(ObjectInfo {
                key: ObjectKey { kind, hash },
                len: meta.len(),
                modified: meta.modified()?,
            });
        }
    }
    Ok(out)
}

fn check_range(range: &Range<u64>, len: u64) -> std::io::Result<()> {
    if range.start > range.end || range.end > len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("range {range:?} is outside an object of {len} bytes"),
        ));
    }
    Ok(())
}

impl ObjectStore for FsStore {
    fn put(&self, key: ObjectKey, data: Bytes) -> BoxFuture<'_, std::io::Result<bool>> {
        let store = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.put_blocking(key, &data))
                .await
                .map_err(std::io::Error::other)?
        })
    }

    fn stage(&self) -> std::io::Result<Staged> {
        Staged::create_in(&self.tmp)
    }

    fn put_staged(&self, key: ObjectKey, staged: Staged) -> BoxFuture<'_, std::io::Result<bool>> {
        let put = self.put_staged_versioned(key, staged);
        Box::pin(async move { Ok(put.await?.is_some()) })
    }

    fn put_staged_versioned(
        &self,
        key: ObjectKey,
        staged: Staged,
    ) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        let store = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.commit(key, staged))
                .await
                .map_err(std::io::Error::other)?
        })
    }

    fn version(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        let path = self.path(&key);
        Box::pin(async move {
            match tokio::fs::metadata(&path).await {
                Ok(m) => Ok(Some(file_version(&m))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn read_tail(&self, key: ObjectKey, max: u64) -> BoxFuture<'_, std::io::Result<ObjectTail>> {
        let store = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.read_tail_blocking(key, max))
                .await
                .map_err(std::io::Error::other)?
        })
    }

    fn len(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<u64>>> {
        let path = self.path(&key);
        Box::pin(async move {
            match tokio::fs::metadata(&path).await {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn read_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<Bytes>> {
        let path = self.path(&key);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let file = open_checked(&path, &range)?;
                map_range(&file, range.start, (range.end - range.start) as usize)
            })
            .await
            .map_err(std::io::Error::other)?
        })
    }

    fn stream_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<ByteStream>> {
        let path = self.path(&key);
        Box::pin(async move {
            let open = {
                let range = range.clone();
                tokio::task::spawn_blocking(move || open_checked(&path, &range))
            };
            let file = Arc::new(open.await.map_err(std::io::Error::other)??);
            // Blocks are mapped one at a time, as the network takes them: at most a couple
            // of blocks per stream are resident, and no byte is copied on the way out.
            let blocks = futures::stream::unfold(Some(range.start), move |next| {
                let file = file.clone();
                async move {
                    let pos = next?;
                    if pos >= range.end {
                        return None;
                    }
                    let n = (range.end - pos).min(STREAM_BLOCK);
                    let block =
                        tokio::task::spawn_blocking(move || map_range(&file, pos, n as usize))
                            .await
                            .map_err(std::io::Error::other)
                            .and_then(|b| b);
                    let next = block.is_ok().then_some(pos + n);
                    Some((block, next))
                }
            });
            Ok(blocks.boxed())
        })
    }

    fn list(
        &self,
        kind: ObjectKind,
    ) -> futures::stream::BoxStream<'_, std::io::Result<ObjectInfo>> {
        let root = self.root.clone();
        let listing = async move {
            let found = tokio::task::spawn_blocking(move || list_blocking(&root, kind))
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r);
            let items: Vec<std::io::Result<ObjectInfo>> = match found {
                Ok(found) => found.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            futures::stream::iter(items)
        };
        futures::stream::once(listing).flatten().boxed()
    }

    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<bool>> {
        let path = self.path(&key);
        let fsync = self.fsync;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || match std::fs::remove_file(&path) {
                Ok(()) => {
                    if fsync {
                        if let Some(dir) = path.parent() {
                            std::fs::File::open(dir)?.sync_all()?;
                        }
                    }
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            })
            .await
            .map_err(std::io::Error::other)?
        })
    }
}

/// Opens an object, checking `range` against its size.
fn open_checked(path: &Path, range: &Range<u64>) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::open(path)?;
    check_range(range, file.metadata()?.len())?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::MerkleHash;

    #[tokio::test]
    async fn put_is_idempotent_and_ranges_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path(), &dir.path().join("tmp"), true).unwrap();
        let key = ObjectKey::xorb(MerkleHash::from_bytes([3; 32]));
        assert_eq!(store.len(key).await.unwrap(), None);
        assert!(store
            .put(key, Bytes::from_static(b"hello world"))
            .await
            .unwrap());
        assert!(!store
            .put(key, Bytes::from_static(b"hello world"))
            .await
            .unwrap());
        assert_eq!(store.len(key).await.unwrap(), Some(11));
        assert_eq!(&store.read_range(key, 6..11).await.unwrap()[..], b"world");
        let mut stream = store.stream_range(key, 0..5).await.unwrap();
        let mut got = Vec::new();
        while let Some(part) = stream.next().await {
            got.extend_from_slice(&part.unwrap());
        }
        assert_eq!(got, b"hello");
        assert!(store.read_range(key, 5..12).await.is_err());
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }

    /// Two writers of one key with different bytes (two layouts of one xorb): the first
    /// stays, the second is told so, and versions and tails describe the first.
    #[tokio::test]
    async fn a_stored_object_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path(), &dir.path().join("tmp"), true).unwrap();
        let key = ObjectKey::xorb(MerkleHash::from_bytes([5; 32]));
        let staged = |bytes: &[u8]| {
            let staged = store.stage().unwrap();
            let mut file = staged.file();
            file.write_all(bytes).unwrap();
            staged
        };
        let (first, second) = (staged(b"first layout"), staged(b"second, longer layout"));
        assert_eq!(store.version(key).await.unwrap(), None);
        let v1 = store.put_staged_versioned(key, first).await.unwrap();
        assert!(v1.is_some());
        assert_eq!(store.put_staged_versioned(key, second).await.unwrap(), None);
        assert_eq!(store.version(key).await.unwrap(), v1);
        let tail = store.read_tail(key, 6).await.unwrap();
        assert_eq!((&tail.bytes[..], tail.len), (&b"layout"[..], 12));
        assert_eq!(Some(tail.version), v1);
        assert_eq!(store.read_tail(key, 100).await.unwrap().bytes.len(), 12);
        // The loser's staging file is gone.
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }

    #[tokio::test]
    async fn lists_and_deletes_objects_of_one_kind() {
        use futures::TryStreamExt;
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path(), &dir.path().join("tmp"), false).unwrap();
        let xorb = ObjectKey::xorb(MerkleHash::from_bytes([7; 32]));
        let shard = ObjectKey::shard(MerkleHash::from_bytes([8; 32]));
        store.put(xorb, Bytes::from_static(b"xorb")).await.unwrap();
        store
            .put(shard, Bytes::from_static(b"shard!"))
            .await
            .unwrap();
        // Not an object: skipped by the listing.
        std::fs::write(dir.path().join("xorbs/07/notes.txt"), b"x").unwrap();
        let xorbs: Vec<_> = store.list(ObjectKind::Xorb).try_collect().await.unwrap();
        assert_eq!(xorbs.len(), 1);
        assert_eq!((xorbs[0].key, xorbs[0].len), (xorb, 4));
        let shards: Vec<_> = store.list(ObjectKind::Shard).try_collect().await.unwrap();
        assert_eq!((shards[0].key, shards[0].len), (shard, 6));
        assert!(store.delete(xorb).await.unwrap());
        assert!(!store.delete(xorb).await.unwrap());
        assert_eq!(store.len(xorb).await.unwrap(), None);
        assert!(dir.path().join("xorbs/07/notes.txt").exists());
    }
}
