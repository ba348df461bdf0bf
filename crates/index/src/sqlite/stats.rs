//! [`StatsIndex`] on SQLite. Terms are a blob per file, so the xorbs a repository uses are
//! collected here rather than by a join.

use std::collections::HashSet;

use rusqlite::OptionalExtension;

use super::{blob, SqliteIndex};
use crate::repo_name::RepoName;
use crate::stats::{StatsIndex, Usage};
use crate::{decode_terms, IndexResult};
use git_xet_core::MerkleHash;

/// Lets `stats`, which every `/metrics` scrape runs, count and sum the xorbs from this small
/// index rather than scan the xorbs table, whose rows carry the chunk tables (3-10x faster at
/// 100k xorbs: docs/benchmarks.md).
pub(super) const SCHEMA: &str =
    "CREATE INDEX IF NOT EXISTS xorbs_by_stored_len ON xorbs (stored_len);";

impl StatsIndex for SqliteIndex {
    fn repo_usage(&self, repo: &RepoName) -> IndexResult<Usage> {
        self.read(|c| {
            let mut usage = Usage::default();
            let mut xorbs = HashSet::<MerkleHash>::new();
            let mut files = c.prepare(
                "SELECT f.size, COALESCE(r.terms, f.terms) FROM repo_files r JOIN files f ON f.hash = r.file_hash \
                 WHERE r.repo = ?1",
            )?;
            let mut rows = files.query([repo.to_string()])?;
            while let Some(row) = rows.next()? {
                let size: i64 = row.get(0)?;
                let terms: Vec<u8> = row.get(1)?;
                usage.files += 1;
                usage.logical_bytes += size.max(0) as u64;
                xorbs.extend(decode_terms(&terms)?.into_iter().map(|t| t.xorb_hash));
            }
            let mut stored = c.prepare("SELECT stored_len FROM xorbs WHERE hash = ?1")?;
            for xorb in &xorbs {
                let len: Option<i64> = stored.query_row([blob(xorb)], |r| r.get(0)).optional()?;
                if let Some(len) = len {
                    usage.xorbs += 1;
                    usage.stored_bytes += len.max(0) as u64;
                }
            }
            Ok(usage)
        })
    }

    fn total_usage(&self) -> IndexResult<Usage> {
        self.read(|c| {
            let (files, logical): (i64, i64) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM files",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let (xorbs, stored): (i64, i64) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(stored_len), 0) FROM xorbs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok(Usage {
                files: files as u64,
                logical_bytes: logical as u64,
                xorbs: xorbs as u64,
                stored_bytes: stored as u64,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileRecord, Index, ShardRegistration, XorbMeta};
    use git_xet_core::shard::FileTerm;
    use git_xet_core::xorb::XorbFooter;

    fn h(n: u8) -> MerkleHash {
        MerkleHash::from_slice(&[n; 32]).unwrap()
    }

    fn xorb(n: u8, stored_len: u64) -> XorbMeta {
        XorbMeta {
            footer: XorbFooter {
                hash: h(n),
                chunk_hashes: vec![h(n + 100)],
                chunk_ends: vec![stored_len as u32],
                unpacked_ends: vec![1000],
            },
            stored_len,
        }
    }

    fn file(n: u8, size: u64, xorbs: &[u8]) -> FileRecord {
        FileRecord {
            file_hash: h(n),
            size,
            sha256: [n; 32],
            terms: xorbs
                .iter()
                .map(|&x| FileTerm {
                    xorb_hash: h(x),
                    cas_flags: 0,
                    chunk_start: 0,
                    chunk_end: 1,
                    unpacked_bytes: 1000,
                })
                .collect(),
        }
    }

    #[test]
    fn usage_counts_each_xorb_once_per_repository() {
        let dir = tempfile::tempdir().unwrap();
        let index = SqliteIndex::open(&dir.path().join("i.sqlite"), false).unwrap();
        index.register_xorb(&xorb(1, 600)).unwrap();
        index.register_xorb(&xorb(2, 400)).unwrap();
        let repo = |s: &str| RepoName::parse(s).unwrap();
        let register = |shard: u8, name: &str, files: Vec<FileRecord>| {
            index
                .register_shard(&ShardRegistration {
                    shard_hash: h(shard),
                    shard_len: 10,
                    repo: repo(name),
                    files,
                    domain: crate::DedupDomain::Server,
                    first_chunks: vec![],
                })
                .unwrap();
        };
        // Two versions of a file sharing xorb 1.
        register(
            50,
            "org/a",
            vec![file(10, 1000, &[1]), file(11, 1000, &[1, 2])],
        );
        register(51, "org/b", vec![file(10, 1000, &[1])]);
        let a = index.repo_usage(&repo("org/a")).unwrap();
        assert_eq!(
            a,
            Usage {
                files: 2,
                logical_bytes: 2000,
                xorbs: 2,
                stored_bytes: 1000
            }
        );
        assert_eq!(a.dedup_ratio(), Some(2.0));
        let b = index.repo_usage(&repo("org/b")).unwrap();
        assert_eq!((b.files, b.logical_bytes, b.stored_bytes), (1, 1000, 600));
        assert_eq!(
            index.repo_usage(&repo("org/none")).unwrap(),
            Usage::default()
        );
        assert_eq!(
            index.total_usage().unwrap(),
            Usage {
                files: 2,
                logical_bytes: 2000,
                xorbs: 2,
                stored_bytes: 1000
            }
        );
        assert_eq!(Usage::default().dedup_ratio(), None);
    }
}
