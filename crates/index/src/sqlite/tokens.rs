//! Token records in SQLite.

use rusqlite::{params, OptionalExtension};

use super::SqliteIndex;
use crate::{IndexResult, TokenIndex, TokenRecord};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    user_name TEXT NOT NULL,
    repo TEXT NOT NULL,
    scope TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
";

fn record(r: &rusqlite::Row) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord {
        id: r.get(0)?,
        user: r.get(1)?,
        repo: r.get(2)?,
        scope: r.get(3)?,
        created: r.get::<_, i64>(4)? as u64,
        expires: r.get::<_, i64>(5)? as u64,
        revoked: r.get::<_, i64>(6)? != 0,
    })
}

impl TokenIndex for SqliteIndex {
    fn record_token(&self, t: &TokenRecord) -> IndexResult<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO tokens (id, user_name, repo, scope, created_at, expires_at, revoked)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    t.id,
                    t.user,
                    t.repo,
                    t.scope,
                    t.created as i64,
                    t.expires as i64,
                    i64::from(t.revoked)
                ],
            )?;
            Ok(())
        })
    }

    fn tokens(&self) -> IndexResult<Vec<TokenRecord>> {
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT id, user_name, repo, scope, created_at, expires_at, revoked FROM tokens
                 ORDER BY created_at, id",
            )?;
            let rows = stmt.query_map([], record)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    fn revoke_token(&self, id: &str) -> IndexResult<bool> {
        self.write(|tx| Ok(tx.execute("UPDATE tokens SET revoked = 1 WHERE id = ?1", [id])? == 1))
    }

    fn token_revoked(&self, id: &str) -> IndexResult<bool> {
        self.read(|c| {
            let revoked: Option<i64> = c
                .prepare_cached("SELECT revoked FROM tokens WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?;
            Ok(revoked.is_some_and(|r| r != 0))
        })
    }
}
