//! The shared index of a multi-process deployment: PostgreSQL (`--index postgres://...`).
//!
//! Same semantics as the SQLite index: every `register_*` is one transaction, and a
//! registration that another process made first (the same xorb, shard or file pushed through
//! two servers at once) is not an error (`ON CONFLICT DO NOTHING`); a chunk is looked up in
//! the oldest xorb holding it (of the caller's dedup scope). Rows are inserted in sorted
//! order, so two transactions lock shared keys in the same order and do not deadlock; a
//! conflict PostgreSQL resolves by aborting a transaction anyway is retried
//! (`pool::Pool::run`).

mod dump;
mod error;
mod gc;
mod locks;
mod migrate;
mod pool;
mod repos;
mod scope;
mod secret;
mod stats;
mod tokens;
mod verify;

use std::sync::Arc;

use tokio_postgres::Client;

use crate::columns::*;
use crate::meta_cache::MetaCache;
use crate::*;
use git_xet_io::time::now_secs;
use pool::{wait, Pool};

pub struct PgIndex {
    pool: Pool,
    cache: MetaCache,
}

type PgResult<T> = Result<T, tokio_postgres::Error>;

/// Xorbs holding a chunk's 8-byte key tried per lookup (see the SQLite index).
const CHUNK_CANDIDATES: usize = 8;

impl PgIndex {
    /// Whether a PostgreSQL URL carries a password (in its user part or a `password=`
    /// parameter); `None` when PostgreSQL's client cannot parse it.
    pub fn url_holds_password(url: &str) -> Option<bool> {
        let config = url.parse::<tokio_postgres::Config>().ok()?;
        Some(config.get_password().is_some())
    }

    /// Connects, and creates or upgrades the schema.
    pub fn open(url: &str) -> IndexResult<PgIndex> {
        let pool = Pool::new(url)?;
        let mut client = pool.connect()?;
        migrate::migrate(&mut client)?;
        drop(client);
        tracing::info!(index = pool.shown_url(), "PostgreSQL index ready");
        Ok(PgIndex {
            pool,
            cache: MetaCache::default(),
        })
    }

    /// The deployment's signing secret as its servers created it, read without opening the
    /// index (no migration, nothing written): for the ssh shell, which runs per ssh command
    /// and must not upgrade a schema that older servers still use. `None` before the first
    /// server start.
    pub fn existing_secret(url: &str) -> IndexResult<Option<[u8; 32]>> {
        Pool::new(url)?.run(secret::load_existing)?
    }

    /// Whether the token `id` is revoked, read without migrating the schema (the ssh shell
    /// changes nothing). An id the index does not know is not revoked.
    pub fn existing_token_revoked(url: &str, id: &str) -> IndexResult<bool> {
        let row = Pool::new(url)?
            .run(|c| wait(c.query_opt("SELECT revoked FROM tokens WHERE id = $1", &[&id])))?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// The deployment's signing secret, created by the first process that asks.
    pub fn shared_secret(&self) -> IndexResult<[u8; 32]> {
        self.pool.run(secret::load_or_create)?
    }

    /// Installs `secret` as the deployment's signing secret where none exists yet (`index
    /// rebuild --secret-file`); returns the secret the index then holds, which is another
    /// only when a process created one first.
    pub fn install_secret(&self, secret: &[u8; 32]) -> IndexResult<[u8; 32]> {
        let secret = *secret;
        self.pool.run(move |c| secret::install(c, &secret))?
    }

    /// Drops a cached layout (its xorb was collected, perhaps by another process).
    fn evict(&self, hash: &MerkleHash) {
        self.cache.remove(hash);
    }

    fn load_xorb(client: &mut Client, hash: &MerkleHash) -> PgResult<Option<RawXorb>> {
        let row = wait(client.query_opt(
            "SELECT stored_len, chunk_hashes, chunk_ends, unpacked_ends FROM xorbs WHERE hash = $1",
            &[&hash.as_bytes().as_slice()],
        ))?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))))
    }

    fn query_file(
        &self,
        sql: &'static str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> IndexResult<Option<FileRecord>> {
        let row = self.pool.run(|c| wait(c.query_opt(sql, params)))?;
        row.map(|r| file_record((r.get(0), r.get(1), r.get(2), r.get(3))))
            .transpose()
    }
}

