//! [`StatsIndex`] on PostgreSQL: as on SQLite, a repository's xorbs are collected from its
//! files' term blobs, then their sizes read in one query.

use std::collections::HashSet;

use super::pool::wait;
use super::PgIndex;
use crate::repo_name::RepoName;
use crate::stats::{StatsIndex, Usage};
use crate::{decode_terms, IndexResult};
use git_xet_core::MerkleHash;

impl StatsIndex for PgIndex {
    fn repo_usage(&self, repo: &RepoName) -> IndexResult<Usage> {
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT f.size, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash
                 WHERE r.repo = $1",
                &[&repo.as_str()],
            ))
        })?;
        let mut usage = Usage::default();
        let mut xorbs = HashSet::<MerkleHash>::new();
        for row in rows {
            let size: i64 = row.get(0);
            let terms: Vec<u8> = row.get(1);
            usage.files += 1;
            usage.logical_bytes += size.max(0) as u64;
            xorbs.extend(decode_terms(&terms)?.into_iter().map(|t| t.xorb_hash));
        }
        let hashes: Vec<&[u8]> = xorbs.iter().map(|h| h.as_bytes().as_slice()).collect();
        let row = self.pool.run(|c| {
            wait(c.query_one(
                "SELECT COUNT(*), COALESCE(SUM(stored_len), 0)::BIGINT FROM xorbs WHERE hash = ANY($1)",
                &[&hashes],
            ))
        })?;
        usage.xorbs = row.get::<_, i64>(0) as u64;
        usage.stored_bytes = row.get::<_, i64>(1).max(0) as u64;
        Ok(usage)
    }

    fn total_usage(&self) -> IndexResult<Usage> {
        let row = self.pool.run(|c| {
            wait(c.query_one(
                "SELECT (SELECT COUNT(*) FROM files), (SELECT COALESCE(SUM(size), 0)::BIGINT FROM files),
                        (SELECT COUNT(*) FROM xorbs), (SELECT COALESCE(SUM(stored_len), 0)::BIGINT FROM xorbs)",
                &[],
            ))
        })?;
        Ok(Usage {
            files: row.get::<_, i64>(0) as u64,
            logical_bytes: row.get::<_, i64>(1) as u64,
            xorbs: row.get::<_, i64>(2) as u64,
            stored_bytes: row.get::<_, i64>(3) as u64,
        })
    }
}
