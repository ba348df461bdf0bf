//! `git xet server backup`, `restore` and `backup verify`: an online, consistent,
//! incremental copy of a whole deployment (index, objects, git repositories, secret) in a
//! directory or an S3 prefix, and its way back into an empty deployment.
//!
//! Layout of a destination:
//! - `objects/xorbs/ab/<hash>`, `objects/shards/ab/<hash>`: content-addressed and immutable,
//!   shared by every snapshot (a second backup copies only the keys not there yet);
//! - `snapshots/<time>/`: `index/<table>.jsonl` (a logical dump any index engine loads),
//!   `git/<repo>.bundle`, `secret` (unless excluded), and `manifest.json` written last (a
//!   snapshot without one is incomplete and ignored).
//!
//! Why a snapshot holds everything a client was told is stored: see docs/server-operations.md,
//! "Backup and restore".

mod dest;
mod git;
mod index_file;
mod objects;
mod restore;
mod run;
mod verify;

use std::collections::BTreeMap;

pub use dest::Dest;
pub use restore::{restore, RestoreOptions};
pub use run::{backup, BackupOptions, BackupReport};
pub use verify::{verify, VerifyReport};

use git_xet_index::IndexError;

/// The manifest's format; a restore refuses others.
pub const FORMAT: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{0}")]
    Git(String),
    #[error("{dest} holds no complete snapshot (no snapshots/*/manifest.json)")]
    NoSnapshot { dest: String },
    #[error("snapshot {0}: manifest.json is not a backup manifest of format {FORMAT}: {1}")]
    BadManifest(String, String),
    #[error(
        "object {key} that the index snapshot needs vanished from the object store during the \
         backup (a gc with a grace period shorter than the backup?); run the backup again"
    )]
    Vanished { key: String },
    #[error(
        "the target deployment is not empty ({what}): restore only into a new deployment \
         (fresh data directory, empty database and bucket prefix); nothing was changed"
    )]
    NotEmpty { what: String },
    #[error(
        "snapshot {0} does not include the signing secret (backed up with --exclude-secret): \
         pass --secret-file FILE with the deployment's 32-byte secret"
    )]
    NoSecret(String),
    #[error("{0}")]
    Damaged(String),
    #[error("blocking task failed: {0}")]
    Task(String),
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let context = context.into();
    move |source| BackupError::Io { context, source }
}

/// One file of a snapshot, as the manifest records it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative to the snapshot directory.
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// An object the snapshot's index needs, as the manifest records it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ObjectEntry {
    /// Relative to the destination (`objects/xorbs/ab/<hash>`).
    pub key: String,
    pub size: u64,
    pub sha256: String,
}

/// A hosted repository, as the manifest records it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct RepoEntry {
    pub name: String,
    /// `git/<name>.bundle`, or `None` for a repository without refs.
    pub bundle: Option<String>,
    /// What HEAD points at (`refs/heads/main`).
    pub head: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The snapshot's name (its directory under `snapshots/`).
    pub name: String,
    /// RFC 3339, UTC, when the backup began.
    pub started: String,
    pub finished: String,
    pub server_version: String,
    /// `sqlite` or `postgres`: where the dump came from (it loads into either).
    pub index_engine: String,
    /// Whether `secret` is in the snapshot (false with `--exclude-secret`).
    pub secret_included: bool,
    /// Rows per index table.
    pub index_rows: BTreeMap<String, u64>,
    /// Column names per index table, in the dump's order.
    pub index_columns: BTreeMap<String, Vec<String>>,
    pub files: Vec<FileEntry>,
    pub repositories: Vec<RepoEntry>,
    pub objects: Vec<ObjectEntry>,
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn snapshot_key(name: &str, path: &str) -> String {
    format!("snapshots/{name}/{path}")
}

/// The latest complete snapshot of `dest`, or the one named.
pub async fn load_manifest(dest: &Dest, name: Option<&str>) -> Result<Manifest, BackupError> {
    let name = match name {
        Some(n) => n.to_string(),
        None => snapshot_names(dest)
            .await?
            .pop()
            .ok_or_else(|| BackupError::NoSnapshot {
                dest: dest.to_string(),
            })?,
    };
    let bytes = dest
        .get(&snapshot_key(&name, "manifest.json"))
        .await
        .map_err(io_err(format!("reading snapshot {name}'s manifest")))?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| BackupError::BadManifest(name.clone(), e.to_string()))?;
    if manifest.format != FORMAT {
        return Err(BackupError::BadManifest(
            name,
            format!("format {}", manifest.format),
        ));
    }
    Ok(manifest)
}

/// Names of the complete snapshots, oldest first (names sort by time).
pub async fn snapshot_names(dest: &Dest) -> Result<Vec<String>, BackupError> {
    let mut names: Vec<String> = dest
        .list("snapshots")
        .await
        .map_err(io_err(format!("listing snapshots in {dest}")))?
        .into_iter()
        .filter_map(|(key, _)| {
            let rest = key.strip_prefix("snapshots/")?;
            let (name, file) = rest.split_once('/')?;
            (file == "manifest.json").then(|| name.to_string())
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Progress lines on stderr, at most one every two seconds per step.
pub(crate) struct Progress {
    step: &'static str,
    last: std::time::Instant,
}

impl Progress {
    pub fn new(step: &'static str) -> Progress {
        Progress {
            step,
            last: std::time::Instant::now(),
        }
    }

    pub fn tick(&mut self, what: impl FnOnce() -> String) {
        if self.last.elapsed() >= std::time::Duration::from_secs(2) {
            self.last = std::time::Instant::now();
            eprintln!("{}: {}", self.step, what());
        }
    }
}
