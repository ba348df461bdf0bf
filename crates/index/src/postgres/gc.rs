//! [`GcIndex`] on PostgreSQL, and the condemned-xorb checks the registrations make. The
//! invariant these keep is stated in `crates/index/src/gc.rs`.
//!
//! SQLite keeps it by running one writer at a time; here several processes write at once, so
//! the steps that must not interleave share one transaction-level advisory lock (`GC_LOCK`):
//! every registration (`register_xorb`, `register_shard`) takes it *shared* before its
//! condemned/indexed checks, and gc's condemning (and its unregistering of unreachable files)
//! takes it *exclusive* before re-reading the references. Registrations do not wait for each
//! other; a condemnation waits until the registrations in flight have committed, then (each
//! statement of a READ COMMITTED transaction reading what committed before it) sees their
//! files and spares their xorbs, and registrations that start meanwhile wait for it, then see
//! its marks and are refused. That is the SQLite order, between processes.

use std::collections::HashSet;

use tokio_postgres::{Client, Transaction};

use super::pool::wait;
use super::{PgIndex, PgResult};
use crate::columns::{file_record, hash_from, sha256_claim};
use crate::gc::{GcIndex, IndexedShard, IndexedXorb, Sha256Claim};
use crate::repo_name::RepoName;
use crate::{decode_terms, FileRecord, IndexError, IndexResult};
use git_xet_core::MerkleHash;
use git_xet_io::time::now_secs;

/// Xorbs gc has decided to delete: invisible to dedup, refused by registrations.
pub(super) const MIGRATION: &str = "
CREATE TABLE condemned_xorbs (
    hash BYTEA PRIMARY KEY,
    condemned_at BIGINT NOT NULL
);
";

/// Advisory lock key of gc's condemning against registrations ("xet-gc" in ASCII).
const GC_LOCK: i64 = 0x0000_7865_742d_6763;

/// Inside a registration's transaction, before its checks: waits for a condemnation in
/// progress, and holds one off until this transaction ends.
pub(super) fn registration_lock(tx: &Transaction<'_>) -> PgResult<()> {
    wait(tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&GC_LOCK]))?;
    Ok(())
}

/// Inside gc's transaction, before it reads references: waits for the registrations in
/// flight, and holds new ones off until this transaction ends.
fn gc_lock(tx: &Transaction<'_>) -> PgResult<()> {
    wait(tx.execute("SELECT pg_advisory_xact_lock($1)", &[&GC_LOCK]))?;
    Ok(())
}

/// `Err(XorbCollected)` when `hash` is condemned (inside a registration's transaction,
/// after `registration_lock`).
pub(super) fn refuse_condemned(
    tx: &Transaction<'_>,
    hash: &MerkleHash,
) -> PgResult<IndexResult<()>> {
    let row = wait(tx.query_opt(
        "SELECT 1 FROM condemned_xorbs WHERE hash = $1",
        &[&hash.as_bytes().as_slice()],
    ))?;
    Ok(match row {
        Some(_) => Err(IndexError::XorbCollected(*hash)),
        None => Ok(()),
    })
}

/// `Err(XorbCollected)` for the first of `hashes` that is not indexed or is condemned
/// (inside a registration's transaction, after `registration_lock`).
pub(super) fn require_live_xorbs(
    tx: &Transaction<'_>,
    hashes: &[&[u8]],
) -> PgResult<IndexResult<()>> {
    let row = wait(tx.query_opt(
        "SELECT h FROM UNNEST($1::BYTEA[]) AS u (h)
         WHERE NOT EXISTS (SELECT 1 FROM xorbs x WHERE x.hash = u.h)
            OR EXISTS (SELECT 1 FROM condemned_xorbs d WHERE d.hash = u.h)
         LIMIT 1",
        &[&hashes],
    ))?;
    Ok(match row {
        None => Ok(()),
        Some(r) => match hash_from(r.get(0)) {
            Ok(hash) => Err(IndexError::XorbCollected(hash)),
            Err(e) => Err(e),
        },
    })
}

/// The server's file records and the repositories' own (scope.rs), which go with their
/// repository.
const ALL_TERMS: &str =
    "SELECT terms FROM files UNION ALL SELECT terms FROM repo_files WHERE terms IS NOT NULL";
const REACHABLE_TERMS: &str =
    "SELECT terms FROM files f WHERE EXISTS (SELECT 1 FROM repo_files r WHERE r.file_hash = f.hash)
     UNION ALL SELECT terms FROM repo_files WHERE terms IS NOT NULL";

