//! File locks in SQLite.

use rusqlite::{params, OptionalExtension};

use super::SqliteIndex;
use crate::repo_name::RepoName;
use crate::{IndexResult, Lock, LockIndex, LockOutcome, LockPage, LockQuery};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS locks (
    repo TEXT NOT NULL,
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    owner TEXT NOT NULL,
    locked_at INTEGER NOT NULL,
    PRIMARY KEY (repo, id),
    UNIQUE (repo, path)
);
";

const COLUMNS: &str = "id, path, owner, locked_at";

fn lock(r: &rusqlite::Row) -> rusqlite::Result<Lock> {
    Ok(Lock {
        id: r.get(0)?,
        path: r.get(1)?,
        owner: r.get(2)?,
        locked_at: r.get::<_, i64>(3)? as u64,
    })
}

fn by_path(
    c: &rusqlite::Connection,
    repo: &RepoName,
    path: &str,
) -> rusqlite::Result<Option<Lock>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM locks WHERE repo = ?1 AND path = ?2"),
        params![repo.as_str(), path],
        lock,
    )
    .optional()
}

impl LockIndex for SqliteIndex {
    fn create_lock(
        &self,
        repo: &RepoName,
        path: &str,
        owner: &str,
        id: &str,
        now: u64,
    ) -> IndexResult<LockOutcome> {
        self.write(|tx| {
            // One writer at a time (an immediate transaction): nothing locks the path between
            // the look-up and the insert. The UNIQUE constraint holds regardless.
            if let Some(existing) = by_path(tx, repo, path)? {
                return Ok(LockOutcome::Exists(existing));
            }
            tx.execute(
                "INSERT INTO locks (repo, id, path, owner, locked_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![repo.as_str(), id, path, owner, now as i64],
            )?;
            Ok(LockOutcome::Created(Lock {
                id: id.to_string(),
                path: path.to_string(),
                owner: owner.to_string(),
                locked_at: now,
            }))
        })
    }

    fn locks(&self, repo: &RepoName, q: &LockQuery) -> IndexResult<LockPage> {
        self.read(|c| {
            // One more than asked for tells whether there is a next page.
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM locks WHERE repo = ?1
                   AND (?2 IS NULL OR path = ?2) AND (?3 IS NULL OR id = ?3)
                   AND (?4 IS NULL OR id >= ?4)
                 ORDER BY id LIMIT ?5"
            ))?;
            let rows = stmt.query_map(
                params![
                    repo.as_str(),
                    q.path,
                    q.id,
                    q.cursor,
                    q.limit.saturating_add(1) as i64
                ],
                lock,
            )?;
            let mut locks = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            let next_cursor = if locks.len() > q.limit {
                locks.pop().map(|l| l.id)
            } else {
                None
            };
            Ok(LockPage { locks, next_cursor })
        })
    }

    fn count_locks(&self, repo: &RepoName) -> IndexResult<u64> {
        self.read(|c| {
            let n: i64 = c
                .prepare_cached("SELECT COUNT(*) FROM locks WHERE repo = ?1")?
                .query_row([repo.as_str()], |r| r.get(0))?;
            Ok(n as u64)
        })
    }

    fn delete_lock(&self, repo: &RepoName, id: &str) -> IndexResult<Option<Lock>> {
        self.write(|tx| {
            let found = tx
                .query_row(
                    &format!("SELECT {COLUMNS} FROM locks WHERE repo = ?1 AND id = ?2"),
                    params![repo.as_str(), id],
                    lock,
                )
                .optional()?;
            if found.is_some() {
                tx.execute(
                    "DELETE FROM locks WHERE repo = ?1 AND id = ?2",
                    params![repo.as_str(), id],
                )?;
            }
            Ok(found)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> (tempfile::TempDir, SqliteIndex) {
        let dir = tempfile::tempdir().unwrap();
        let index = SqliteIndex::open(&dir.path().join("index.sqlite"), false).unwrap();
        (dir, index)
    }

    #[test]
    fn one_lock_per_path_and_repository() {
        let (_d, index) = index();
        let repo = RepoName::parse("org/m").unwrap();
        let other = RepoName::parse("org/n").unwrap();
        let LockOutcome::Created(a) = index.create_lock(&repo, "a.psd", "alice", "01", 5).unwrap()
        else {
            panic!("first lock not created");
        };
        let again = index.create_lock(&repo, "a.psd", "bob", "02", 6).unwrap();
        assert_eq!(again, LockOutcome::Exists(a.clone()));
        assert!(matches!(
            index.create_lock(&other, "a.psd", "bob", "02", 6).unwrap(),
            LockOutcome::Created(_)
        ));
        assert_eq!(index.delete_lock(&other, "01").unwrap(), None, "other repo");
        assert_eq!(index.delete_lock(&repo, "01").unwrap(), Some(a));
        assert_eq!(index.delete_lock(&repo, "01").unwrap(), None);
    }

    #[test]
    fn pages_follow_the_cursor_and_filters_apply() {
        let (_d, index) = index();
        let repo = RepoName::parse("org/m").unwrap();
        for i in 0..25 {
            let id = format!("{i:04}");
            index
                .create_lock(&repo, &format!("f{i}"), "u", &id, 1)
                .unwrap();
        }
        let mut query = LockQuery {
            limit: 10,
            ..Default::default()
        };
        let mut seen = Vec::new();
        loop {
            let page = index.locks(&repo, &query).unwrap();
            assert!(page.locks.len() <= 10);
            seen.extend(page.locks.into_iter().map(|l| l.id));
            match page.next_cursor {
                Some(c) => query.cursor = Some(c),
                None => break,
            }
        }
        let want: Vec<String> = (0..25).map(|i| format!("{i:04}")).collect();
        assert_eq!(seen, want);
        let by_path = LockQuery {
            path: Some("f7".into()),
            limit: 10,
            ..Default::default()
        };
        let page = index.locks(&repo, &by_path).unwrap();
        assert_eq!(page.locks.len(), 1);
        assert_eq!(page.locks[0].id, "0007");
        let by_id = LockQuery {
            id: Some("0003".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(index.locks(&repo, &by_id).unwrap().locks[0].path, "f3");
    }
}