/// A `xorbs` row: stored length and the three chunk tables.
type RawXorb = (i64, Vec<u8>, Vec<u8>, Vec<u8>);

fn register_xorb_tx(client: &mut Client, meta: &XorbMeta, now: i64) -> PgResult<IndexResult<bool>> {
    let f = &meta.footer;
    let tx = wait(client.transaction())?;
    gc::registration_lock(&tx)?;
    if let Err(e) = gc::refuse_condemned(&tx, &f.hash)? {
        return Ok(Err(e));
    }
    let inserted = wait(tx.query_opt(
        "INSERT INTO xorbs (hash, stored_len, unpacked_len, num_chunks, chunk_hashes, chunk_ends, unpacked_ends, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (hash) DO NOTHING RETURNING id",
        &[
            &f.hash.as_bytes().as_slice(),
            &(meta.stored_len as i64),
            &(f.unpacked_len() as i64),
            &(f.num_chunks() as i64),
            &hashes_blob(&f.chunk_hashes),
            &u32_blob(&f.chunk_ends),
            &u32_blob(&f.unpacked_ends),
            &now,
        ],
    ))?;
    let Some(row) = inserted else {
        // Known: make its layout the stored one (the hash fixes chunk hashes and sizes, not
        // where each record ends).
        let changed = wait(tx.execute(
            "UPDATE xorbs SET stored_len = $2, chunk_ends = $3
             WHERE hash = $1 AND (stored_len <> $2 OR chunk_ends <> $3)",
            &[
                &f.hash.as_bytes().as_slice(),
                &(meta.stored_len as i64),
                &u32_blob(&f.chunk_ends),
            ],
        ))?;
        wait(tx.commit())?;
        if changed > 0 {
            tracing::warn!(xorb = %f.hash, "the index's layout of this xorb was not the stored one: replaced");
        }
        return Ok(Ok(false));
    };
    let id: i64 = row.get(0);
    // One row per distinct key, its first index in the xorb, in key order (lock order).
    let mut chunks: Vec<(i64, i32)> = f
        .chunk_hashes
        .iter()
        .enumerate()
        .map(|(i, h)| (chunk_key(h), i as i32))
        .collect();
    chunks.sort_unstable();
    chunks.dedup_by_key(|c| c.0);
    let (keys, indexes): (Vec<i64>, Vec<i32>) = chunks.into_iter().unzip();
    wait(tx.execute(
        "INSERT INTO chunks (key, xorb_id, chunk_index)
         SELECT k, $2, i FROM UNNEST($1::BIGINT[], $3::INTEGER[]) AS t (k, i)
         ON CONFLICT (key, xorb_id) DO NOTHING",
        &[&keys, &id, &indexes],
    ))?;
    wait(tx.commit())?;
    Ok(Ok(true))
}

