//! Dedup scope on PostgreSQL (crates/index/src/scope.rs): which repositories hold each
//! xorb, the scoped lookups, and the migration that added them.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Transaction};

use super::pool::wait;
use super::PgResult;
use crate::{DedupDomain, IndexError, IndexResult, RepoName};
use git_xet_core::MerkleHash;

/// Every chunk of every xorb is located (not only the first xorb to store it), so that a
/// scope finds its own copy; the repositories holding each xorb, backfilled from the
/// files each repository sees; files by hash (for the scoped first-chunk lookup). The chunk
/// key is the hash's first 8 bytes read little-endian (columns.rs), here with `get_byte`.
pub(super) const MIGRATION: &str = "
CREATE TABLE xorb_repos (
    xorb_id BIGINT NOT NULL,
    repo TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (xorb_id, repo)
);
CREATE INDEX xorb_repos_by_repo ON xorb_repos (repo);
CREATE INDEX repo_files_by_file ON repo_files (file_hash);
ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE chunks ADD PRIMARY KEY (key, xorb_id);
INSERT INTO chunks (key, xorb_id, chunk_index)
SELECT DISTINCT ON (k.key, x.id) k.key, x.id, i::INTEGER
FROM xorbs x
CROSS JOIN LATERAL generate_series(0, x.num_chunks - 1) AS i
CROSS JOIN LATERAL (SELECT
    get_byte(x.chunk_hashes, (i * 32)::INTEGER)::BIGINT
    | (get_byte(x.chunk_hashes, (i * 32 + 1)::INTEGER)::BIGINT << 8)
    | (get_byte(x.chunk_hashes, (i * 32 + 2)::INTEGER)::BIGINT << 16)
    | (get_byte(x.chunk_hashes, (i * 32 + 3)::INTEGER)::BIGINT << 24)
    | (get_byte(x.chunk_hashes, (i * 32 + 4)::INTEGER)::BIGINT << 32)
    | (get_byte(x.chunk_hashes, (i * 32 + 5)::INTEGER)::BIGINT << 40)
    | (get_byte(x.chunk_hashes, (i * 32 + 6)::INTEGER)::BIGINT << 48)
    | (get_byte(x.chunk_hashes, (i * 32 + 7)::INTEGER)::BIGINT << 56) AS key) AS k
ORDER BY k.key, x.id, i
ON CONFLICT (key, xorb_id) DO NOTHING;
INSERT INTO xorb_repos (xorb_id, repo, at)
SELECT DISTINCT x.id, r.repo, EXTRACT(EPOCH FROM now())::BIGINT
FROM repo_files r
JOIN files f ON f.hash = r.file_hash
CROSS JOIN LATERAL generate_series(0, length(f.terms) / 44 - 1) AS t
JOIN xorbs x ON x.hash = substring(f.terms FROM t * 44 + 1 FOR 32)
ON CONFLICT (xorb_id, repo) DO NOTHING;
";

/// A repository's own terms of a file it registered in a scoped domain, where they differ
/// from the server's record (`files`); NULL: the server's record. Existing rows keep the
/// record they were served (docs/server-api.md, "Dedup scope").
pub(super) const FILE_RECORDS_MIGRATION: &str = "ALTER TABLE repo_files ADD COLUMN terms BYTEA;";

/// A scoped domain's record of a file (`$1`): the oldest record of a repository inside it
/// (its bounds `$2..$4`).
pub(super) const DOMAIN_FILE: &str =
    "SELECT f.hash, f.size, r.sha256, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
     WHERE r.file_hash = $1 AND (r.repo = $2 OR (r.repo >= $3 AND r.repo < $4))
     ORDER BY r.created_at, r.repo LIMIT 1";

/// `AND` a repository of `domain` holds the xorb whose id is `xorb_id` (an SQL expression),
/// the domain's bounds being parameters `$first..$first+2`; empty for the whole server.
pub(super) fn held_in(domain: &DedupDomain, xorb_id: &str, first: usize) -> (String, Vec<String>) {
    condition(
        domain,
        "xorb_repos h",
        &format!("h.xorb_id = {xorb_id}"),
        "h.repo",
        first,
    )
}

