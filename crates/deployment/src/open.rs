//! Where a server's shared state lives, and opening it: the object store (xorbs, shards),
//! the index (registrations, tokens, keys, locks) and the signing secret.
//!
//! The embedded default keeps everything under one data directory (`objects` as files,
//! the index in SQLite, the secret in `keys/secret`). A deployment that outgrows one machine
//! points `--object-store` at S3-compatible storage and `--index` at PostgreSQL; the server
//! processes then hold no state of their own, and the admin commands (`token`, `gc`, `check`,
//! `repo delete`) act on the same deployment through the same options.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use git_xet_identity::keys::Keys;
use git_xet_index::{Index, IndexError, PgIndex, SqliteIndex};
use git_xet_storage::{FsStore, ObjectStore, S3ProbeError, S3Store};

/// Where xorbs and shards are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A local directory (`xorbs/`, `shards/`); staging files go to the data directory's `tmp/`,
    /// which must be on the same filesystem.
    Dir(PathBuf),
    /// An S3-compatible bucket, with an optional key prefix (no leading or trailing `/`).
    S3 { bucket: String, prefix: String },
}

/// Where the index lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexLocation {
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` connection URL.
    Postgres(String),
}

#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error("--object-store {0}: expected a directory or s3://BUCKET[/PREFIX]")]
    BadStoreLocation(String),
    #[error("--index {0}: expected sqlite:PATH or postgres://USER@HOST/DB")]
    BadIndexLocation(String),
    #[error("{what} is not supported by this build yet")]
    Unsupported { what: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The S3 object store failed its check at open (bucket, credentials, endpoint).
    #[error(transparent)]
    ObjectStore(#[from] S3ProbeError),
}

fn io_context(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DeploymentError {
    let context = context.into();
    move |source| DeploymentError::Io { context, source }
}

impl StoreLocation {
    /// `s3://BUCKET[/PREFIX]`, or a directory path (`file://` optional).
    pub fn parse(text: &str) -> Result<StoreLocation, DeploymentError> {
        let bad = || DeploymentError::BadStoreLocation(text.to_string());
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad());
            }
            return Ok(StoreLocation::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        let path = text.strip_prefix("file://").unwrap_or(text);
        if path.is_empty() || path.contains("://") {
            return Err(bad());
        }
        Ok(StoreLocation::Dir(PathBuf::from(path)))
    }
}

impl IndexLocation {
    /// `sqlite:PATH` or a `postgres://` / `postgresql://` URL.
    pub fn parse(text: &str) -> Result<IndexLocation, DeploymentError> {
        if let Some(path) = text.strip_prefix("sqlite:") {
            if !path.is_empty() {
                return Ok(IndexLocation::Sqlite(PathBuf::from(path)));
            }
        } else if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(IndexLocation::Postgres(text.to_string()));
        }
        Err(DeploymentError::BadIndexLocation(text.to_string()))
    }

    /// Whether the URL carries a password (in its user part or a `password=` parameter),
    /// which must not be written where others read it (a command line, authorized_keys).
    /// A URL PostgreSQL's client cannot parse is refused rather than guessed at.
    pub fn holds_password(&self) -> Result<bool, DeploymentError> {
        match self {
            IndexLocation::Sqlite(_) => Ok(false),
            IndexLocation::Postgres(url) => PgIndex::url_holds_password(url)
                .ok_or_else(|| DeploymentError::BadIndexLocation(url.clone())),
        }
    }
}

/// Where a deployment's parts are; the defaults put everything under `data_dir`.
#[derive(Debug, Clone)]
pub struct DeploymentConfig {
    /// Local working space of this process (staging files, and everything of the embedded
    /// default).
    pub data_dir: PathBuf,
    pub object_store: StoreLocation,
    /// The store being moved away from, read for what `object_store` lacks (`storage
    /// migrate`'s switch-over, git-xet-storage's fallback.rs); never written.
    pub object_store_fallback: Option<StoreLocation>,
    pub index: IndexLocation,
}

impl DeploymentConfig {
    /// The embedded default: everything under `data_dir`.
    pub fn embedded(data_dir: &Path) -> DeploymentConfig {
        DeploymentConfig {
            data_dir: data_dir.to_path_buf(),
            object_store: StoreLocation::Dir(data_dir.to_path_buf()),
            object_store_fallback: None,
            index: IndexLocation::Sqlite(data_dir.join("index.sqlite")),
        }
    }

