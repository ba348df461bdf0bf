//! [`Sha256Index`] on PostgreSQL.

use super::pool::wait;
use super::PgIndex;
use crate::columns::sha256_from;
use crate::repo_name::RepoName;
use crate::verify::Sha256Index;
use crate::IndexResult;
use git_xet_core::MerkleHash;
use git_xet_io::time::now_secs;

/// The sha256 of each file's content, as computed by a download that hashed it.
pub(super) const MIGRATION: &str = "
CREATE TABLE verified_sha256 (
    file_hash BYTEA PRIMARY KEY,
    sha256 BYTEA NOT NULL,
    verified_at BIGINT NOT NULL
);
";

impl Sha256Index for PgIndex {
    fn verified_sha256(&self, file_hash: &MerkleHash) -> IndexResult<Option<[u8; 32]>> {
        let row = self.pool.run(|c| {
            wait(c.query_opt(
                "SELECT sha256 FROM verified_sha256 WHERE file_hash = $1",
                &[&file_hash.as_bytes().as_slice()],
            ))
        })?;
        row.map(|r| sha256_from(r.get(0))).transpose()
    }

    fn verified_sha256s(&self, file_hashes: &[MerkleHash]) -> IndexResult<Vec<Option<[u8; 32]>>> {
        let blobs: Vec<&[u8]> = file_hashes
            .iter()
            .map(|h| h.as_bytes().as_slice())
            .collect();
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT file_hash, sha256 FROM verified_sha256 WHERE file_hash = ANY($1)",
                &[&blobs],
            ))
        })?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for r in rows {
            let hash: Vec<u8> = r.get(0);
            found.insert(hash, sha256_from(r.get(1))?);
        }
        Ok(file_hashes
            .iter()
            .map(|h| found.get(h.as_bytes().as_slice()).copied())
            .collect())
    }

    fn record_verified_sha256(&self, file_hash: &MerkleHash, sha256: &[u8; 32]) -> IndexResult<()> {
        // The content decides the sha256: two processes computing it agree, the first stays.
        self.pool.run(|c| {
            wait(c.execute(
                "INSERT INTO verified_sha256 (file_hash, sha256, verified_at) VALUES ($1, $2, $3)
                 ON CONFLICT (file_hash) DO NOTHING",
                &[
                    &file_hash.as_bytes().as_slice(),
                    &sha256.as_slice(),
                    &(now_secs() as i64),
                ],
            ))
        })?;
        Ok(())
    }

    fn drop_sha256_claim(
        &self,
        repo: &RepoName,
        file_hash: &MerkleHash,
        sha256: &[u8; 32],
    ) -> IndexResult<bool> {
        let n = self.pool.run(|c| {
            wait(c.execute(
                "DELETE FROM repo_files WHERE repo = $1 AND file_hash = $2 AND sha256 = $3",
                &[
                    &repo.as_str(),
                    &file_hash.as_bytes().as_slice(),
                    &sha256.as_slice(),
                ],
            ))
        })?;
        Ok(n > 0)
    }
}
