//! File locks on PostgreSQL.

use tokio_postgres::Client;

use super::pool::wait;
use super::{PgIndex, PgResult};
use crate::repo_name::RepoName;
use crate::{IndexResult, Lock, LockIndex, LockOutcome, LockPage, LockQuery};

pub(super) const MIGRATION: &str = "
CREATE TABLE locks (
    repo TEXT NOT NULL,
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    owner TEXT NOT NULL,
    locked_at BIGINT NOT NULL,
    PRIMARY KEY (repo, id),
    UNIQUE (repo, path)
);
";

const COLUMNS: &str = "id, path, owner, locked_at";

fn lock(r: &tokio_postgres::Row) -> Lock {
    Lock {
        id: r.get(0),
        path: r.get(1),
        owner: r.get(2),
        locked_at: r.get::<_, i64>(3) as u64,
    }
}

/// One attempt: the insert, or the lock that holds the path. `None` when the holder was
/// unlocked between the two statements (the caller tries again).
fn create_once(
    c: &mut Client,
    repo: &RepoName,
    path: &str,
    owner: &str,
    id: &str,
    now: u64,
) -> PgResult<Option<LockOutcome>> {
    // Another process may lock the path at the same moment: the UNIQUE (repo, path)
    // constraint decides, and the loser reads the winner's lock. (SQLite needs no such
    // step: its one writer looks up and inserts without anyone in between.)
    let inserted = wait(c.query_opt(
        &format!(
            "INSERT INTO locks (repo, id, path, owner, locked_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (repo, path) DO NOTHING RETURNING {COLUMNS}"
        ),
        &[&repo.as_str(), &id, &path, &owner, &(now as i64)],
    ))?;
    if let Some(row) = inserted {
        return Ok(Some(LockOutcome::Created(lock(&row))));
    }
    let existing = wait(c.query_opt(
        &format!("SELECT {COLUMNS} FROM locks WHERE repo = $1 AND path = $2"),
        &[&repo.as_str(), &path],
    ))?;
    Ok(existing.map(|r| LockOutcome::Exists(lock(&r))))
}

impl LockIndex for PgIndex {
    fn create_lock(
        &self,
        repo: &RepoName,
        path: &str,
        owner: &str,
        id: &str,
        now: u64,
    ) -> IndexResult<LockOutcome> {
        loop {
            if let Some(outcome) = self
                .pool
                .run(|c| create_once(c, repo, path, owner, id, now))?
            {
                return Ok(outcome);
            }
        }
    }

    fn count_locks(&self, repo: &RepoName) -> IndexResult<u64> {
        let row = self.pool.run(|c| {
            wait(c.query_one(
                "SELECT COUNT(*) FROM locks WHERE repo = $1",
                &[&repo.as_str()],
            ))
        })?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn locks(&self, repo: &RepoName, q: &LockQuery) -> IndexResult<LockPage> {
        // One more than asked for tells whether there is a next page. Ids compare bytewise (as
        // on SQLite), whatever the database's collation.
        let limit = q.limit.saturating_add(1).min(i64::MAX as usize) as i64;
        let rows = self.pool.run(|c| {
            wait(c.query(
                &format!(
                    r#"SELECT {COLUMNS} FROM locks WHERE repo = $1
                       AND ($2::TEXT IS NULL OR path = $2) AND ($3::TEXT IS NULL OR id = $3)
                       AND ($4::TEXT IS NULL OR id COLLATE "C" >= $4)
                     ORDER BY id COLLATE "C" LIMIT $5"#
                ),
                &[&repo.as_str(), &q.path, &q.id, &q.cursor, &limit],
            ))
        })?;
        let mut locks: Vec<Lock> = rows.iter().map(lock).collect();
        let next_cursor = if locks.len() > q.limit {
            locks.pop().map(|l| l.id)
        } else {
            None
        };
        Ok(LockPage { locks, next_cursor })
    }

    fn delete_lock(&self, repo: &RepoName, id: &str) -> IndexResult<Option<Lock>> {
        let row = self.pool.run(|c| {
            wait(c.query_opt(
                &format!("DELETE FROM locks WHERE repo = $1 AND id = $2 RETURNING {COLUMNS}"),
                &[&repo.as_str(), &id],
            ))
        })?;
        Ok(row.as_ref().map(lock))
    }
}
