//! Index operations for upkeep: garbage collection, `check` and `repo delete`.
//!
//! The gc invariant: **no registered file references a xorb that is deleted or about to be.**
//! It holds because gc never deletes a xorb it has not first *condemned*, and condemning is
//! a transaction that re-checks, against every registered file, that nothing references the
//! xorb. Registrations (`register_shard`) run in transactions too and refuse a xorb that is
//! condemned or no longer indexed; xorb uploads (`register_xorb`) refuse a condemned xorb,
//! and dedup lookups skip condemned xorbs. Transactions being serialized, either a
//! registration commits first (and the condemning transaction sees its reference and spares
//! the xorb) or the condemnation does (and the registration is refused, so the client uploads
//! the xorb again once gc has deleted it). Only after the condemnation commits is the object
//! deleted, then its index rows. A gc interrupted in between leaves condemned marks, which the
//! next run finishes.

use crate::repo_name::RepoName;
use crate::{FileRecord, IndexResult};
use git_xet_core::MerkleHash;

/// An indexed xorb as gc sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedXorb {
    pub hash: MerkleHash,
    pub stored_len: u64,
    /// Seconds since the epoch when it was indexed or last uploaded in full, whichever is
    /// later: an upload of a xorb already stored gets its grace period to be referenced.
    pub created_at: u64,
}

/// An indexed shard as gc sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedShard {
    pub hash: MerkleHash,
    pub len: u64,
    pub created_at: u64,
}

/// One repository's sha256 claim for a registered file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sha256Claim {
    pub repo: RepoName,
    pub sha256: [u8; 32],
}

pub trait GcIndex {
    /// Forgets `repo`'s file visibility (its LFS objects), its locks, the xorbs it holds
    /// for its dedup scope and its visibility record (`private`). Returns how many files it
    /// had.
    fn delete_repo_files(&self, repo: &RepoName) -> IndexResult<u64>;

    /// Unregisters files that no repository can see (and their global-dedup entries).
    /// Returns how many; with `dry_run` only counts them.
    fn unregister_unreachable_files(&self, dry_run: bool) -> IndexResult<u64>;

    /// Every indexed xorb.
    fn indexed_xorbs(&self) -> IndexResult<Vec<IndexedXorb>>;

    /// Every xorb referenced by the terms of a file some repository sees.
    fn referenced_xorbs(&self) -> IndexResult<std::collections::HashSet<MerkleHash>>;

    /// In one transaction: re-checks each candidate against every registered file and
    /// marks the unreferenced ones condemned (candidates need not be indexed: a stored object
    /// whose indexing never happened). Returns the condemned ones.
    fn condemn_xorbs(&self, candidates: &[MerkleHash]) -> IndexResult<Vec<MerkleHash>>;

    /// Xorbs condemned and not yet forgotten (this run's, or an interrupted run's).
    fn condemned_xorbs(&self) -> IndexResult<Vec<MerkleHash>>;

    /// After its object was deleted: forgets a condemned xorb (its layout, its chunk
    /// locations, its holders, its mark).
    fn forget_xorb(&self, hash: &MerkleHash) -> IndexResult<()>;

    /// Every indexed shard.
    fn indexed_shards(&self) -> IndexResult<Vec<IndexedShard>>;

    /// Whether any of these files is registered.
    fn any_file_registered(&self, files: &[MerkleHash]) -> IndexResult<bool>;

    /// After its object was deleted: forgets a shard.
    fn forget_shard(&self, hash: &MerkleHash) -> IndexResult<()>;

    /// Every registered file, in file-hash order, `limit` at a time after `after`.
    fn files_page(&self, after: Option<&MerkleHash>, limit: usize) -> IndexResult<Vec<FileRecord>>;

    /// Every repository's sha256 claim for a file.
    fn sha256_claims(&self, file_hash: &MerkleHash) -> IndexResult<Vec<Sha256Claim>>;
}