    pub fn tmp_dir(&self) -> PathBuf {
        self.data_dir.join("tmp")
    }
}

/// An opened deployment.
pub struct Deployment {
    pub store: Arc<dyn ObjectStore>,
    pub index: Arc<dyn Index>,
    pub keys: Keys,
}

/// The object store between the remote check and local creation.
enum StoreToOpen<'a> {
    /// A remote store, already reached once.
    Checked(Box<S3Store>),
    /// A directory, created only after every remote engine answered.
    Local(&'a Path),
}

/// Opens (creating what is missing) the deployment's store, index and secret. Staging files
/// go to `staging`, a directory of the caller's on the data directory's filesystem. Without
/// `fsync` a power loss may lose recent writes (tests and benchmarks only).
pub fn open(
    config: &DeploymentConfig,
    staging: &Path,
    fsync: bool,
) -> Result<Deployment, DeploymentError> {
    let data = &config.data_dir;
    std::fs::create_dir_all(data).map_err(io_context(format!(
        "creating data directory {}",
        data.display()
    )))?;
    // The remote engines are checked before anything is created locally, so that a start
    // refused for a missing bucket or an unreachable database leaves nothing behind.
    let store = match &config.object_store {
        StoreLocation::Dir(root) => StoreToOpen::Local(root),
        StoreLocation::S3 { bucket, prefix } => {
            let store = S3Store::open(bucket, prefix, staging).map_err(io_context(format!(
                "configuring S3 object storage s3://{bucket}"
            )))?;
            store.check()?;
            StoreToOpen::Checked(Box::new(store))
        }
    };
    let (index, keys): (Arc<dyn Index>, Keys) = match &config.index {
        IndexLocation::Sqlite(path) => (
            Arc::new(SqliteIndex::open(path, fsync)?),
            Keys::load_or_create(data).map_err(io_context("loading the server secret"))?,
        ),
        // Every process sharing the index must sign and verify with the same keys.
        IndexLocation::Postgres(url) => {
            let index = PgIndex::open(url)?;
            let keys = Keys::from_secret(&index.shared_secret()?);
            (Arc::new(index), keys)
        }
    };
    let store: Arc<dyn ObjectStore> = match store {
        StoreToOpen::Checked(s3) => Arc::new(*s3),
        StoreToOpen::Local(root) => Arc::new(FsStore::open(root, staging, fsync).map_err(
            io_context(format!("opening object storage in {}", root.display())),
        )?),
    };
    let store = match &config.object_store_fallback {
        Some(old) => Arc::new(git_xet_storage::FallbackStore::new(
            store,
            open_store(old, staging, fsync)?,
        )),
        None => store,
    };
    Ok(Deployment { store, index, keys })
}

/// An object store alone (for `storage migrate`), checked like [`open`] checks it. A
/// directory store stages in `staging`, which must be on its filesystem.
pub fn open_store(
    location: &StoreLocation,
    staging: &Path,
    fsync: bool,
) -> Result<Arc<dyn ObjectStore>, DeploymentError> {
    Ok(match location {
        StoreLocation::Dir(root) => Arc::new(FsStore::open(root, staging, fsync).map_err(
            io_context(format!("opening object storage in {}", root.display())),
        )?),
        StoreLocation::S3 { bucket, prefix } => {
            let store = S3Store::open(bucket, prefix, staging).map_err(io_context(format!(
                "configuring S3 object storage s3://{bucket}"
            )))?;
            store.check()?;
            Arc::new(store)
        }
    })
}

/// The deployment's keys alone (for `token create`): from the data directory's secret
/// (created there only with `create`), or from the PostgreSQL index's shared secret.
pub fn open_keys(config: &DeploymentConfig, create: bool) -> Result<Keys, KeysError> {
    match &config.index {
        IndexLocation::Sqlite(_) => {
            let data = &config.data_dir;
            let loaded = if create {
                std::fs::create_dir_all(data).and_then(|()| Keys::load_or_create(data))
            } else {
                Keys::load(data)
            };
            loaded.map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => KeysError::NoSecret {
                    data_dir: data.clone(),
                },
                _ => KeysError::Io {
                    data_dir: data.clone(),
                    source,
                },
            })
        }
        IndexLocation::Postgres(url) => {
            let index = PgIndex::open(url)?;
            Ok(Keys::from_secret(&index.shared_secret()?))
        }
    }
}

