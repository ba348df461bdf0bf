//! The PostgreSQL schema, created and upgraded by numbered migrations at start.
//!
//! Several server processes (and admin commands) may start at once against one database:
//! migrations run under a session advisory lock, so one process applies them and the others
//! then find them applied. Each migration and its `schema_migrations` row commit together.
//! A topic that adds tables (gc, locks, tokens) appends a migration; applied ones never change.

use tokio_postgres::Client;

use super::pool::wait;
use crate::{IndexError, IndexResult};
use git_xet_io::time::now_secs;

/// Advisory lock key held while migrating ("git-xet" in ASCII, as a number).
const MIGRATION_LOCK: i64 = 0x0067_6974_2d78_6574;

/// (version, SQL). Versions are increasing; append only.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
    (1, V1_CORE),
    (2, super::gc::MIGRATION),
    (3, super::verify::MIGRATION),
    (4, super::locks::MIGRATION),
    (5, super::tokens::MIGRATION),
    (6, super::scope::MIGRATION),
    (7, super::scope::FILE_RECORDS_MIGRATION),
    (8, super::repos::MIGRATION),
];

/// Xorbs, chunk locations, files, per-repository files, first chunks, shards (as in the
/// SQLite index), and the deployment's one signing secret.
const V1_CORE: &str = "
CREATE TABLE xorbs (
    id BIGSERIAL PRIMARY KEY,
    hash BYTEA NOT NULL UNIQUE,
    stored_len BIGINT NOT NULL,
    unpacked_len BIGINT NOT NULL,
    num_chunks BIGINT NOT NULL,
    chunk_hashes BYTEA NOT NULL,
    chunk_ends BYTEA NOT NULL,
    unpacked_ends BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE chunks (
    key BIGINT PRIMARY KEY,
    xorb_id BIGINT NOT NULL REFERENCES xorbs (id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL
);
CREATE INDEX chunks_by_xorb ON chunks (xorb_id);
CREATE TABLE files (
    hash BYTEA PRIMARY KEY,
    size BIGINT NOT NULL,
    sha256 BYTEA NOT NULL,
    terms BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX files_by_sha256 ON files (sha256);
CREATE TABLE repo_files (
    repo TEXT NOT NULL,
    file_hash BYTEA NOT NULL,
    sha256 BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (repo, file_hash)
);
CREATE INDEX repo_files_by_sha256 ON repo_files (repo, sha256);
CREATE TABLE first_chunks (
    chunk_hash BYTEA NOT NULL,
    file_hash BYTEA NOT NULL,
    PRIMARY KEY (chunk_hash, file_hash)
);
CREATE TABLE shards (
    hash BYTEA PRIMARY KEY,
    repo TEXT NOT NULL,
    len BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE server_secret (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    secret BYTEA NOT NULL CHECK (length(secret) = 32),
    created_at BIGINT NOT NULL
);
";

/// Brings the schema up to date. `client` is a connection of its own: the advisory lock
/// belongs to its session (and is released if the process dies holding it).
pub(super) fn migrate(client: &mut Client) -> IndexResult<()> {
    wait(client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]))?;
    let result = apply(client);
    let unlocked = wait(client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]));
    result?;
    unlocked?;
    Ok(())
}

fn apply(client: &mut Client) -> IndexResult<()> {
    wait(client.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at BIGINT NOT NULL
        )",
    ))?;
    let row = wait(client.query_one(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        &[],
    ))?;
    let current: i32 = row.get(0);
    let latest = MIGRATIONS.last().map_or(0, |m| m.0);
    if current > latest {
        return Err(IndexError::SchemaTooNew {
            found: current.into(),
            known: latest.into(),
        });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        let tx = wait(client.transaction())?;
        wait(tx.batch_execute(sql))?;
        wait(tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[version, &(now_secs() as i64)],
        ))?;
        wait(tx.commit())?;
        tracing::info!(version, "PostgreSQL index: applied schema migration");
    }
    Ok(())
}