/// The xorbs referenced by these `terms` rows.
fn referenced(rows: Vec<tokio_postgres::Row>) -> IndexResult<HashSet<MerkleHash>> {
    let mut out = HashSet::new();
    for row in rows {
        let terms: Vec<u8> = row.get(0);
        out.extend(decode_terms(&terms)?.iter().map(|t| t.xorb_hash));
    }
    Ok(out)
}

fn hashes(rows: Vec<tokio_postgres::Row>) -> IndexResult<Vec<MerkleHash>> {
    rows.into_iter().map(|r| hash_from(r.get(0))).collect()
}

fn condemn_tx(
    client: &mut Client,
    candidates: &[MerkleHash],
    now: i64,
) -> PgResult<IndexResult<Vec<MerkleHash>>> {
    let tx = wait(client.transaction())?;
    gc_lock(&tx)?;
    // Read after the lock: every registration that got in first has committed.
    let live = match referenced(wait(tx.query(ALL_TERMS, &[]))?) {
        Ok(live) => live,
        Err(e) => return Ok(Err(e)),
    };
    let mut out: Vec<MerkleHash> = candidates
        .iter()
        .filter(|h| !live.contains(h))
        .copied()
        .collect();
    out.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    out.dedup();
    let blobs: Vec<&[u8]> = out.iter().map(|h| h.as_bytes().as_slice()).collect();
    wait(tx.execute(
        "INSERT INTO condemned_xorbs (hash, condemned_at)
         SELECT h, $2 FROM UNNEST($1::BYTEA[]) AS u (h) ON CONFLICT (hash) DO NOTHING",
        &[&blobs, &now],
    ))?;
    wait(tx.commit())?;
    Ok(Ok(out))
}

fn unregister_tx(client: &mut Client, dry_run: bool) -> PgResult<u64> {
    const UNREACHABLE: &str =
        "NOT EXISTS (SELECT 1 FROM repo_files r WHERE r.file_hash = files.hash)";
    let tx = wait(client.transaction())?;
    if dry_run {
        let row = wait(tx.query_one(
            &format!("SELECT COUNT(*) FROM files WHERE {UNREACHABLE}"),
            &[],
        ))?;
        return Ok(row.get::<_, i64>(0) as u64);
    }
    // A registration may be making one of these files reachable again: wait for it (its
    // repo_files row is then seen), and hold new ones off until the files are gone.
    gc_lock(&tx)?;
    let n = wait(tx.execute(&format!("DELETE FROM files WHERE {UNREACHABLE}"), &[]))?;
    wait(tx.execute(
        "DELETE FROM first_chunks c WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.hash = c.file_hash)",
        &[],
    ))?;
    wait(tx.execute(
        "DELETE FROM verified_sha256 v WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.hash = v.file_hash)",
        &[],
    ))?;
    wait(tx.commit())?;
    Ok(n)
}

impl GcIndex for PgIndex {
    fn delete_repo_files(&self, repo: &RepoName) -> IndexResult<u64> {
        self.pool.run(|c| {
            let tx = wait(c.transaction())?;
            wait(tx.execute("DELETE FROM locks WHERE repo = $1", &[&repo.as_str()]))?;
            // It no longer holds xorbs for its dedup scope.
            wait(tx.execute("DELETE FROM xorb_repos WHERE repo = $1", &[&repo.as_str()]))?;
            // Nor is it private: a repository created again under the name decides anew.
            wait(tx.execute(
                "DELETE FROM repositories WHERE name = $1",
                &[&repo.as_str()],
            ))?;
            let n = wait(tx.execute("DELETE FROM repo_files WHERE repo = $1", &[&repo.as_str()]))?;
            wait(tx.commit())?;
            Ok(n)
        })
    }

    fn unregister_unreachable_files(&self, dry_run: bool) -> IndexResult<u64> {
        self.pool.run(|c| unregister_tx(c, dry_run))
    }

    fn indexed_xorbs(&self) -> IndexResult<Vec<IndexedXorb>> {
        let rows = self
            .pool
            .run(|c| {
                // Age counts from the last full upload (see the SQLite index).
                wait(c.query(
                    "SELECT hash, stored_len, GREATEST(created_at, COALESCE((SELECT MAX(h.at) FROM xorb_repos h WHERE h.xorb_id = xorbs.id), 0)) FROM xorbs",
                    &[],
                ))
            })?;
        rows.into_iter()
            .map(|r| {
                Ok(IndexedXorb {
                    hash: hash_from(r.get(0))?,
                    stored_len: r.get::<_, i64>(1) as u64,
                    created_at: r.get::<_, i64>(2) as u64,
                })
            })
            .collect()
    }

    fn referenced_xorbs(&self) -> IndexResult<HashSet<MerkleHash>> {
        referenced(self.pool.run(|c| wait(c.query(REACHABLE_TERMS, &[])))?)
    }

