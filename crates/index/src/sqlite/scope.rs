//! Dedup scope on SQLite (crates/index/src/scope.rs): which repositories hold each xorb,
//! the scoped lookups, and schema version 2, which added them.

use rusqlite::types::ToSql;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::blob;
use crate::columns::chunk_key;
use crate::{decode_terms, DedupDomain, IndexError, IndexResult, RepoName};
use git_xet_core::MerkleHash;

/// Version 2: every chunk of every xorb is located (not only the first xorb to store it),
/// so that a scope finds its own copy; the repositories holding each xorb; files by hash
/// (for the scoped first-chunk lookup).
const V2: &str = "
CREATE TABLE xorb_repos (
    xorb_id INTEGER NOT NULL,
    repo TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (xorb_id, repo)
) WITHOUT ROWID;
CREATE INDEX xorb_repos_by_repo ON xorb_repos (repo);
CREATE INDEX repo_files_by_file ON repo_files (file_hash);
CREATE TABLE chunks_v2 (
    key INTEGER NOT NULL,
    xorb_id INTEGER NOT NULL,
    chunk_index INTEGER NOT NULL,
    PRIMARY KEY (key, xorb_id)
) WITHOUT ROWID;
INSERT INTO chunks_v2 (key, xorb_id, chunk_index) SELECT key, xorb_id, chunk_index FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_v2 RENAME TO chunks;
CREATE INDEX chunks_by_xorb ON chunks (xorb_id);
";

/// Brings a version-1 index to version 2 inside `tx`: existing xorbs get every chunk
/// located, and are held by the repositories whose files reference them.
pub(super) fn migrate_v2(tx: &Transaction, now: i64) -> IndexResult<()> {
    tx.execute_batch(V2)?;
    {
        let mut xorbs = tx.prepare("SELECT id, chunk_hashes FROM xorbs")?;
        let mut insert = tx.prepare(
            "INSERT OR IGNORE INTO chunks (key, xorb_id, chunk_index) VALUES (?1, ?2, ?3)",
        )?;
        let mut rows = xorbs.query([])?;
        while let Some(row) = rows.next()? {
            let (id, hashes): (i64, Vec<u8>) = (row.get(0)?, row.get(1)?);
            for (i, h) in hashes.chunks_exact(32).enumerate() {
                let h = MerkleHash::from_slice(h).expect("32 bytes");
                insert.execute(params![chunk_key(&h), id, i as i64])?;
            }
        }
    }
    let mut files = tx
        .prepare("SELECT r.repo, f.terms FROM repo_files r JOIN files f ON f.hash = r.file_hash")?;
    let mut insert = tx.prepare(
        "INSERT OR IGNORE INTO xorb_repos (xorb_id, repo, at) SELECT id, ?2, ?3 FROM xorbs WHERE hash = ?1",
    )?;
    let mut rows = files.query([])?;
    while let Some(row) = rows.next()? {
        let (repo, terms): (String, Vec<u8>) = (row.get(0)?, row.get(1)?);
        for term in decode_terms(&terms)? {
            insert.execute(params![blob(&term.xorb_hash), repo, now])?;
        }
    }
    Ok(())
}

/// Version 3: a repository's own terms of a file it registered in a scoped domain, where
/// they differ from the server's record (`files`); NULL: the server's record. Existing rows
/// keep the record they were served (docs/server-api.md, "Dedup scope").
const V3: &str = "ALTER TABLE repo_files ADD COLUMN terms BLOB;";

pub(super) fn migrate_v3(tx: &Transaction) -> IndexResult<()> {
    tx.execute_batch(V3)?;
    Ok(())
}

/// A scoped domain's record of a file (`?1`): the oldest record of a repository inside it
/// (its bounds `?2..?4`).
pub(super) const DOMAIN_FILE: &str =
    "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
     WHERE r.file_hash = ?1 AND (r.repo = ?2 OR (r.repo >= ?3 AND r.repo < ?4))
     ORDER BY r.created_at, r.repo LIMIT 1";

