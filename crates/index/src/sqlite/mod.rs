//! The embedded index: one SQLite database in WAL mode (`DATA/index.sqlite`).
//!
//! One writer connection (SQLite allows one writer at a time anyway) and a small pool of
//! reader connections, which WAL lets run alongside the writer. Stored xorb layouts are
//! cached in memory, bounded by their total chunk count.

mod dump;
mod error;
mod gc;
mod locks;
mod repos;
mod scope;
mod tokens;
mod verify;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

mod stats;

use crate::columns::*;
use crate::meta_cache::MetaCache;
use crate::*;
use git_xet_io::time::now_secs;

const SCHEMA_VERSION: i64 = 3;
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schema_info (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS xorbs (
    id INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    stored_len INTEGER NOT NULL,
    unpacked_len INTEGER NOT NULL,
    num_chunks INTEGER NOT NULL,
    chunk_hashes BLOB NOT NULL,
    chunk_ends BLOB NOT NULL,
    unpacked_ends BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
-- Where each chunk is stored, keyed by the first 8 bytes of its hash; the full hash is
-- checked against the xorb's layout on lookup. Version 1; version 2 (scope.rs) keys it by
-- (key, xorb_id): every xorb holding a chunk.
CREATE TABLE IF NOT EXISTS chunks (
    key INTEGER PRIMARY KEY,
    xorb_id INTEGER NOT NULL,
    chunk_index INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS files (
    hash BLOB PRIMARY KEY,
    size INTEGER NOT NULL,
    sha256 BLOB NOT NULL,
    terms BLOB NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_by_sha256 ON files (sha256);
CREATE TABLE IF NOT EXISTS repo_files (
    repo TEXT NOT NULL,
    file_hash BLOB NOT NULL,
    sha256 BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (repo, file_hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS repo_files_by_sha256 ON repo_files (repo, sha256);
CREATE TABLE IF NOT EXISTS first_chunks (
    chunk_hash BLOB NOT NULL,
    file_hash BLOB NOT NULL,
    PRIMARY KEY (chunk_hash, file_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS shards (
    hash BLOB PRIMARY KEY,
    repo TEXT NOT NULL,
    len INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// A repository's file by sha256. `INDEXED BY`: without it SQLite walks the repository's
/// primary key (every file of the repository) for each object, 0.2 ms per lookup at 2000
/// files, and the Batch API and the pre-receive check look up every object of a push.
const REPO_FILE_BY_SHA256: &str = "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms)
     FROM repo_files r INDEXED BY repo_files_by_sha256 JOIN files f ON f.hash = r.file_hash
     WHERE r.repo = ?1 AND r.sha256 = ?2 LIMIT 1";

const IDLE_READERS: usize = 8;
/// Xorbs holding a chunk's 8-byte key tried per lookup: a key shared by different chunks
/// is rare, so the first confirmed candidate is almost always the first.
const CHUNK_CANDIDATES: usize = 8;

pub struct SqliteIndex {
    path: std::path::PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    cache: MetaCache,
    fsync: bool,
}

fn open_connection(path: &Path, fsync: bool) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if fsync { "FULL" } else { "NORMAL" })?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn blob(hash: &MerkleHash) -> &[u8] {
    hash.as_bytes()
}

impl SqliteIndex {
    /// Makes every commit to the index file at `path` durable: a checkpoint syncs the
    /// write-ahead log, then the database file (after a rebuild written unsynced).
    pub fn sync_file(path: &Path) -> IndexResult<()> {
        let conn = rusqlite::Connection::open(path)?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))?;
        Ok(())
    }

    /// Whether the token `id` is revoked, read from the index at `path` without opening it
    /// as a server does (no schema created or upgraded): for a process that must change
    /// nothing, the ssh shell. An id the index does not know is not revoked.
    pub fn token_revoked_read_only(path: &Path, id: &str) -> IndexResult<bool> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        let revoked: Option<i64> = conn
            .query_row("SELECT revoked FROM tokens WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(revoked.is_some_and(|r| r != 0))
    }

    pub fn open(path: &Path, fsync: bool) -> IndexResult<SqliteIndex> {
        let mut writer = open_connection(path, fsync)?;
        writer.execute_batch(SCHEMA)?;
        writer.execute_batch(gc::SCHEMA)?;
        writer.execute_batch(verify::SCHEMA)?;
        writer.execute_batch(locks::SCHEMA)?;
        writer.execute_batch(tokens::SCHEMA)?;
        writer.execute_batch(repos::SCHEMA)?;
        writer.execute_batch(stats::SCHEMA)?;
        // Read and upgraded in one write transaction: a second process opening the index
        // at once waits, then finds it upgraded.
        let tx = writer.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: Option<i64> = tx
            .query_row("SELECT version FROM schema_info", [], |r| r.get(0))
            .optional()?;
        match version {
            None | Some(1) | Some(2) => {
                if version != Some(2) {
                    scope::migrate_v2(&tx, now_secs() as i64)?;
                }
                scope::migrate_v3(&tx)?;
                tx.execute("DELETE FROM schema_info", [])?;
                tx.execute("INSERT INTO schema_info (version) VALUES (?1)", [SCHEMA_VERSION])?;
            }
            Some(SCHEMA_VERSION) => {}
            Some(found) if found > SCHEMA_VERSION => {
                return Err(IndexError::SchemaTooNew {
                    found,
                    known: SCHEMA_VERSION,
                })
            }
            Some(other) => {
                return Err(IndexError::Corrupt(format!(
                    "index schema version {other} is not supported (this server knows {SCHEMA_VERSION})"
                )))
            }
        }
        tx.commit()?;
        Ok(SqliteIndex {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            cache: MetaCache::default(),
            fsync,
        })
    }

    /// Drops a cached layout (its xorb was collected, perhaps by another process).
    fn evict(&self, hash: &MerkleHash) {
        self.cache.remove(hash);
    }

    /// Runs `f` on a pooled reader connection.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> IndexResult<T>) -> IndexResult<T> {
        let pooled = self.readers.lock().expect("reader pool").pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.path, self.fsync)?,
        };
        let result = f(&conn);
        let mut pool = self.readers.lock().expect("reader pool");
        if pool.len() < IDLE_READERS {
            pool.push(conn);
        }
        result
    }

    fn write<T>(&self, f: impl FnOnce(&rusqlite::Transaction) -> IndexResult<T>) -> IndexResult<T> {
        let mut conn = self.writer.lock().expect("writer connection");
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    fn load_xorb(conn: &Connection, hash: &MerkleHash) -> IndexResult<Option<XorbMeta>> {
        let row = conn
            .query_row(
                "SELECT stored_len, chunk_hashes, chunk_ends, unpacked_ends FROM xorbs WHERE hash = ?1",
                [blob(hash)],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, Vec<u8>>(2)?, r.get::<_, Vec<u8>>(3)?)),
            )
            .optional()?;
        let Some((stored_len, hashes, chunk_ends, unpacked_ends)) = row else {
            return Ok(None);
        };
        Ok(Some(xorb_meta(
            hash,
            stored_len,
            &hashes,
            &chunk_ends,
            &unpacked_ends,
        )?))
    }

    fn load_file(row: &rusqlite::Row) -> rusqlite::Result<RawFile> {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    }

    fn insert_file(tx: &rusqlite::Transaction, file: &FileRecord, now: i64) -> IndexResult<bool> {
        // Cached statements: a shard of many small files runs these once per file.
        let n = tx.prepare_cached(
            "INSERT OR IGNORE INTO files (hash, size, sha256, terms, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?.execute(
            params![blob(&file.file_hash), file.size as i64, &file.sha256[..], encode_terms(&file.terms), now],
        )?;
        Ok(n == 1)
    }

    /// `scoped`: the repository keeps its own terms where they differ from the server's
    /// record (scope.rs, "File records").
    fn insert_repo_file(
        tx: &rusqlite::Transaction,
        repo: &RepoName,
        file: &FileRecord,
        scoped: bool,
        now: i64,
    ) -> IndexResult<bool> {
        let own = scoped.then(|| encode_terms(&file.terms));
        let n = tx.prepare_cached(
            "INSERT OR IGNORE INTO repo_files (repo, file_hash, sha256, created_at, terms)
             VALUES (?1, ?2, ?3, ?4, CASE WHEN ?5 IS NULL OR ?5 = (SELECT terms FROM files WHERE hash = ?2) THEN NULL ELSE ?5 END)",
        )?.execute(
            params![repo.as_str(), blob(&file.file_hash), &file.sha256[..], now, own],
        )?;
        Ok(n == 1)
    }
}

impl Index for SqliteIndex {
    fn register_xorb(&self, meta: &XorbMeta) -> IndexResult<bool> {
        let f = &meta.footer;
        let hashes = hashes_blob(&f.chunk_hashes);
        let inserted = self.write(|tx| {
            gc::refuse_condemned(tx, &f.hash)?;
            let n = tx.execute(
                "INSERT OR IGNORE INTO xorbs (hash, stored_len, unpacked_len, num_chunks, chunk_hashes, chunk_ends, unpacked_ends, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    blob(&f.hash),
                    meta.stored_len as i64,
                    f.unpacked_len() as i64,
                    f.num_chunks() as i64,
                    hashes,
                    u32_blob(&f.chunk_ends),
                    u32_blob(&f.unpacked_ends),
                    now_secs() as i64
                ],
            )?;
            if n == 0 {
                // Known: make its layout the stored one (the hash fixes chunk hashes and sizes,
                // not where each record ends).
                let changed = tx.execute(
                    "UPDATE xorbs SET stored_len = ?2, chunk_ends = ?3 WHERE hash = ?1 AND (stored_len != ?2 OR chunk_ends != ?3)",
                    params![blob(&f.hash), meta.stored_len as i64, u32_blob(&f.chunk_ends)],
                )?;
                if changed > 0 {
                    tracing::warn!(xorb = %f.hash, "the index's layout of this xorb was not the stored one: replaced");
                }
                return Ok(false);
            }
            let id = tx.last_insert_rowid();
            let mut stmt = tx.prepare_cached("INSERT OR IGNORE INTO chunks (key, xorb_id, chunk_index) VALUES (?1, ?2, ?3)")?;
            for (i, h) in f.chunk_hashes.iter().enumerate() {
                stmt.execute(params![chunk_key(h), id, i as i64])?;
            }
            Ok(true)
        })?;
        self.cache.insert(Arc::new(meta.clone()));
        Ok(inserted)
    }

    fn xorb(&self, hash: &MerkleHash) -> IndexResult<Option<Arc<XorbMeta>>> {
        if let Some(meta) = self.cache.get(hash) {
            return Ok(Some(meta));
        }
        let Some(meta) = self.read(|c| Self::load_xorb(c, hash))? else {
            return Ok(None);
        };
        let meta = Arc::new(meta);
        self.cache.insert(meta.clone());
        Ok(Some(meta))
    }

    fn register_shard(&self, reg: &ShardRegistration) -> IndexResult<RegisterOutcome> {
        let now = now_secs() as i64;
        let referenced = reg.referenced_xorbs();
        let result = self.write(|tx| {
            // Validation saw these xorbs, but gc may have condemned or deleted them since:
            // checked again here, where no gc transaction can interleave.
            for hash in &referenced {
                gc::require_live_xorb(tx, hash)?;
            }
            scope::add_referencing_holder(tx, &referenced, &reg.repo, now)?;
            let new_shard = tx.execute(
                "INSERT OR IGNORE INTO shards (hash, repo, len, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![blob(&reg.shard_hash), reg.repo.as_str(), reg.shard_len as i64, now],
            )? == 1;
            let mut outcome = RegisterOutcome { new_shard, ..Default::default() };
            for file in &reg.files {
                if Self::insert_file(tx, file, now)? {
                    outcome.new_files += 1;
                }
                let scoped = reg.domain != DedupDomain::Server;
                if Self::insert_repo_file(tx, &reg.repo, file, scoped, now)? {
                    outcome.new_repo_files += 1;
                }
            }
            let mut stmt = tx.prepare_cached("INSERT OR IGNORE INTO first_chunks (chunk_hash, file_hash) VALUES (?1, ?2)")?;
            for (chunk, file) in &reg.first_chunks {
                stmt.execute(params![blob(chunk), blob(file)])?;
            }
            Ok(outcome)
        });
        if let Err(IndexError::XorbCollected(hash)) = &result {
            // The cached layout outlived the xorb: the client's next try must upload it.
            self.evict(hash);
        }
        result
    }

    fn file(
        &self,
        file_hash: &MerkleHash,
        domain: &DedupDomain,
    ) -> IndexResult<Option<FileRecord>> {
        if let Some(b) = domain.bounds() {
            let bounds = [b.exact, b.lo, b.hi];
            let hash = blob(file_hash);
            return self.read(|c| {
                c.prepare_cached(scope::DOMAIN_FILE)?
                    .query_row(
                        scope::with_bounds(&[&hash], &bounds).as_slice(),
                        Self::load_file,
                    )
                    .optional()?
                    .map(file_record)
                    .transpose()
            });
        }
        self.read(|c| {
            c.query_row(
                "SELECT hash, size, sha256, terms FROM files WHERE hash = ?1",
                [blob(file_hash)],
                Self::load_file,
            )
            .optional()?
            .map(file_record)
            .transpose()
        })
    }

    fn repo_file(
        &self,
        repo: &RepoName,
        file_hash: &MerkleHash,
    ) -> IndexResult<Option<FileRecord>> {
        self.read(|c| {
            c.query_row(
                "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
                 WHERE r.repo = ?1 AND r.file_hash = ?2",
                params![repo.as_str(), blob(file_hash)],
                Self::load_file,
            )
            .optional()?
            .map(file_record)
            .transpose()
        })
    }

    fn repo_has_file(&self, repo: &RepoName, file_hash: &MerkleHash) -> IndexResult<bool> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT 1 FROM repo_files WHERE repo = ?1 AND file_hash = ?2",
                params![repo.as_str(), blob(file_hash)],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
        })
    }

    fn repo_file_by_sha256(
        &self,
        repo: &RepoName,
        sha256: &[u8; 32],
    ) -> IndexResult<Option<FileRecord>> {
        self.read(|c| {
            c.query_row(
                REPO_FILE_BY_SHA256,
                params![repo.as_str(), &sha256[..]],
                Self::load_file,
            )
            .optional()?
            .map(file_record)
            .transpose()
        })
    }

    fn repo_files_by_sha256(
        &self,
        repo: &RepoName,
        sha256s: &[[u8; 32]],
    ) -> IndexResult<Vec<Option<FileRecord>>> {
        // One connection and one prepared statement for all: SQLite answers each lookup
        // in microseconds, preparing and fetching a connection cost more.
        self.read(|c| {
            let mut stmt = c.prepare_cached(REPO_FILE_BY_SHA256)?;
            sha256s
                .iter()
                .map(|sha256| {
                    stmt.query_row(params![repo.as_str(), &sha256[..]], Self::load_file)
                        .optional()?
                        .map(file_record)
                        .transpose()
                })
                .collect()
        })
    }

    fn chunk_location(
        &self,
        chunk_hash: &MerkleHash,
        domain: &DedupDomain,
    ) -> IndexResult<Option<(MerkleHash, u32)>> {
        let (cond, bounds) = scope::held_in(domain, "c.xorb_id", 2);
        let sql = format!(
            "SELECT x.hash, c.chunk_index FROM chunks c JOIN xorbs x ON x.id = c.xorb_id WHERE c.key = ?1
             AND NOT EXISTS (SELECT 1 FROM condemned_xorbs d WHERE d.hash = x.hash){cond}
             ORDER BY c.xorb_id LIMIT {CHUNK_CANDIDATES}"
        );
        let key = chunk_key(chunk_hash);
        let found = self.read(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(scope::with_bounds(&[&key], &bounds).as_slice(), |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })?;
        for (xorb, index) in found {
            let meta = self.xorb(&hash_from(xorb)?)?;
            if let Some(at) = confirmed_location(meta.as_deref(), chunk_hash, index as u32) {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    fn files_starting_with(
        &self,
        chunk_hash: &MerkleHash,
        limit: usize,
        domain: &DedupDomain,
    ) -> IndexResult<Vec<MerkleHash>> {
        let (cond, bounds) = scope::seen_in(domain, "fc.file_hash", 3);
        let sql = format!(
            "SELECT fc.file_hash FROM first_chunks fc WHERE fc.chunk_hash = ?1{cond} LIMIT ?2"
        );
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let (chunk, limit) = (blob(chunk_hash), limit as i64);
            let rows = stmt.query_map(
                scope::with_bounds(&[&chunk, &limit], &bounds).as_slice(),
                |r| r.get::<_, Vec<u8>>(0),
            )?;
            rows.map(|r| hash_from(r?)).collect()
        })
    }

    fn xorb_in_domain(&self, hash: &MerkleHash, domain: &DedupDomain) -> IndexResult<bool> {
        if *domain == DedupDomain::Server {
            return Ok(self.xorb(hash)?.is_some());
        }
        self.read(|c| scope::xorb_in_domain(c, hash, domain))
    }

    fn add_xorb_holder(
        &self,
        hash: &MerkleHash,
        repo: &RepoName,
        domain: &DedupDomain,
    ) -> IndexResult<bool> {
        let now = now_secs() as i64;
        self.write(|tx| scope::add_holder(tx, hash, repo, domain, now))
    }

    fn stats(&self) -> IndexResult<IndexStats> {
        self.read(|c| {
            let (xorbs, xorb_bytes): (i64, i64) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(stored_len), 0) FROM xorbs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let files: i64 = c.query_row("SELECT COUNT(*) FROM files", [], |r| r.get(0))?;
            Ok(IndexStats {
                xorbs: xorbs as u64,
                xorb_bytes: xorb_bytes as u64,
                files: files as u64,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup by sha256 goes through its index, not through every file of the
    /// repository (what SQLite chose for it without `INDEXED BY`).
    #[test]
    fn lookups_by_sha256_use_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        SqliteIndex::open(&path, false).unwrap();
        let conn = open_connection(&path, false).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {REPO_FILE_BY_SHA256}"))
            .unwrap()
            .query_map(params!["a/b", &[0u8; 32][..]], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("INDEX repo_files_by_sha256 (repo=? AND sha256=?)")),
            "{plan:?}"
        );
    }
}
