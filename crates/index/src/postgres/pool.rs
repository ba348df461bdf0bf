//! Connections to PostgreSQL for synchronous callers.
//!
//! The `Index` trait is synchronous and runs on the server's blocking threads. The
//! connections' I/O tasks run on the process's runtime ([`git_xet_io::runtime`]); a caller waits
//! for its query with [`git_xet_io::runtime::wait`], which only waits on the client's channel to
//! that task. So this works from any thread: a blocking thread of the server's runtime,
//! a plain thread, or a worker thread at start-up (no "runtime within a runtime").

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, PoolError, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use super::error::connect_failure;
use crate::{BackendError, IndexError, IndexResult};

/// Connections of one process at most (PostgreSQL's own default limit is 100 for all
/// processes together); further calls wait for one to come back. Connections are opened when
/// calls overlap and kept for the next.
const MAX_CONNECTIONS: usize = 16;
/// Attempts of one transaction that PostgreSQL aborted to resolve a conflict (a deadlock
/// or serialization failure between processes), or whose connection was lost.
const ATTEMPTS: usize = 5;

/// deadpool-postgres's pool, used from synchronous callers: its futures run on the process's
/// runtime, the caller waits for them.
pub(super) struct Pool {
    config: tokio_postgres::Config,
    /// The URL without its password, for messages.
    shown_url: String,
    pool: deadpool_postgres::Pool,
    /// The process's runtime, which drives the connections.
    runtime: tokio::runtime::Handle,
}

impl Pool {
    pub fn new(url: &str) -> IndexResult<Pool> {
        let shown_url = redact(url);
        let unavailable = |what: &str, source: BackendError| IndexError::Unavailable {
            reason: format!("{shown_url}: {what}"),
            source: Some(source),
        };
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| unavailable("not a PostgreSQL URL", e.into()))?;
        config
            .application_name("git-xet server")
            .connect_timeout(Duration::from_secs(10))
            .keepalives_idle(Duration::from_secs(60));
        let runtime = git_xet_io::runtime::handle()
            .map_err(|e| unavailable("starting the async runtime", e.into()))?;
        // A connection whose server went away is replaced before it is handed out.
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = Manager::from_config(config.clone(), NoTls, manager_config);
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(MAX_CONNECTIONS)
            .build()
            .map_err(|e| IndexError::Internal {
                detail: format!("setting up the PostgreSQL pool for {shown_url}"),
                source: Some(Box::new(e)),
            })?;
        Ok(Pool {
            config,
            shown_url,
            pool,
            runtime,
        })
    }

    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// Opens a connection of its own, outside the pool (schema migration at start-up), its
    /// I/O task running on the process's runtime.
    pub fn connect(&self) -> IndexResult<Client> {
        let config = self.config.clone();
        let task = self.runtime.spawn(async move {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("PostgreSQL connection ended: {e}");
                }
            });
            Ok::<_, tokio_postgres::Error>(client)
        });
        match wait(task) {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(connect_failure(e, &self.shown_url)),
            Err(e) => Err(IndexError::Internal {
                detail: format!("connecting to PostgreSQL {}", self.shown_url),
                source: Some(Box::new(e)),
            }),
        }
    }

    /// A pooled connection, once fewer than `MAX_CONNECTIONS` are out.
    fn take(&self) -> IndexResult<Object> {
        let pool = self.pool.clone();
        // On the runtime: a new connection's I/O task is spawned there.
        let task = self.runtime.spawn(async move { pool.get().await });
        match wait(task) {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(PoolError::Backend(e))) => Err(connect_failure(e, &self.shown_url)),
            Ok(Err(e)) => Err(IndexError::Internal {
                detail: format!("a connection to PostgreSQL {}", self.shown_url),
                source: Some(Box::new(e)),
            }),
            Err(e) => Err(IndexError::Internal {
                detail: format!("connecting to PostgreSQL {}", self.shown_url),
                source: Some(Box::new(e)),
            }),
        }
    }

    /// Runs `f` (which blocks on its queries) on a pooled connection, again on a fresh
    /// connection when the attempt failed for a reason a new attempt can fix.
    pub fn run<T>(
        &self,
        mut f: impl FnMut(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> IndexResult<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut client = self.take()?;
            let result = f(&mut client);
            if client.is_closed() {
                // Not kept: the next attempt gets a new connection.
                let _ = Object::take(client);
            } else {
                drop(client);
            }
            match result {
                Ok(v) => return Ok(v),
                Err(e) if attempt < ATTEMPTS && is_transient(&e) => {
                    tracing::debug!(attempt, "PostgreSQL index: retrying after {e}");
                    std::thread::sleep(Duration::from_millis(10 * attempt as u64));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Blocks the calling thread on a query future (see the module comment).
pub(super) fn wait<F: std::future::Future>(future: F) -> F::Output {
    git_xet_io::runtime::wait(future)
}

/// A conflict PostgreSQL resolved by aborting this transaction, or a lost connection:
/// the whole transaction can be tried again.
fn is_transient(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || matches!(
            e.code(),
            Some(&SqlState::T_R_DEADLOCK_DETECTED) | Some(&SqlState::T_R_SERIALIZATION_FAILURE)
        )
}

/// The URL with any password replaced, for messages and logs.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{userinfo}@{host}{tail}")
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://xet:s3cret@db:5432/xet?sslmode=disable"),
            "postgres://xet:***@db:5432/xet?sslmode=disable"
        );
        assert_eq!(redact("postgres://xet@db/xet"), "postgres://xet@db/xet");
        assert_eq!(redact("postgresql://db/xet"), "postgresql://db/xet");
    }
}
