//! A git-xet server's deployment on disk, below everything that serves it (the HTTP server,
//! the ssh shell, the upkeep commands):
//!
//! - [`open`](open()) and its kin: where the shared state lives (object store, index, signing
//!   secret) and opening it (open.rs);
//! - [`repos`]: the hosted bare repositories: their layout, creation, the one walk of them
//!   every command shares, and git as the server runs it there;
//! - [`writers`]: the writer lock that tells a crashed git's lock files from a live git's;
//! - [`running`]: the running server's record (`server.json`): its URLs and where its
//!   repositories are, for the processes that find it through the data directory.

mod open;
pub mod repos;
pub mod running;
pub mod writers;

use std::path::Path;

pub use open::{
    open, open_index, open_keys, open_store, read_keys, token_revoked, Deployment,
    DeploymentConfig, DeploymentError, IndexLocation, KeysError, StoreLocation,
};

/// Writes `contents` to `path` atomically (a temporary file beside it, then a rename).
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, contents.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
