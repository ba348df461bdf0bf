//! The index: which xorbs are stored and what is in them, which files are registered and
//! how to rebuild them, which repository may see which file, and where chunks live.
//!
//! Behind a small synchronous trait (callers run it on blocking threads): the embedded
//! SQLite index and the shared PostgreSQL one serve the same handlers, and report failures
//! as the same backend-neutral [`IndexError`].
//! Every `register_*` call is one transaction: after a crash it either happened or not.
//!
//! Features: `sqlite` ([`SqliteIndex`]) and `postgres` ([`PgIndex`]), both on by default.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod columns;
pub mod dump;
pub mod gc;
pub mod locks;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod meta_cache;
#[cfg(feature = "postgres")]
mod postgres;
pub mod repo_name;
pub mod repos;
pub mod scope;
#[cfg(feature = "sqlite")]
mod sqlite;
pub mod stats;
pub mod tokens;
pub mod verify;

use std::sync::Arc;

pub use locks::{Lock, LockIndex, LockOutcome, LockPage, LockQuery};
#[cfg(feature = "postgres")]
pub use postgres::PgIndex;
pub use repo_name::{InvalidRepoName, RepoName};
pub use repos::RepoIndex;
pub use scope::{DedupDomain, DedupScope};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteIndex;
pub use tokens::{TokenIndex, TokenRecord};

use git_xet_core::shard::FileTerm;
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;

/// A backend's own error, kept under a neutral variant for the message chain only: callers
/// decide by the variant, never by what is in here.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong in the index, whatever its backend: each backend maps its own errors into
/// these variants in one place (`sqlite/error.rs`, `postgres/error.rs`).
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The index cannot be reached or opened now (database down, restarting, refusing
    /// connections or out of resources; a file the server cannot open): a later try may work.
    #[error("the index is unavailable: {reason}")]
    Unavailable {
        reason: String,
        #[source]
        source: Option<BackendError>,
    },
    /// Other writers kept what this one needs locked for longer than it waits (or kept
    /// aborting it in conflicts): a later try may work.
    #[error("the index is busy: other writers kept it locked; retry shortly")]
    Busy {
        #[source]
        source: BackendError,
    },
    /// The disk (or quota) under the index is full: nothing was written.
    #[error("the index's disk is full")]
    DiskFull {
        #[source]
        source: BackendError,
    },
    /// The database engine found its own files damaged.
    #[error("the index database is damaged: restore it from a backup")]
    Damaged {
        #[source]
        source: BackendError,
    },
    /// What the index holds breaks an invariant of ours (a blob of the wrong length...).
    #[error("index is inconsistent: {0}")]
    Corrupt(String),
    /// A newer server upgraded the index's schema.
    #[error(
        "the index has schema version {found}, newer than this server's {known}: upgrade \
         git-xet on every process sharing it"
    )]
    SchemaTooNew { found: i64, known: i64 },
    /// The xorb is being (or was) garbage-collected: it must be uploaded again.
    #[error("xorb {0} is no longer stored on this server (garbage-collected); upload it again, then the shard")]
    XorbCollected(MerkleHash),
    /// Anything else the backend reported (a failed query, a value of an unexpected type).
    #[error("the index failed: {detail}")]
    Internal {
        detail: String,
        #[source]
        source: Option<BackendError>,
    },
}

pub type IndexResult<T> = Result<T, IndexError>;

impl IndexError {
    /// The error and its causes on one line, for messages that travel without the chain
    /// (HTTP answers).
    pub fn with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            // Backends often repeat their cause in their own message.
            let c_text = c.to_string();
            if !text.contains(&c_text) {
                text.push_str(": ");
                text.push_str(&c_text);
            }
            cause = c.source();
        }
        text
    }
}

/// A stored xorb's layout: its footer (chunk hashes, record and uncompressed end offsets)
/// and its serialized size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XorbMeta {
    pub footer: XorbFooter,
    pub stored_len: u64,
}

impl XorbMeta {
    pub fn hash(&self) -> MerkleHash {
        self.footer.hash
    }

    pub fn num_chunks(&self) -> usize {
        self.footer.num_chunks()
    }

    /// Uncompressed size of chunk `i`.
    pub fn chunk_len(&self, i: u32) -> u32 {
        self.footer.unpacked_chunk_len(i as usize)
    }

    /// Chunk hashes and sizes of chunks `start..end`.
    pub fn chunks(&self, start: u32, end: u32) -> impl Iterator<Item = (MerkleHash, u64)> + '_ {
        (start..end).map(|i| {
            (
                self.footer.chunk_hashes[i as usize],
                u64::from(self.chunk_len(i)),
            )
        })
    }
}

/// A registered file: how to rebuild it, and its size and sha256 (conventional digest bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub file_hash: MerkleHash,
    pub size: u64,
    pub sha256: [u8; 32],
    pub terms: Vec<FileTerm>,
}

/// Everything a validated shard registers, applied in one transaction.
#[derive(Debug, Clone)]
pub struct ShardRegistration {
    /// Identifies the uploaded shard (a hash of its bytes).
    pub shard_hash: MerkleHash,
    pub shard_len: u64,
    /// The repository whose token uploaded it: its files become visible there.
    pub repo: RepoName,
    /// The dedup domain it was validated in (scope.rs): outside the whole-server domain the
    /// repository keeps its own record of each file (its terms), see [`Index::repo_file`].
    pub domain: DedupDomain,
    pub files: Vec<FileRecord>,
    /// (first chunk hash, file hash) of each non-empty file: global-dedup eligible chunks.
    pub first_chunks: Vec<(MerkleHash, MerkleHash)>,
}

