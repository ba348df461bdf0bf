//! The local-directory object store: `xorbs/ab/<hash>.xorb`, `shards/ab/<hash>.shard`.
//!
//! Writes go to `tmp/` on the same filesystem, are fsynced, then renamed into place and the
//! directory fsynced, so an object is either absent or complete, even after a power loss.
//! Leftovers in `tmp/` (a crash mid-write) are removed at startup.

use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::server::storage::{BoxFuture, ByteStream, ObjectKey, ObjectKind, ObjectStore};

/// Read size of streamed ranges.
const STREAM_BUFFER: usize = 256 * 1024;

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
        let (dir, ext) = match key.kind {
            ObjectKind::Xorb => ("xorbs", "xorb"),
            ObjectKind::Shard => ("shards", "shard"),
        };
        let hex = key.hash.to_hex();
        self.root
            .join(dir)
            .join(&hex[..2])
            .join(format!("{hex}.{ext}"))
    }

    fn put_blocking(&self, key: ObjectKey, data: &[u8]) -> std::io::Result<bool> {
        let path = self.path(&key);
        if path.exists() {
            return Ok(false);
        }
        let dir = path.parent().expect("object path has a parent");
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".put-")
            .tempfile_in(&self.tmp)?;
        tmp.write_all(data)?;
        if self.fsync {
            tmp.as_file().sync_all()?;
        }
        // A concurrent writer of the same key wrote the same bytes; either rename wins.
        tmp.persist(&path).map_err(|e| e.error)?;
        if self.fsync {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(true)
    }
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
                let mut file = std::fs::File::open(&path)?;
                check_range(&range, file.metadata()?.len())?;
                file.seek(SeekFrom::Start(range.start))?;
                let mut buf = vec![0u8; (range.end - range.start) as usize];
                file.read_exact(&mut buf)?;
                Ok(Bytes::from(buf))
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
            let mut file = tokio::fs::File::open(&path).await?;
            check_range(&range, file.metadata().await?.len())?;
            file.seek(SeekFrom::Start(range.start)).await?;
            let reader = file.take(range.end - range.start);
            let stream = tokio_util::io::ReaderStream::with_capacity(reader, STREAM_BUFFER);
            Ok(stream.boxed())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xet::MerkleHash;

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
}