    fn condemn_xorbs(&self, candidates: &[MerkleHash]) -> IndexResult<Vec<MerkleHash>> {
        let now = now_secs() as i64;
        self.pool.run(|c| condemn_tx(c, candidates, now))?
    }

    fn condemned_xorbs(&self) -> IndexResult<Vec<MerkleHash>> {
        hashes(
            self.pool
                .run(|c| wait(c.query("SELECT hash FROM condemned_xorbs", &[])))?,
        )
    }

    fn forget_xorb(&self, hash: &MerkleHash) -> IndexResult<()> {
        let key = hash.as_bytes().as_slice();
        self.pool.run(|c| {
            let tx = wait(c.transaction())?;
            wait(tx.execute(
                "DELETE FROM chunks WHERE xorb_id IN (SELECT id FROM xorbs WHERE hash = $1)",
                &[&key],
            ))?;
            wait(tx.execute(
                "DELETE FROM xorb_repos WHERE xorb_id IN (SELECT id FROM xorbs WHERE hash = $1)",
                &[&key],
            ))?;
            wait(tx.execute("DELETE FROM xorbs WHERE hash = $1", &[&key]))?;
            wait(tx.execute("DELETE FROM condemned_xorbs WHERE hash = $1", &[&key]))?;
            wait(tx.commit())
        })?;
        self.evict(hash);
        Ok(())
    }

    fn indexed_shards(&self) -> IndexResult<Vec<IndexedShard>> {
        let rows = self
            .pool
            .run(|c| wait(c.query("SELECT hash, len, created_at FROM shards", &[])))?;
        rows.into_iter()
            .map(|r| {
                Ok(IndexedShard {
                    hash: hash_from(r.get(0))?,
                    len: r.get::<_, i64>(1) as u64,
                    created_at: r.get::<_, i64>(2) as u64,
                })
            })
            .collect()
    }

    fn any_file_registered(&self, files: &[MerkleHash]) -> IndexResult<bool> {
        let blobs: Vec<&[u8]> = files.iter().map(|h| h.as_bytes().as_slice()).collect();
        let row = self.pool.run(|c| {
            wait(c.query_opt(
                "SELECT 1 FROM files WHERE hash = ANY($1) LIMIT 1",
                &[&blobs],
            ))
        })?;
        Ok(row.is_some())
    }

    fn forget_shard(&self, hash: &MerkleHash) -> IndexResult<()> {
        self.pool.run(|c| {
            wait(c.execute(
                "DELETE FROM shards WHERE hash = $1",
                &[&hash.as_bytes().as_slice()],
            ))
        })?;
        Ok(())
    }

    fn files_page(&self, after: Option<&MerkleHash>, limit: usize) -> IndexResult<Vec<FileRecord>> {
        // Every hash sorts after the empty string (bytea compares bytewise).
        let after: &[u8] = after.map_or(&[], |h| h.as_bytes().as_slice());
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT hash, size, sha256, terms FROM files WHERE hash > $1 ORDER BY hash LIMIT $2",
                &[&after, &limit],
            ))
        })?;
        let files = rows
            .into_iter()
            .map(|r| file_record((r.get(0), r.get(1), r.get(2), r.get(3))))
            .collect::<IndexResult<Vec<_>>>()?;
        // Each file's repositories' own records follow the server's (scope.rs).
        let hashes: Vec<&[u8]> = files
            .iter()
            .map(|f| f.file_hash.as_bytes().as_slice())
            .collect();
        let own = self.pool.run(|c| {
            wait(c.query(
                "SELECT DISTINCT file_hash, terms FROM repo_files
                 WHERE file_hash = ANY($1) AND terms IS NOT NULL ORDER BY file_hash, terms",
                &[&hashes],
            ))
        })?;
        let mut out = Vec::with_capacity(files.len() + own.len());
        let mut own = own.into_iter().peekable();
        for file in files {
            let hash = file.file_hash;
            out.push(file);
            while let Some(row) =
                own.next_if(|r| r.get::<_, &[u8]>(0) == hash.as_bytes().as_slice())
            {
                let terms: Vec<u8> = row.get(1);
                let server = out.last().expect("pushed above").clone();
                out.push(FileRecord {
                    terms: decode_terms(&terms)?,
                    ..server
                });
            }
        }
        Ok(out)
    }

    fn sha256_claims(&self, file_hash: &MerkleHash) -> IndexResult<Vec<Sha256Claim>> {
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT repo, sha256 FROM repo_files WHERE file_hash = $1",
                &[&file_hash.as_bytes().as_slice()],
            ))
        })?;
        rows.into_iter()
            .map(|r| sha256_claim(r.get(0), r.get(1)))
            .collect()
    }
}
