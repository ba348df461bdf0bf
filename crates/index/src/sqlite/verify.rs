//! [`Sha256Index`] on SQLite.

use rusqlite::{params, OptionalExtension};

use super::{blob, SqliteIndex};
use crate::columns::sha256_from;
use crate::repo_name::RepoName;
use crate::verify::Sha256Index;
use crate::IndexResult;
use git_xet_core::MerkleHash;
use git_xet_io::time::now_secs;

/// The sha256 of each file's content, as computed by a download that hashed it.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS verified_sha256 (
    file_hash BLOB PRIMARY KEY,
    sha256 BLOB NOT NULL,
    verified_at INTEGER NOT NULL
) WITHOUT ROWID;
";

impl Sha256Index for SqliteIndex {
    fn verified_sha256(&self, file_hash: &MerkleHash) -> IndexResult<Option<[u8; 32]>> {
        let found: Option<Vec<u8>> = self.read(|c| {
            Ok(
                c.prepare_cached("SELECT sha256 FROM verified_sha256 WHERE file_hash = ?1")?
                    .query_row([blob(file_hash)], |r| r.get(0))
                    .optional()?,
            )
        })?;
        found.as_deref().map(sha256_from).transpose()
    }

    fn verified_sha256s(&self, file_hashes: &[MerkleHash]) -> IndexResult<Vec<Option<[u8; 32]>>> {
        let found: Vec<Option<Vec<u8>>> = self.read(|c| {
            let mut stmt =
                c.prepare_cached("SELECT sha256 FROM verified_sha256 WHERE file_hash = ?1")?;
            file_hashes
                .iter()
                .map(|h| Ok(stmt.query_row([blob(h)], |r| r.get(0)).optional()?))
                .collect()
        })?;
        found
            .iter()
            .map(|f| f.as_deref().map(sha256_from).transpose())
            .collect()
    }

    fn record_verified_sha256(&self, file_hash: &MerkleHash, sha256: &[u8; 32]) -> IndexResult<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT OR IGNORE INTO verified_sha256 (file_hash, sha256, verified_at) VALUES (?1, ?2, ?3)",
                params![blob(file_hash), &sha256[..], now_secs() as i64],
            )?;
            Ok(())
        })
    }

    fn drop_sha256_claim(
        &self,
        repo: &RepoName,
        file_hash: &MerkleHash,
        sha256: &[u8; 32],
    ) -> IndexResult<bool> {
        self.write(|tx| {
            let n = tx.execute(
                "DELETE FROM repo_files WHERE repo = ?1 AND file_hash = ?2 AND sha256 = ?3",
                params![repo.as_str(), blob(file_hash), &sha256[..]],
            )?;
            Ok(n > 0)
        })
    }
}