/// `AND` a repository of `domain` holds the xorb whose id is `xorb_id` (an SQL expression),
/// with the domain's bounds as parameters `?first`, `?first+1`, `?first+2`; empty for the
/// whole server.
pub(super) fn held_in(domain: &DedupDomain, xorb_id: &str, first: usize) -> (String, Vec<String>) {
    match domain.bounds() {
        None => (String::new(), Vec::new()),
        Some(b) => (
            format!(
                " AND EXISTS (SELECT 1 FROM xorb_repos h WHERE h.xorb_id = {xorb_id} AND (h.repo = ?{} OR (h.repo >= ?{} AND h.repo < ?{})))",
                first,
                first + 1,
                first + 2
            ),
            vec![b.exact, b.lo, b.hi],
        ),
    }
}

/// The same condition on a registered file (`file_hash`): some repository of `domain` sees it.
pub(super) fn seen_in(
    domain: &DedupDomain,
    file_hash: &str,
    first: usize,
) -> (String, Vec<String>) {
    match domain.bounds() {
        None => (String::new(), Vec::new()),
        Some(b) => (
            format!(
                " AND EXISTS (SELECT 1 FROM repo_files r WHERE r.file_hash = {file_hash} AND (r.repo = ?{} OR (r.repo >= ?{} AND r.repo < ?{})))",
                first,
                first + 1,
                first + 2
            ),
            vec![b.exact, b.lo, b.hi],
        ),
    }
}

/// Parameters: the fixed ones, then the domain's bounds.
pub(super) fn with_bounds<'a>(fixed: &[&'a dyn ToSql], bounds: &'a [String]) -> Vec<&'a dyn ToSql> {
    let mut out: Vec<&dyn ToSql> = fixed.to_vec();
    out.extend(bounds.iter().map(|b| b as &dyn ToSql));
    out
}

/// Whether a repository of `domain` holds the indexed xorb `hash`.
pub(super) fn xorb_in_domain(
    conn: &Connection,
    hash: &MerkleHash,
    domain: &DedupDomain,
) -> IndexResult<bool> {
    let (cond, bounds) = held_in(domain, "x.id", 2);
    let sql = format!("SELECT 1 FROM xorbs x WHERE x.hash = ?1{cond}");
    let key = blob(hash);
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(with_bounds(&[&key], &bounds).as_slice(), |_| Ok(()))
        .optional()?
        .is_some())
}

/// Records `repo` as a holder of `hash` (refreshing when it uploaded it again, which gc
/// counts as the xorb's age); returns whether `domain` held it before.
pub(super) fn add_holder(
    tx: &Transaction,
    hash: &MerkleHash,
    repo: &RepoName,
    domain: &DedupDomain,
    now: i64,
) -> IndexResult<bool> {
    let id: i64 = tx
        .query_row("SELECT id FROM xorbs WHERE hash = ?1", [blob(hash)], |r| {
            r.get(0)
        })
        .optional()?
        .ok_or(IndexError::XorbCollected(*hash))?;
    let before = xorb_in_domain(tx, hash, domain)?;
    tx.execute(
        "INSERT INTO xorb_repos (xorb_id, repo, at) VALUES (?1, ?2, ?3)
         ON CONFLICT (xorb_id, repo) DO UPDATE SET at = excluded.at",
        params![id, repo.as_str(), now],
    )?;
    Ok(before)
}

/// A shard's repository holds every xorb its files reference (inside its registration).
pub(super) fn add_referencing_holder(
    tx: &Transaction,
    xorbs: &[MerkleHash],
    repo: &RepoName,
    now: i64,
) -> IndexResult<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO xorb_repos (xorb_id, repo, at) SELECT id, ?2, ?3 FROM xorbs WHERE hash = ?1
         ON CONFLICT (xorb_id, repo) DO NOTHING",
    )?;
    for hash in xorbs {
        stmt.execute(params![blob(hash), repo.as_str(), now])?;
    }
    Ok(())
}
