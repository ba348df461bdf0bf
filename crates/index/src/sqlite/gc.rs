//! [`GcIndex`] on SQLite, and the condemned-xorb checks the registrations make. The
//! invariant these keep is stated in `crates/index/src/gc.rs`.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::{blob, SqliteIndex};
use crate::columns::{file_record, hash_from, sha256_claim};
use crate::gc::{GcIndex, IndexedShard, IndexedXorb, Sha256Claim};
use crate::repo_name::RepoName;
use crate::{decode_terms, FileRecord, IndexError, IndexResult};
use git_xet_core::MerkleHash;
use git_xet_io::time::now_secs;

/// Xorbs gc has decided to delete: invisible to dedup, refused by registrations.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS condemned_xorbs (
    hash BLOB PRIMARY KEY,
    condemned_at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Fails when `hash` is condemned (inside a registration's transaction).
pub(super) fn refuse_condemned(conn: &Connection, hash: &MerkleHash) -> IndexResult<()> {
    let condemned = conn
        .prepare_cached("SELECT 1 FROM condemned_xorbs WHERE hash = ?1")?
        .query_row([blob(hash)], |_| Ok(()))
        .optional()?
        .is_some();
    if condemned {
        return Err(IndexError::XorbCollected(*hash));
    }
    Ok(())
}

/// Fails unless `hash` is indexed and not condemned (inside a registration's transaction).
pub(super) fn require_live_xorb(conn: &Connection, hash: &MerkleHash) -> IndexResult<()> {
    let indexed = conn
        .prepare_cached("SELECT 1 FROM xorbs WHERE hash = ?1")?
        .query_row([blob(hash)], |_| Ok(()))
        .optional()?
        .is_some();
    if !indexed {
        return Err(IndexError::XorbCollected(*hash));
    }
    refuse_condemned(conn, hash)
}

/// Every xorb referenced by a file record (with `reachable_only`, by a file some repository
/// sees), read on `conn` (a transaction's, for gc's re-check): the server's records and the
/// repositories' own (scope.rs, "File records"), which go with their repository.
fn referenced(conn: &Connection, reachable_only: bool) -> IndexResult<HashSet<MerkleHash>> {
    let mut stmt = conn.prepare(if reachable_only {
        "SELECT terms FROM files WHERE EXISTS (SELECT 1 FROM repo_files r WHERE r.file_hash = files.hash)
         UNION ALL SELECT terms FROM repo_files WHERE terms IS NOT NULL"
    } else {
        "SELECT terms FROM files UNION ALL SELECT terms FROM repo_files WHERE terms IS NOT NULL"
    })?;
    let mut rows = stmt.query([])?;
    let mut out = HashSet::new();
    while let Some(row) = rows.next()? {
        let terms: Vec<u8> = row.get(0)?;
        out.extend(decode_terms(&terms)?.iter().map(|t| t.xorb_hash));
    }
    Ok(out)
}

fn hashes(conn: &Connection, sql: &str) -> IndexResult<Vec<MerkleHash>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
    rows.map(|r| hash_from(r?)).collect()
}

impl GcIndex for SqliteIndex {
    fn delete_repo_files(&self, repo: &RepoName) -> IndexResult<u64> {
        self.write(|tx| {
            tx.execute("DELETE FROM locks WHERE repo = ?1", [repo.as_str()])?;
            // It no longer holds xorbs for its dedup scope (a repository created later under
            // the same name starts with nothing).
            tx.execute("DELETE FROM xorb_repos WHERE repo = ?1", [repo.as_str()])?;
            // Nor is it private: a repository created again under the name decides anew.
            tx.execute("DELETE FROM repositories WHERE name = ?1", [repo.as_str()])?;
            Ok(tx.execute("DELETE FROM repo_files WHERE repo = ?1", [repo.as_str()])? as u64)
        })
    }

    fn unregister_unreachable_files(&self, dry_run: bool) -> IndexResult<u64> {
        const UNREACHABLE: &str =
            "NOT EXISTS (SELECT 1 FROM repo_files r WHERE r.file_hash = files.hash)";
        self.write(|tx| {
            if dry_run {
                let n: i64 = tx.query_row(
                    &format!("SELECT COUNT(*) FROM files WHERE {UNREACHABLE}"),
                    [],
                    |r| r.get(0),
                )?;
                return Ok(n as u64);
            }
            let n = tx.execute(&format!("DELETE FROM files WHERE {UNREACHABLE}"), [])?;
            tx.execute(
                "DELETE FROM first_chunks WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.hash = first_chunks.file_hash)",
                [],
            )?;
            tx.execute(
                "DELETE FROM verified_sha256 WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.hash = verified_sha256.file_hash)",
                [],
            )?;
            Ok(n as u64)
        })
    }

    fn indexed_xorbs(&self) -> IndexResult<Vec<IndexedXorb>> {
        // A xorb's age counts from its last full upload: one uploaded again (by another
        // scope, say) gets its grace period to be referenced.
        let rows = self.read(|c| {
            hash_len_created(
                c,
                "SELECT hash, stored_len, MAX(created_at, COALESCE((SELECT MAX(h.at) FROM xorb_repos h WHERE h.xorb_id = xorbs.id), 0)) FROM xorbs",
            )
        })?;
        Ok(rows
            .into_iter()
            .map(|(hash, stored_len, created_at)| IndexedXorb {
                hash,
                stored_len,
                created_at,
            })
            .collect())
    }

