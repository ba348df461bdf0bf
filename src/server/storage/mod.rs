//! Object storage for xorbs and shards, behind a small async trait so that an S3-compatible
//! backend (the `object_store` crate) can replace the local directory without touching the
//! handlers. Objects are immutable and content-addressed: a key names its bytes forever.

mod fs;

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;
use futures::stream::BoxStream;

pub use fs::FsStore;

use crate::xet::MerkleHash;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
pub type ByteStream = BoxStream<'static, std::io::Result<Bytes>>;

/// What an object is; backends lay kinds out separately (e.g. `xorbs/` and `shards/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    Xorb,
    Shard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    pub hash: MerkleHash,
}

impl ObjectKey {
    pub fn xorb(hash: MerkleHash) -> Self {
        ObjectKey {
            kind: ObjectKind::Xorb,
            hash,
        }
    }

    pub fn shard(hash: MerkleHash) -> Self {
        ObjectKey {
            kind: ObjectKind::Shard,
            hash,
        }
    }
}

/// Immutable object storage.
pub trait ObjectStore: Send + Sync + 'static {
    /// Stores `data` under `key` so that readers see either nothing or all of it, and it
    /// survives a crash once this returns. Returns `false` if the object already existed
    /// (its bytes are then left as they were: keys are content hashes).
    fn put(&self, key: ObjectKey, data: Bytes) -> BoxFuture<'_, std::io::Result<bool>>;

    /// The object's size, or `None` when absent.
    fn len(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<u64>>>;

    /// Bytes `range` of the object, in memory. Callers keep ranges small (a few MiB).
    fn read_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<Bytes>>;

    /// Bytes `range` of the object as a stream, for sending large ranges with bounded memory.
    fn stream_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<ByteStream>>;
}
