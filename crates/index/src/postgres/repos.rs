//! Repository records on PostgreSQL.

use super::pool::wait;
use super::PgIndex;
use crate::repo_name::RepoName;
use crate::{IndexResult, RepoIndex};

pub(super) const MIGRATION: &str = "
CREATE TABLE repositories (
    name TEXT PRIMARY KEY,
    private BOOLEAN NOT NULL DEFAULT FALSE
);
";

impl RepoIndex for PgIndex {
    fn set_repo_private(&self, repo: &RepoName, private: bool) -> IndexResult<()> {
        self.pool.run(|c| {
            wait(c.execute(
                "INSERT INTO repositories (name, private) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET private = EXCLUDED.private",
                &[&repo.as_str(), &private],
            ))
        })?;
        Ok(())
    }

    fn repo_private(&self, repo: &RepoName) -> IndexResult<bool> {
        let row = self.pool.run(|c| {
            wait(c.query_opt(
                "SELECT private FROM repositories WHERE name = $1",
                &[&repo.as_str()],
            ))
        })?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    fn forget_repo(&self, repo: &RepoName) -> IndexResult<()> {
        self.pool.run(|c| {
            wait(c.execute(
                "DELETE FROM repositories WHERE name = $1",
                &[&repo.as_str()],
            ))
        })?;
        Ok(())
    }
}