/// The deployment's index alone (for `user add`, which records a key's token): SQLite only
/// where the data directory has the secret (a mistyped path must not get an index of its
/// own), or the PostgreSQL index.
pub fn open_index(config: &DeploymentConfig) -> Result<Arc<dyn Index>, KeysError> {
    match &config.index {
        IndexLocation::Sqlite(path) => {
            open_keys(config, false)?;
            Ok(Arc::new(SqliteIndex::open(path, true)?))
        }
        IndexLocation::Postgres(url) => Ok(Arc::new(PgIndex::open(url)?)),
    }
}

/// The deployment's keys for a process that must change nothing (the ssh shell): as
/// [`open_keys`] without `create`, and on PostgreSQL without opening (migrating) the index.
pub fn read_keys(config: &DeploymentConfig) -> Result<Keys, KeysError> {
    match &config.index {
        IndexLocation::Sqlite(_) => open_keys(config, false),
        IndexLocation::Postgres(url) => match PgIndex::existing_secret(url)? {
            Some(secret) => Ok(Keys::from_secret(&secret)),
            None => Err(KeysError::NoSharedSecret),
        },
    }
}

/// Whether the token `id` is revoked, for a process that must change nothing (the ssh
/// shell): read from the index without creating or upgrading it.
pub fn token_revoked(config: &DeploymentConfig, id: &str) -> Result<bool, KeysError> {
    Ok(match &config.index {
        IndexLocation::Sqlite(path) => SqliteIndex::token_revoked_read_only(path, id)?,
        IndexLocation::Postgres(url) => PgIndex::existing_token_revoked(url, id)?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(
        "the PostgreSQL index has no server secret yet: start `git xet server --index ...` \
         once (it creates the secret every process of the deployment shares)"
    )]
    NoSharedSecret,
    #[error(
        "{} has no server secret ({} is missing): pass the data directory the server uses \
         (--data or GIT_XET_SERVER_DATA) or its --index, start the server once, or pass \
         --init to create a new secret there",
        data_dir.display(),
        git_xet_identity::keys::secret_path(data_dir).display()
    )]
    NoSecret { data_dir: PathBuf },
    #[error("loading the server secret in {}: {source}", data_dir.display())]
    Io {
        data_dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_locations() {
        assert_eq!(
            StoreLocation::parse("s3://models/xet/").unwrap(),
            StoreLocation::S3 {
                bucket: "models".into(),
                prefix: "xet".into()
            }
        );
        assert_eq!(
            StoreLocation::parse("s3://models").unwrap(),
            StoreLocation::S3 {
                bucket: "models".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            StoreLocation::parse("/srv/xet").unwrap(),
            StoreLocation::Dir("/srv/xet".into())
        );
        for bad in ["s3://", "", "gs://bucket", "file://"] {
            assert!(
                matches!(
                    StoreLocation::parse(bad),
                    Err(DeploymentError::BadStoreLocation(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn index_locations() {
        assert_eq!(
            IndexLocation::parse("sqlite:/srv/index.sqlite").unwrap(),
            IndexLocation::Sqlite("/srv/index.sqlite".into())
        );
        assert!(matches!(
            IndexLocation::parse("postgres://xet@db/xet").unwrap(),
            IndexLocation::Postgres(_)
        ));
        for (url, password) in [
            ("postgres://xet@db/xet", false),
            ("postgresql://xet@%2Frun%2Fpostgresql/xet", false),
            ("postgres://xet:s3cret@db/xet", true),
            ("postgres://xet@db/xet?password=s3cret", true),
        ] {
            let index = IndexLocation::parse(url).unwrap();
            assert_eq!(index.holds_password().unwrap(), password, "{url}");
        }
        assert!(IndexLocation::parse("postgres://db:notaport/x")
            .unwrap()
            .holds_password()
            .is_err());
        for bad in ["sqlite:", "mysql://db", "/srv/index.sqlite"] {
            assert!(
                matches!(
                    IndexLocation::parse(bad),
                    Err(DeploymentError::BadIndexLocation(_))
                ),
                "{bad}"
            );
        }
    }
}
