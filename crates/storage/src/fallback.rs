//! `--object-store-fallback`: during a move of the object store (docs/server-operations.md, "Moving the
//! object store"), the servers write to the new store and read what it lacks from the old
//! one, so that objects stored in the old store after the bulk copy, and before every server
//! was restarted, stay readable until `storage migrate` has copied them too. The old store is
//! never written or deleted from.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::{
    BoxFuture, ByteStream, ObjectInfo, ObjectKey, ObjectKind, ObjectStore, ObjectTail,
    ObjectVersion, Staged,
};

pub struct FallbackStore {
    primary: Arc<dyn ObjectStore>,
    fallback: Arc<dyn ObjectStore>,
}

impl FallbackStore {
    pub fn new(primary: Arc<dyn ObjectStore>, fallback: Arc<dyn ObjectStore>) -> FallbackStore {
        FallbackStore { primary, fallback }
    }
}

fn missing(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

impl ObjectStore for FallbackStore {
    fn put(&self, key: ObjectKey, data: Bytes) -> BoxFuture<'_, std::io::Result<bool>> {
        self.primary.put(key, data)
    }

    fn stage(&self) -> std::io::Result<Staged> {
        self.primary.stage()
    }

    fn put_staged(&self, key: ObjectKey, staged: Staged) -> BoxFuture<'_, std::io::Result<bool>> {
        self.primary.put_staged(key, staged)
    }

    fn put_staged_versioned(
        &self,
        key: ObjectKey,
        staged: Staged,
    ) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        self.primary.put_staged_versioned(key, staged)
    }

    fn version(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        Box::pin(async move {
            match self.primary.version(key).await? {
                Some(v) => Ok(Some(v)),
                None => self.fallback.version(key).await,
            }
        })
    }

    fn read_tail(&self, key: ObjectKey, max: u64) -> BoxFuture<'_, std::io::Result<ObjectTail>> {
        Box::pin(async move {
            match self.primary.read_tail(key, max).await {
                Err(e) if missing(&e) => self.fallback.read_tail(key, max).await,
                other => other,
            }
        })
    }

    fn len(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<u64>>> {
        Box::pin(async move {
            match self.primary.len(key).await? {
                Some(n) => Ok(Some(n)),
                None => self.fallback.len(key).await,
            }
        })
    }

    fn read_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<Bytes>> {
        Box::pin(async move {
            match self.primary.read_range(key, range.clone()).await {
                Err(e) if missing(&e) => self.fallback.read_range(key, range).await,
                other => other,
            }
        })
    }

    fn stream_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<ByteStream>> {
        Box::pin(async move {
            match self.primary.stream_range(key, range.clone()).await {
                Err(e) if missing(&e) => self.fallback.stream_range(key, range).await,
                other => other,
            }
        })
    }

    /// Both stores' objects (one present in both may be listed twice).
    fn list(&self, kind: ObjectKind) -> BoxStream<'_, std::io::Result<ObjectInfo>> {
        self.primary
            .list(kind)
            .chain(self.fallback.list(kind))
            .boxed()
    }

    /// From the new store only: the old one is left as it was.
    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<bool>> {
        self.primary.delete(key)
    }

    fn presign_get(
        &self,
        key: ObjectKey,
        range: Range<u64>,
        expires_in: std::time::Duration,
    ) -> BoxFuture<'_, std::io::Result<Option<String>>> {
        Box::pin(async move {
            match self.primary.len(key).await? {
                Some(_) => self.primary.presign_get(key, range, expires_in).await,
                None => self.fallback.presign_get(key, range, expires_in).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsStore;
    use futures::TryStreamExt;
    use git_xet_core::MerkleHash;

    #[tokio::test]
    async fn reads_fall_back_to_the_old_store_and_writes_stay_in_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str| -> Arc<dyn ObjectStore> {
            let root = dir.path().join(name);
            Arc::new(FsStore::open(&root, &root.join("tmp"), false).unwrap())
        };
        let (new, old) = (open("new"), open("old"));
        let store = FallbackStore::new(new.clone(), old.clone());
        let before = ObjectKey::xorb(MerkleHash::from_bytes([1; 32]));
        let after = ObjectKey::xorb(MerkleHash::from_bytes([2; 32]));
        old.put(before, Bytes::from_static(b"stored before"))
            .await
            .unwrap();
        assert_eq!(store.len(before).await.unwrap(), Some(13));
        assert!(store.version(before).await.unwrap().is_some());
        assert_eq!(
            &store.read_range(before, 7..13).await.unwrap()[..],
            b"before"
        );
        assert_eq!(
            &store.read_tail(before, 6).await.unwrap().bytes[..],
            b"before"
        );
        assert!(store
            .put(after, Bytes::from_static(b"after"))
            .await
            .unwrap());
        assert_eq!(new.len(after).await.unwrap(), Some(5));
        assert_eq!(old.len(after).await.unwrap(), None);
        let listed: Vec<_> = store.list(ObjectKind::Xorb).try_collect().await.unwrap();
        assert_eq!(listed.len(), 2);
        // Deleting never reaches the old store.
        assert!(!store.delete(before).await.unwrap());
        assert_eq!(old.len(before).await.unwrap(), Some(13));
        let missing = ObjectKey::xorb(MerkleHash::from_bytes([3; 32]));
        let err = store.read_range(missing, 0..1).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