    fn referenced_xorbs(&self) -> IndexResult<HashSet<MerkleHash>> {
        self.read(|c| referenced(c, true))
    }

    fn condemn_xorbs(&self, candidates: &[MerkleHash]) -> IndexResult<Vec<MerkleHash>> {
        let now = now_secs() as i64;
        self.write(|tx| {
            // Read inside this write transaction: no registration can slip in between.
            let live = referenced(tx, false)?;
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO condemned_xorbs (hash, condemned_at) VALUES (?1, ?2)",
            )?;
            let mut out = Vec::new();
            for hash in candidates.iter().filter(|h| !live.contains(h)) {
                stmt.execute(params![blob(hash), now])?;
                out.push(*hash);
            }
            Ok(out)
        })
    }

    fn condemned_xorbs(&self) -> IndexResult<Vec<MerkleHash>> {
        self.read(|c| hashes(c, "SELECT hash FROM condemned_xorbs"))
    }

    fn forget_xorb(&self, hash: &MerkleHash) -> IndexResult<()> {
        self.write(|tx| {
            let id: Option<i64> = tx
                .query_row("SELECT id FROM xorbs WHERE hash = ?1", [blob(hash)], |r| {
                    r.get(0)
                })
                .optional()?;
            if let Some(id) = id {
                tx.execute("DELETE FROM chunks WHERE xorb_id = ?1", [id])?;
                tx.execute("DELETE FROM xorb_repos WHERE xorb_id = ?1", [id])?;
                tx.execute("DELETE FROM xorbs WHERE id = ?1", [id])?;
            }
            tx.execute("DELETE FROM condemned_xorbs WHERE hash = ?1", [blob(hash)])?;
            Ok(())
        })?;
        self.evict(hash);
        Ok(())
    }

    fn indexed_shards(&self) -> IndexResult<Vec<IndexedShard>> {
        let rows =
            self.read(|c| hash_len_created(c, "SELECT hash, len, created_at FROM shards"))?;
        Ok(rows
            .into_iter()
            .map(|(hash, len, created_at)| IndexedShard {
                hash,
                len,
                created_at,
            })
            .collect())
    }

    fn any_file_registered(&self, files: &[MerkleHash]) -> IndexResult<bool> {
        self.read(|c| {
            let mut stmt = c.prepare_cached("SELECT 1 FROM files WHERE hash = ?1")?;
            for f in files {
                if stmt.query_row([blob(f)], |_| Ok(())).optional()?.is_some() {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    fn forget_shard(&self, hash: &MerkleHash) -> IndexResult<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM shards WHERE hash = ?1", [blob(hash)])?;
            Ok(())
        })
    }

    fn files_page(&self, after: Option<&MerkleHash>, limit: usize) -> IndexResult<Vec<FileRecord>> {
        let after = after.map(|h| h.as_bytes().to_vec()).unwrap_or_default();
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT hash, size, sha256, terms FROM files WHERE hash > ?1 ORDER BY hash LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![after, limit as i64], SqliteIndex::load_file)?;
            let files = rows
                .map(|r| file_record(r?))
                .collect::<IndexResult<Vec<_>>>()?;
            let mut own = c.prepare_cached(
                "SELECT DISTINCT terms FROM repo_files WHERE file_hash = ?1 AND terms IS NOT NULL ORDER BY terms",
            )?;
            let mut out = Vec::with_capacity(files.len());
            for file in files {
                let terms = own.query_map([blob(&file.file_hash)], |r| r.get::<_, Vec<u8>>(0))?;
                let terms = terms.collect::<Result<Vec<_>, _>>()?;
                out.push(file.clone());
                for t in terms {
                    out.push(FileRecord {
                        terms: decode_terms(&t)?,
                        ..file.clone()
                    });
                }
            }
            Ok(out)
        })
    }

    fn sha256_claims(&self, file_hash: &MerkleHash) -> IndexResult<Vec<Sha256Claim>> {
        self.read(|c| {
            let mut stmt =
                c.prepare_cached("SELECT repo, sha256 FROM repo_files WHERE file_hash = ?1")?;
            let rows = stmt.query_map([blob(file_hash)], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })?;
            rows.map(|r| {
                let (repo, sha) = r?;
                sha256_claim(&repo, &sha)
            })
            .collect()
        })
    }
}

/// Rows of (hash, length, created_at) from `sql`: the listings gc compares with the store.
fn hash_len_created(
    c: &rusqlite::Connection,
    sql: &str,
) -> IndexResult<Vec<(MerkleHash, u64, u64)>> {
    let mut stmt = c.prepare(sql)?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, Vec<u8>>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    rows.map(|r| {
        let (hash, len, at) = r?;
        Ok((hash_from(hash)?, len as u64, at as u64))
    })
    .collect()
}
