//! Index operations for checking sha256 claims. A file's sha256 in a shard is the
//! uploading repository's claim, not checked at registration; the first basic download or
//! verify of the file through that claim hashes the content and records the result (see
//! `check_claim` in crates/server/src/lfs/objects.rs and `settle_claim` in crates/server/src/file_stream.rs),
//! and a false claim is dropped.

use crate::repo_name::RepoName;
use crate::IndexResult;
use git_xet_core::MerkleHash;

pub trait Sha256Index {
    /// The sha256 of the file's content, once some download has computed it.
    fn verified_sha256(&self, file_hash: &MerkleHash) -> IndexResult<Option<[u8; 32]>>;

    /// [`Sha256Index::verified_sha256`] of many files at once, one answer per file in order.
    fn verified_sha256s(&self, file_hashes: &[MerkleHash]) -> IndexResult<Vec<Option<[u8; 32]>>>;

    /// Records the sha256 computed from the file's content.
    fn record_verified_sha256(&self, file_hash: &MerkleHash, sha256: &[u8; 32]) -> IndexResult<()>;

    /// Drops `repo`'s claim that `file_hash` has this `sha256` (it was found false): the
    /// object becomes absent there. Returns whether a claim was dropped.
    fn drop_sha256_claim(
        &self,
        repo: &RepoName,
        file_hash: &MerkleHash,
        sha256: &[u8; 32],
    ) -> IndexResult<bool>;
}
