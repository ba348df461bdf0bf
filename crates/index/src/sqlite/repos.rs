//! Repository records in SQLite.

use rusqlite::{params, OptionalExtension};

use super::SqliteIndex;
use crate::repo_name::RepoName;
use crate::{IndexResult, RepoIndex};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS repositories (
    name TEXT PRIMARY KEY,
    private INTEGER NOT NULL DEFAULT 0
);
";

impl RepoIndex for SqliteIndex {
    fn set_repo_private(&self, repo: &RepoName, private: bool) -> IndexResult<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO repositories (name, private) VALUES (?1, ?2)
                 ON CONFLICT (name) DO UPDATE SET private = excluded.private",
                params![repo.as_str(), i64::from(private)],
            )?;
            Ok(())
        })
    }

    fn repo_private(&self, repo: &RepoName) -> IndexResult<bool> {
        self.read(|c| {
            let private: Option<i64> = c
                .query_row(
                    "SELECT private FROM repositories WHERE name = ?1",
                    params![repo.as_str()],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(private.is_some_and(|p| p != 0))
        })
    }

    fn forget_repo(&self, repo: &RepoName) -> IndexResult<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM repositories WHERE name = ?1",
                params![repo.as_str()],
            )?;
            Ok(())
        })
    }
}
