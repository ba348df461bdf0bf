//! The deployment's signing secret, kept in the index so that every server process (and
//! `git xet server token create --index ...`) derives the same keys: a token minted by one
//! process is accepted by all, and they rotate the dedup key in step (it is derived from the
//! secret and the clock).

use tokio_postgres::Client;

use super::pool::wait;
use crate::IndexError;
use git_xet_io::time::now_secs;

type SecretResult<T> = Result<Result<T, IndexError>, tokio_postgres::Error>;

/// The secret if a server of the deployment created it; `None` before the first server start
/// (no table yet, or no row). Changes nothing: no migration, no insert.
pub(super) fn load_existing(client: &mut Client) -> SecretResult<Option<[u8; 32]>> {
    let row = match wait(client.query_opt(SELECT, &[])) {
        Ok(row) => row,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
            return Ok(Ok(None))
        }
        Err(e) => return Err(e),
    };
    Ok(row.map(|row| stored(row.get(0))).transpose())
}

/// Inserts `secret` unless a secret exists; returns the one stored. Concurrent first calls
/// agree: only one insert wins, and everyone reads the winner's row.
pub(super) fn install(client: &mut Client, secret: &[u8; 32]) -> SecretResult<[u8; 32]> {
    insert(client, secret, "DO NOTHING")?;
    let row = wait(client.query_one(SELECT, &[]))?;
    Ok(stored(row.get(0)))
}

/// Returns the secret, creating it if no process has yet (see [`install`]).
pub(super) fn load_or_create(client: &mut Client) -> SecretResult<[u8; 32]> {
    let mut fresh = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut fresh);
    install(client, &fresh)
}

/// Makes `secret` the deployment's, whatever was stored before.
pub(super) fn replace(client: &mut Client, secret: &[u8; 32]) -> Result<(), tokio_postgres::Error> {
    insert(client, secret, "DO UPDATE SET secret = EXCLUDED.secret")
}

const SELECT: &str = "SELECT secret FROM server_secret WHERE id = 1";

/// Writes the one row; `on_conflict` says what happens to a row that exists.
fn insert(
    client: &mut Client,
    secret: &[u8; 32],
    on_conflict: &'static str,
) -> Result<(), tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO server_secret (id, secret, created_at) VALUES (1, $1, $2)
         ON CONFLICT (id) {on_conflict}"
    );
    wait(client.execute(&sql, &[&secret.as_slice(), &(now_secs() as i64)]))?;
    Ok(())
}

/// The stored secret, which must be 32 bytes.
fn stored(bytes: Vec<u8>) -> Result<[u8; 32], IndexError> {
    bytes.as_slice().try_into().map_err(|_| {
        IndexError::Corrupt(format!(
            "server_secret holds {} bytes, expected 32",
            bytes.len()
        ))
    })
}