fn register_shard_tx(
    client: &mut Client,
    reg: &ShardRegistration,
    now: i64,
) -> PgResult<IndexResult<RegisterOutcome>> {
    // Sorted and distinct: the lock order every transaction shares.
    let mut files: Vec<&FileRecord> = reg.files.iter().collect();
    files.sort_unstable_by(|a, b| a.file_hash.as_bytes().cmp(b.file_hash.as_bytes()));
    files.dedup_by(|a, b| a.file_hash == b.file_hash);
    let hashes: Vec<&[u8]> = files
        .iter()
        .map(|f| f.file_hash.as_bytes().as_slice())
        .collect();
    let sizes: Vec<i64> = files.iter().map(|f| f.size as i64).collect();
    let sha256s: Vec<&[u8]> = files.iter().map(|f| f.sha256.as_slice()).collect();
    let terms: Vec<Vec<u8>> = files.iter().map(|f| encode_terms(&f.terms)).collect();
    let mut first: Vec<(&[u8], &[u8])> = reg
        .first_chunks
        .iter()
        .map(|(c, f)| (c.as_bytes().as_slice(), f.as_bytes().as_slice()))
        .collect();
    first.sort_unstable();
    first.dedup();
    let (first_chunks, first_files): (Vec<&[u8]>, Vec<&[u8]>) = first.into_iter().unzip();
    let xorbs = reg.referenced_xorbs();
    let referenced: Vec<&[u8]> = xorbs.iter().map(|h| h.as_bytes().as_slice()).collect();

    let tx = wait(client.transaction())?;
    // Validation saw these xorbs, but gc may have condemned or deleted them since: checked
    // again here, under the lock gc's condemning takes exclusively (see gc.rs).
    gc::registration_lock(&tx)?;
    if let Err(e) = gc::require_live_xorbs(&tx, &referenced)? {
        return Ok(Err(e));
    }
    scope::add_referencing_holder(&tx, &referenced, &reg.repo, now)?;
    let new_shard = wait(tx.execute(
        "INSERT INTO shards (hash, repo, len, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (hash) DO NOTHING",
        &[
            &reg.shard_hash.as_bytes().as_slice(),
            &reg.repo.as_str(),
            &(reg.shard_len as i64),
            &now,
        ],
    ))? == 1;
    let new_files = wait(tx.execute(
        "INSERT INTO files (hash, size, sha256, terms, created_at)
         SELECT h, s, d, t, $5 FROM UNNEST($1::BYTEA[], $2::BIGINT[], $3::BYTEA[], $4::BYTEA[]) AS u (h, s, d, t)
         ON CONFLICT (hash) DO NOTHING",
        &[&hashes, &sizes, &sha256s, &terms, &now],
    ))?;
    // Outside the whole-server domain the repository keeps its own terms where they differ
    // from the server's record (scope.rs, "File records").
    let scoped = reg.domain != DedupDomain::Server;
    let new_repo_files = wait(tx.execute(
        "INSERT INTO repo_files (repo, file_hash, sha256, created_at, terms)
         SELECT $1, u.h, u.d, $4, CASE WHEN $5 AND u.t IS DISTINCT FROM f.terms THEN u.t END
         FROM UNNEST($2::BYTEA[], $3::BYTEA[], $6::BYTEA[]) AS u (h, d, t)
         LEFT JOIN files f ON f.hash = u.h
         ORDER BY u.h
         ON CONFLICT (repo, file_hash) DO NOTHING",
        &[&reg.repo.as_str(), &hashes, &sha256s, &now, &scoped, &terms],
    ))?;
    wait(tx.execute(
        "INSERT INTO first_chunks (chunk_hash, file_hash)
         SELECT c, f FROM UNNEST($1::BYTEA[], $2::BYTEA[]) AS u (c, f)
         ON CONFLICT DO NOTHING",
        &[&first_chunks, &first_files],
    ))?;
    wait(tx.commit())?;
    Ok(Ok(RegisterOutcome {
        new_shard,
        new_files,
        new_repo_files,
    }))
}

impl Index for PgIndex {
    fn register_xorb(&self, meta: &XorbMeta) -> IndexResult<bool> {
        let now = now_secs() as i64;
        let inserted = self.pool.run(|c| register_xorb_tx(c, meta, now))??;
        self.cache.insert(Arc::new(meta.clone()));
        Ok(inserted)
    }

    fn xorb(&self, hash: &MerkleHash) -> IndexResult<Option<Arc<XorbMeta>>> {
        if let Some(meta) = self.cache.get(hash) {
            return Ok(Some(meta));
        }
        let Some((stored_len, hashes, ends, unpacked)) =
            self.pool.run(|c| Self::load_xorb(c, hash))?
        else {
            return Ok(None);
        };
        let meta = Arc::new(xorb_meta(hash, stored_len, &hashes, &ends, &unpacked)?);
        self.cache.insert(meta.clone());
        Ok(Some(meta))
    }

    fn register_shard(&self, reg: &ShardRegistration) -> IndexResult<RegisterOutcome> {
        let now = now_secs() as i64;
        let result = self.pool.run(|c| register_shard_tx(c, reg, now))?;
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
        let hash = file_hash.as_bytes().as_slice();
        match domain.bounds() {
            None => self.query_file(
                "SELECT hash, size, sha256, terms FROM files WHERE hash = $1",
                &[&hash],
            ),
            Some(b) => self.query_file(scope::DOMAIN_FILE, &[&hash, &b.exact, &b.lo, &b.hi]),
        }
    }

    fn repo_file(
        &self,
        repo: &RepoName,
        file_hash: &MerkleHash,
    ) -> IndexResult<Option<FileRecord>> {
        self.query_file(
            "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
             WHERE r.repo = $1 AND r.file_hash = $2",
            &[&repo.as_str(), &file_hash.as_bytes().as_slice()],
        )
    }