/// The same condition on a registered file (`file_hash`): some repository of `domain` sees it.
pub(super) fn seen_in(
    domain: &DedupDomain,
    file_hash: &str,
    first: usize,
) -> (String, Vec<String>) {
    condition(
        domain,
        "repo_files r",
        &format!("r.file_hash = {file_hash}"),
        "r.repo",
        first,
    )
}

fn condition(
    domain: &DedupDomain,
    table: &str,
    join: &str,
    repo: &str,
    first: usize,
) -> (String, Vec<String>) {
    match domain.bounds() {
        None => (String::new(), Vec::new()),
        Some(b) => (
            format!(
                " AND EXISTS (SELECT 1 FROM {table} WHERE {join} AND ({repo} = ${} OR ({repo} >= ${} AND {repo} < ${})))",
                first,
                first + 1,
                first + 2
            ),
            vec![b.exact, b.lo, b.hi],
        ),
    }
}

/// Parameters: the fixed ones, then the domain's bounds.
pub(super) fn with_bounds<'a>(
    fixed: &[&'a (dyn ToSql + Sync)],
    bounds: &'a [String],
) -> Vec<&'a (dyn ToSql + Sync)> {
    let mut out = fixed.to_vec();
    out.extend(bounds.iter().map(|b| b as &(dyn ToSql + Sync)));
    out
}

pub(super) fn xorb_in_domain(
    client: &mut Client,
    hash: &MerkleHash,
    domain: &DedupDomain,
) -> PgResult<bool> {
    let (cond, bounds) = held_in(domain, "x.id", 2);
    let sql = format!("SELECT 1 FROM xorbs x WHERE x.hash = $1{cond}");
    let key = hash.as_bytes().as_slice();
    let row = wait(client.query_opt(sql.as_str(), &with_bounds(&[&key], &bounds)))?;
    Ok(row.is_some())
}

/// Records `repo` as a holder of `hash` (refreshing its time, which gc counts as the
/// xorb's age); returns whether `domain` held it before.
pub(super) fn add_holder_tx(
    client: &mut Client,
    hash: &MerkleHash,
    repo: &RepoName,
    domain: &DedupDomain,
    now: i64,
) -> PgResult<IndexResult<bool>> {
    let key = hash.as_bytes().as_slice();
    let tx = wait(client.transaction())?;
    let Some(row) = wait(tx.query_opt("SELECT id FROM xorbs WHERE hash = $1", &[&key]))? else {
        return Ok(Err(IndexError::XorbCollected(*hash)));
    };
    let id: i64 = row.get(0);
    let before = match domain {
        DedupDomain::Server => true,
        _ => {
            let (cond, bounds) = held_in(domain, "$1", 2);
            let sql = format!("SELECT 1 WHERE TRUE{cond}");
            wait(tx.query_opt(sql.as_str(), &with_bounds(&[&id], &bounds)))?.is_some()
        }
    };
    wait(tx.execute(
        "INSERT INTO xorb_repos (xorb_id, repo, at) VALUES ($1, $2, $3)
         ON CONFLICT (xorb_id, repo) DO UPDATE SET at = EXCLUDED.at",
        &[&id, &repo.as_str(), &now],
    ))?;
    wait(tx.commit())?;
    Ok(Ok(before))
}

/// A shard's repository holds every xorb its files reference (inside its registration;
/// `referenced` sorted, the lock order).
pub(super) fn add_referencing_holder(
    tx: &Transaction<'_>,
    referenced: &[&[u8]],
    repo: &RepoName,
    now: i64,
) -> PgResult<()> {
    wait(tx.execute(
        "INSERT INTO xorb_repos (xorb_id, repo, at)
         SELECT x.id, $2, $3 FROM UNNEST($1::BYTEA[]) AS u (h) JOIN xorbs x ON x.hash = u.h
         ORDER BY x.hash
         ON CONFLICT (xorb_id, repo) DO NOTHING",
        &[&referenced, &repo.as_str(), &now],
    ))?;
    Ok(())
}
