//! The deployment's signing secret, kept in the index so that every server process (and
//! `git xet server token create --index ...`) derives the same keys: a token minted by one
//! process is accepted by all, and they rotate the dedup key in step (it is derived from the
//! secret and the clock).

use tokio_postgres::Client;

use super::pool::wait;
use crate::auth::now_secs;

/// The secret if a server of the deployment created it; `None` before the first server start
/// (no table yet, or no row). Changes nothing: no migration, no insert.
pub(super) fn load_existing(
    client: &mut Client,
) -> Result<Result<Option<[u8; 32]>, crate::index::IndexError>, tokio_postgres::Error> {
    let row = match wait(client.query_opt("SELECT secret FROM server_secret WHERE id = 1", &[])) {
        Ok(row) => row,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
            return Ok(Ok(None))
        }
        Err(e) => return Err(e),
    };
    let Some(row) = row else {
        return Ok(Ok(None));
    };
    let stored: Vec<u8> = row.get(0);
    Ok(stored.as_slice().try_into().map(Some).map_err(|_| {
        crate::index::IndexError::Corrupt(format!(
            "server_secret holds {} bytes, expected 32",
            stored.len()
        ))
    }))
}

/// Inserts `secret` unless a secret exists; returns the one stored.
pub(super) fn install(
    client: &mut Client,
    secret: &[u8; 32],
) -> Result<Result<[u8; 32], crate::index::IndexError>, tokio_postgres::Error> {
    wait(client.execute(
        "INSERT INTO server_secret (id, secret, created_at) VALUES (1, $1, $2)
         ON CONFLICT (id) DO NOTHING",
        &[&secret.as_slice(), &(now_secs() as i64)],
    ))?;
    let row = wait(client.query_one("SELECT secret FROM server_secret WHERE id = 1", &[]))?;
    let stored: Vec<u8> = row.get(0);
    Ok(stored.as_slice().try_into().map_err(|_| {
        crate::index::IndexError::Corrupt(format!(
            "server_secret holds {} bytes, expected 32",
            stored.len()
        ))
    }))
}

/// Returns the secret, creating it if no process has yet. Concurrent first calls agree:
/// only one insert wins, and everyone reads the winner's row.
pub(super) fn load_or_create(
    client: &mut Client,
) -> Result<Result<[u8; 32], crate::index::IndexError>, tokio_postgres::Error> {
    let mut fresh = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut fresh);
    wait(client.execute(
        "INSERT INTO server_secret (id, secret, created_at) VALUES (1, $1, $2)
         ON CONFLICT (id) DO NOTHING",
        &[&fresh.as_slice(), &(now_secs() as i64)],
    ))?;
    let row = wait(client.query_one("SELECT secret FROM server_secret WHERE id = 1", &[]))?;
    let stored: Vec<u8> = row.get(0);
    Ok(stored.as_slice().try_into().map_err(|_| {
        crate::index::IndexError::Corrupt(format!(
            "server_secret holds {} bytes, expected 32",
            stored.len()
        ))
    }))
}