    fn repo_has_file(&self, repo: &RepoName, file_hash: &MerkleHash) -> IndexResult<bool> {
        let row = self.pool.run(|c| {
            wait(c.query_opt(
                "SELECT 1 FROM repo_files WHERE repo = $1 AND file_hash = $2",
                &[&repo.as_str(), &file_hash.as_bytes().as_slice()],
            ))
        })?;
        Ok(row.is_some())
    }

    fn repo_file_by_sha256(
        &self,
        repo: &RepoName,
        sha256: &[u8; 32],
    ) -> IndexResult<Option<FileRecord>> {
        self.query_file(
            "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
             WHERE r.repo = $1 AND r.sha256 = $2 LIMIT 1",
            &[&repo.as_str(), &sha256.as_slice()],
        )
    }

    fn repo_files_by_sha256(
        &self,
        repo: &RepoName,
        sha256s: &[[u8; 32]],
    ) -> IndexResult<Vec<Option<FileRecord>>> {
        // One round trip to PostgreSQL for all of them (any one record per sha256, as
        // `LIMIT 1` picks one above).
        let blobs: Vec<&[u8]> = sha256s.iter().map(|s| s.as_slice()).collect();
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT DISTINCT ON (r.sha256) f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms)
                 FROM repo_files r JOIN files f ON f.hash = r.file_hash
                 WHERE r.repo = $1 AND r.sha256 = ANY($2)",
                &[&repo.as_str(), &blobs],
            ))
        })?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for r in rows {
            let file = file_record((r.get(0), r.get(1), r.get(2), r.get(3)))?;
            found.insert(file.sha256, file);
        }
        Ok(sha256s.iter().map(|s| found.get(s).cloned()).collect())
    }

    fn chunk_location(
        &self,
        chunk_hash: &MerkleHash,
        domain: &DedupDomain,
    ) -> IndexResult<Option<(MerkleHash, u32)>> {
        let (cond, bounds) = scope::held_in(domain, "c.xorb_id", 2);
        let sql = format!(
            "SELECT x.hash, c.chunk_index FROM chunks c JOIN xorbs x ON x.id = c.xorb_id WHERE c.key = $1
             AND NOT EXISTS (SELECT 1 FROM condemned_xorbs d WHERE d.hash = x.hash){cond}
             ORDER BY c.xorb_id LIMIT {CHUNK_CANDIDATES}"
        );
        let key = chunk_key(chunk_hash);
        let rows = self
            .pool
            .run(|c| wait(c.query(sql.as_str(), &scope::with_bounds(&[&key], &bounds))))?;
        for row in rows {
            let xorb = hash_from(row.get(0))?;
            let index: i32 = row.get(1);
            let meta = self.xorb(&xorb)?;
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
            "SELECT fc.file_hash FROM first_chunks fc WHERE fc.chunk_hash = $1{cond} LIMIT $2"
        );
        let chunk = chunk_hash.as_bytes().as_slice();
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows = self.pool.run(|c| {
            wait(c.query(
                sql.as_str(),
                &scope::with_bounds(&[&chunk, &limit], &bounds),
            ))
        })?;
        rows.into_iter().map(|r| hash_from(r.get(0))).collect()
    }

    fn xorb_in_domain(&self, hash: &MerkleHash, domain: &DedupDomain) -> IndexResult<bool> {
        if *domain == DedupDomain::Server {
            return Ok(self.xorb(hash)?.is_some());
        }
        self.pool.run(|c| scope::xorb_in_domain(c, hash, domain))
    }

    fn add_xorb_holder(
        &self,
        hash: &MerkleHash,
        repo: &RepoName,
        domain: &DedupDomain,
    ) -> IndexResult<bool> {
        let now = now_secs() as i64;
        self.pool
            .run(|c| scope::add_holder_tx(c, hash, repo, domain, now))?
    }

    fn stats(&self) -> IndexResult<IndexStats> {
        let row = self.pool.run(|c| {
            wait(c.query_one(
                "SELECT (SELECT COUNT(*) FROM xorbs), (SELECT COALESCE(SUM(stored_len), 0)::BIGINT FROM xorbs),
                        (SELECT COUNT(*) FROM files)",
                &[],
            ))
        })?;
        Ok(IndexStats {
            xorbs: row.get::<_, i64>(0) as u64,
            xorb_bytes: row.get::<_, i64>(1) as u64,
            files: row.get::<_, i64>(2) as u64,
        })
    }
}
