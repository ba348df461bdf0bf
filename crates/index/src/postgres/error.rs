//! PostgreSQL's errors as [`IndexError`]s: the one place that reads SQLSTATEs and
//! connection failures.

use tokio_postgres::error::SqlState;

use crate::IndexError;

impl From<tokio_postgres::Error> for IndexError {
    fn from(e: tokio_postgres::Error) -> Self {
        if is_unavailable(&e) {
            return IndexError::Unavailable {
                reason: "lost the connection to PostgreSQL (it stopped, restarted or dropped \
                         the connection); check that it runs"
                    .into(),
                source: Some(Box::new(e)),
            };
        }
        let Some(code) = e.code().cloned() else {
            return IndexError::Internal {
                detail: "PostgreSQL index query".into(),
                source: Some(Box::new(e)),
            };
        };
        let source = Box::new(e);
        match code {
            SqlState::DISK_FULL => IndexError::DiskFull { source },
            // Class 53, the rest: memory, connection slots, configured limits.
            c if c.code().starts_with("53") => IndexError::Unavailable {
                reason: "PostgreSQL is out of resources (memory, connection slots)".into(),
                source: Some(source),
            },
            // Conflicts still unresolved after `Pool::run`'s attempts, or a lock not granted.
            SqlState::T_R_DEADLOCK_DETECTED
            | SqlState::T_R_SERIALIZATION_FAILURE
            | SqlState::LOCK_NOT_AVAILABLE => IndexError::Busy { source },
            SqlState::DATA_CORRUPTED | SqlState::INDEX_CORRUPTED => IndexError::Damaged { source },
            _ => IndexError::Internal {
                detail: "PostgreSQL index query".into(),
                source: Some(source),
            },
        }
    }
}

/// A connection that could not be opened: why, and what to do, decided by SQLSTATE or by the
/// I/O error under it. `url` is shown without its password.
pub(super) fn connect_failure(e: tokio_postgres::Error, url: &str) -> IndexError {
    let what = if let Some(db) = e.as_db_error() {
        let code = db.code();
        if code.code().starts_with("28") {
            "PostgreSQL refused the connection: check the user and password of the URL and \
             pg_hba.conf"
        } else if code == &SqlState::INVALID_CATALOG_NAME {
            "PostgreSQL has no such database: create the database (createdb -O USER DB) or fix \
             its name in the URL"
        } else if code == &SqlState::TOO_MANY_CONNECTIONS {
            "PostgreSQL has no connection slot left: raise max_connections or run fewer \
             processes"
        } else {
            "PostgreSQL refused the connection: see PostgreSQL's log"
        }
    } else if has_io_cause(&e) {
        "cannot reach PostgreSQL: check the host and port of the URL, and that PostgreSQL \
         runs there and accepts connections (listen_addresses, pg_hba.conf)"
    } else {
        "cannot connect to PostgreSQL"
    };
    IndexError::Unavailable {
        reason: format!("{url}: {what}"),
        source: Some(Box::new(e)),
    }
}

fn has_io_cause(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if err.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        source = err.source();
    }
    false
}

/// The database cannot be reached now (connection lost, server shutting down or starting):
/// another try later may succeed.
fn is_unavailable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    let Some(code) = e.code() else {
        // No SQLSTATE: an I/O error on the connection.
        return has_io_cause(e);
    };
    // Class 08: connection exception; 57P01-57P03: shutdown, crash, starting up.
    code.code().starts_with("08")
        || matches!(
            code,
            &SqlState::ADMIN_SHUTDOWN | &SqlState::CRASH_SHUTDOWN | &SqlState::CANNOT_CONNECT_NOW
        )
}
