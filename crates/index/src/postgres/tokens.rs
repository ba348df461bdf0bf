//! Token records on PostgreSQL.

use super::pool::wait;
use super::PgIndex;
use crate::{IndexResult, TokenIndex, TokenRecord};

pub(super) const MIGRATION: &str = "
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    user_name TEXT NOT NULL,
    repo TEXT NOT NULL,
    scope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked BOOLEAN NOT NULL DEFAULT FALSE
);
";

fn record(r: &tokio_postgres::Row) -> TokenRecord {
    TokenRecord {
        id: r.get(0),
        user: r.get(1),
        repo: r.get(2),
        scope: r.get(3),
        created: r.get::<_, i64>(4) as u64,
        expires: r.get::<_, i64>(5) as u64,
        revoked: r.get(6),
    }
}

impl TokenIndex for PgIndex {
    fn record_token(&self, t: &TokenRecord) -> IndexResult<()> {
        // A second record with the same id violates the primary key: an error, as on SQLite.
        self.pool.run(|c| {
            wait(c.execute(
                "INSERT INTO tokens (id, user_name, repo, scope, created_at, expires_at, revoked)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &t.id,
                    &t.user,
                    &t.repo,
                    &t.scope,
                    &(t.created as i64),
                    &(t.expires as i64),
                    &t.revoked,
                ],
            ))
        })?;
        Ok(())
    }

    fn tokens(&self) -> IndexResult<Vec<TokenRecord>> {
        let rows = self.pool.run(|c| {
            wait(c.query(
                "SELECT id, user_name, repo, scope, created_at, expires_at, revoked FROM tokens
                 ORDER BY created_at, id",
                &[],
            ))
        })?;
        Ok(rows.iter().map(record).collect())
    }

    fn revoke_token(&self, id: &str) -> IndexResult<bool> {
        let n = self
            .pool
            .run(|c| wait(c.execute("UPDATE tokens SET revoked = TRUE WHERE id = $1", &[&id])))?;
        Ok(n == 1)
    }

    fn token_revoked(&self, id: &str) -> IndexResult<bool> {
        let row = self
            .pool
            .run(|c| wait(c.query_opt("SELECT revoked FROM tokens WHERE id = $1", &[&id])))?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }
}