impl ShardRegistration {
    /// The xorbs its files reference, each once, in byte order (the lock order of every
    /// backend's transaction).
    pub fn referenced_xorbs(&self) -> Vec<MerkleHash> {
        let mut xorbs: Vec<MerkleHash> = self
            .files
            .iter()
            .flat_map(|f| f.terms.iter().map(|t| t.xorb_hash))
            .collect();
        xorbs.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        xorbs.dedup();
        xorbs
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegisterOutcome {
    pub new_shard: bool,
    pub new_files: u64,
    pub new_repo_files: u64,
}

impl RegisterOutcome {
    /// Whether the registration changed anything.
    pub fn changed(&self) -> bool {
        self.new_shard || self.new_files > 0 || self.new_repo_files > 0
    }
}

/// Totals for the storage gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    pub xorbs: u64,
    pub xorb_bytes: u64,
    pub files: u64,
}

pub trait Index:
    stats::StatsIndex
    + gc::GcIndex
    + verify::Sha256Index
    + LockIndex
    + TokenIndex
    + RepoIndex
    + dump::DumpIndex
    + Send
    + Sync
    + 'static
{
    /// Records a stored xorb and its chunks. Returns `false` when it was already known; a
    /// known xorb whose recorded layout differs from `meta` gets `meta`'s (one xorb has several
    /// valid byte layouts, and `meta` must be the one the store holds: the caller read it
    /// from the stored object, see `crate::cas::stored_xorb`).
    fn register_xorb(&self, meta: &XorbMeta) -> IndexResult<bool>;

    /// A stored xorb's layout.
    fn xorb(&self, hash: &MerkleHash) -> IndexResult<Option<Arc<XorbMeta>>>;

    /// Registers a shard's files and makes them visible in its repository, which from then
    /// on holds every xorb they reference (for its dedup scope, and for gc: see gc.rs).
    fn register_shard(&self, registration: &ShardRegistration) -> IndexResult<RegisterOutcome>;

    /// The record of a file in `domain`: the whole server's (the first registration's terms)
    /// or, in a scoped domain, the oldest record of a repository inside it. Records of other
    /// domains do not exist here.
    fn file(&self, file_hash: &MerkleHash, domain: &DedupDomain)
        -> IndexResult<Option<FileRecord>>;

    /// The record `repo` is served of a file it registered: its own terms when it
    /// registered them in a scoped domain and they differ from the server's record, the
    /// server's record otherwise (scope.rs, "File records"). `None` if it has no such file.
    fn repo_file(&self, repo: &RepoName, file_hash: &MerkleHash)
        -> IndexResult<Option<FileRecord>>;

    fn repo_has_file(&self, repo: &RepoName, file_hash: &MerkleHash) -> IndexResult<bool>;

    /// The file `repo` registered under this sha256, as [`Index::repo_file`] gives it. The
    /// sha256 is that repository's own claim (shard metadata, or the hash of a basic upload);
    /// there is deliberately no lookup by sha256 across repositories, where one writer's
    /// claim would decide another's object.
    fn repo_file_by_sha256(
        &self,
        repo: &RepoName,
        sha256: &[u8; 32],
    ) -> IndexResult<Option<FileRecord>>;

    /// [`Index::repo_file_by_sha256`] for many objects at once, one answer per sha256 in
    /// their order: the Batch API and the pre-receive check ask about a push's objects
    /// together, and one query per object was most of their time.
    fn repo_files_by_sha256(
        &self,
        repo: &RepoName,
        sha256s: &[[u8; 32]],
    ) -> IndexResult<Vec<Option<FileRecord>>>;

    /// A stored xorb of `domain` holding this chunk, and its index there (the oldest such
    /// xorb).
    fn chunk_location(
        &self,
        chunk_hash: &MerkleHash,
        domain: &DedupDomain,
    ) -> IndexResult<Option<(MerkleHash, u32)>>;

    /// Files registered in a repository of `domain` whose first chunk is this one (at most
    /// `limit`).
    fn files_starting_with(
        &self,
        chunk_hash: &MerkleHash,
        limit: usize,
        domain: &DedupDomain,
    ) -> IndexResult<Vec<MerkleHash>>;

    /// Whether this xorb is indexed and held by a repository of `domain` (scope.rs).
    fn xorb_in_domain(&self, hash: &MerkleHash, domain: &DedupDomain) -> IndexResult<bool>;

    /// Records that `repo` holds this indexed xorb (it uploaded all of it). Returns whether
    /// a repository of `domain` held it before. `XorbCollected` if it is not indexed.
    fn add_xorb_holder(
        &self,
        hash: &MerkleHash,
        repo: &RepoName,
        domain: &DedupDomain,
    ) -> IndexResult<bool>;

    fn stats(&self) -> IndexResult<IndexStats>;
}

/// Serialized terms: per term the xorb hash, then chunk start, chunk end and unpacked bytes
/// as little-endian u32 (44 bytes).
pub(crate) fn encode_terms(terms: &[FileTerm]) -> Vec<u8> {
    let mut out = Vec::with_capacity(terms.len() * 44);
    for t in terms {
        out.extend_from_slice(t.xorb_hash.as_bytes());
        for v in [t.chunk_start, t.chunk_end, t.unpacked_bytes] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

pub(crate) fn decode_terms(bytes: &[u8]) -> IndexResult<Vec<FileTerm>> {
    if bytes.len() % 44 != 0 {
        return Err(IndexError::Corrupt(format!(
            "terms blob of {} bytes",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(44)
        .map(|t| {
            let u = |i: usize| u32::from_le_bytes(t[i..i + 4].try_into().expect("4 bytes"));
            FileTerm {
                xorb_hash: MerkleHash::from_slice(&t[..32]).expect("32 bytes"),
                cas_flags: 0,
                chunk_start: u(32),
                chunk_end: u(36),
                unpacked_bytes: u(40),
            }
        })
        .collect())
}
