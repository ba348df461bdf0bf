//! Object storage for xorbs and shards, behind a small async trait so that an S3-compatible
//! backend (the `object_store` crate) can replace the local directory without touching the
//! handlers. Objects are immutable and content-addressed: a key names its bytes forever.

mod fallback;
mod fs;
mod s3;
mod s3_probe;
mod sigv4;

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;
use futures::stream::BoxStream;

pub use fallback::FallbackStore;
pub use fs::FsStore;
pub use s3::S3Store;
pub use s3_probe::S3ProbeError;

use git_xet_core::MerkleHash;
use git_xet_io::platform::mmap::Mapper;

/// Bytes `offset..offset + len` of a stored or staged object, which the caller has checked
/// against the file's size, as a read-only mapping: serving xorb data from it sends page-cache
/// pages to the socket without copying them into a buffer. The pages are read in before this
/// returns (no disk wait on the runtime's workers): call it on a blocking thread. Ranges are
/// small (a few MiB), so memory stays bounded by the blocks in flight.
pub fn map_range(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Bytes> {
    // SAFETY: objects are written once (staged, then linked into place) and never truncated
    // or rewritten, so a mapping cannot lose its pages underneath.
    unsafe { Mapper::new() }.map_range(file, offset, len, true)
}

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

/// A stored object as a listing sees it (garbage collection, checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: ObjectKey,
    pub len: u64,
    /// When it was stored: gc keeps objects younger than its grace period, since an upload
    /// stores xorbs before the shard that references them.
    pub modified: std::time::SystemTime,
}

/// A local file receiving an object's bytes before they are validated and stored: large
/// uploads are written here as they arrive and validated through a mapping of it, so the
/// server never holds a whole xorb in its heap. Dropped without being stored, it is deleted.
pub struct Staged {
    file: std::fs::File,
    path: tempfile::TempPath,
}

impl Staged {
    pub fn new(file: tempfile::NamedTempFile) -> Staged {
        let (file, path) = file.into_parts();
        Staged { file, path }
    }

    /// A new, empty staging file in `dir`, a store's staging directory (`stage()` of the
    /// directory and the S3 stores).
    pub fn create_in(dir: &std::path::Path) -> std::io::Result<Staged> {
        let file = tempfile::Builder::new()
            .prefix(".stage-")
            .tempfile_in(dir)?;
        Ok(Staged::new(file))
    }

    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    pub fn into_parts(self) -> (std::fs::File, tempfile::TempPath) {
        (self.file, self.path)
    }
}

/// Identifies the bytes an object holds: two reads that report equal versions read the same
/// bytes. S3's ETag; on the directory store (write-once), the file's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion(pub String);

/// The last bytes of a stored object, its size and version, all from one read.
#[derive(Debug, Clone)]
pub struct ObjectTail {
    pub bytes: Bytes,
    pub len: u64,
    pub version: ObjectVersion,
}

/// Immutable object storage.
pub trait ObjectStore: Send + Sync + 'static {
    /// Stores `data` under `key` so that readers see either nothing or all of it, and it
    /// survives a crash once this returns. Returns `false` if the object already existed
    /// (its bytes are then left as they were: keys are content hashes).
    fn put(&self, key: ObjectKey, data: Bytes) -> BoxFuture<'_, std::io::Result<bool>>;

    /// A new, empty staging file (blocking: call it off the async workers). A local store
    /// puts it on its own filesystem, so that storing it is a rename.
    fn stage(&self) -> std::io::Result<Staged>;

    /// Stores the bytes written to `staged` under `key`, with the guarantees of [`put`].
    ///
    /// [`put`]: ObjectStore::put
    fn put_staged(&self, key: ObjectKey, staged: Staged) -> BoxFuture<'_, std::io::Result<bool>>;

    /// [`put_staged`] that says what it wrote: `Some(version)` when this call stored the
    /// object, `None` when it was found there (then left as it was). Two writers of one key
    /// may hold different bytes (a xorb has several valid layouts): a store that can refuse to
    /// overwrite does, one that cannot (Garage) may let the last writer win, which is why
    /// callers compare versions after writing (the server's `cas/stored_xorb.rs`). Callers ask
    /// [`version`] first to skip sending an object already stored.
    ///
    /// [`version`]: ObjectStore::version
    ///
    /// [`put_staged`]: ObjectStore::put_staged
    fn put_staged_versioned(
        &self,
        key: ObjectKey,
        staged: Staged,
    ) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>>;

    /// The version of the object's current bytes, or `None` when absent.
    fn version(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>>;

    /// The object's last `max` bytes (all of it if shorter), with its size and version.
    fn read_tail(&self, key: ObjectKey, max: u64) -> BoxFuture<'_, std::io::Result<ObjectTail>>;

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

    /// Every stored object of `kind`, in no particular order. Objects stored or deleted
    /// while the listing runs may or may not appear.
    fn list(&self, kind: ObjectKind) -> BoxStream<'_, std::io::Result<ObjectInfo>>;

    /// Deletes the object; `Ok(false)` when it was already absent.
    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<bool>>;

    /// A URL that lets anyone holding it GET bytes `range` of the object straight from the
    /// store for `expires_in`, or `None` when the store has no such URLs (a local directory).
    /// The store refuses the URL with any other `Range` (or none): the range is signed.
    fn presign_get(
        &self,
        _key: ObjectKey,
        _range: Range<u64>,
        _expires_in: std::time::Duration,
    ) -> BoxFuture<'_, std::io::Result<Option<String>>> {
        Box::pin(async { Ok(None) })
    }
}
