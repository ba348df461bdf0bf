//! The server's secret and the keys derived from it.
//!
//! One 32-byte random secret lives in `DATA/keys/secret` (mode 0600). Every key the server
//! uses is derived from it with BLAKE3's key derivation, one context per purpose, so a
//! signature made for one purpose is never valid for another. `git xet server token create`
//! reads (or creates) the same file, which is why it works without a running server.

use std::io::Write;
use std::path::{Path, PathBuf};

use git_xet_core::MerkleHash;

const SECRET_LEN: usize = 32;
const TOKEN_CONTEXT: &str = "git-xet server 2025-01 access token signing";
const URL_CONTEXT: &str = "git-xet server 2025-01 xorb fetch url signing";
const DEDUP_CONTEXT: &str = "git-xet server 2025-01 global dedup chunk key";

/// Keys derived from the server secret.
#[derive(Clone)]
pub struct Keys {
    token: [u8; 32],
    url: [u8; 32],
    dedup: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

/// Path of the secret inside a data directory.
pub fn secret_path(data_dir: &Path) -> PathBuf {
    data_dir.join("keys").join("secret")
}

impl Keys {
    /// Loads the secret from the data directory, creating it on first use. Two processes
    /// starting at once agree on one secret: it is published with a hard link, which fails
    /// if the file already exists.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<Keys> {
        let path = secret_path(data_dir);
        if !path.exists() {
            create_secret(&path)?;
        }
        Keys::load(data_dir)
    }

    /// Loads the secret from the data directory; `NotFound` when it has none.
    pub fn load(data_dir: &Path) -> std::io::Result<Keys> {
        let path = secret_path(data_dir);
        let bytes = std::fs::read(&path)?;
        let secret: [u8; SECRET_LEN] = bytes.as_slice().try_into().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} should hold {SECRET_LEN} bytes, found {}",
                    path.display(),
                    bytes.len()
                ),
            )
        })?;
        Ok(Keys::from_secret(&secret))
    }

    pub fn from_secret(secret: &[u8; SECRET_LEN]) -> Keys {
        Keys {
            token: blake3::derive_key(TOKEN_CONTEXT, secret),
            url: blake3::derive_key(URL_CONTEXT, secret),
            dedup: blake3::derive_key(DEDUP_CONTEXT, secret),
        }
    }

    /// MAC of an access token's payload.
    pub fn token_mac(&self, payload: &[u8]) -> blake3::Hash {
        blake3::keyed_hash(&self.token, payload)
    }

    /// MAC of a fetch URL's signed fields.
    pub fn url_mac(&self, payload: &[u8]) -> blake3::Hash {
        blake3::keyed_hash(&self.url, payload)
    }

    /// The global-dedup chunk key of a rotation epoch. Keys are derived, not stored, so
    /// every past key can be recomputed and a restart does not change the current one.
    pub fn dedup_key(&self, epoch: u64) -> MerkleHash {
        let mut hasher = blake3::Hasher::new_keyed(&self.dedup);
        hasher.update(&epoch.to_le_bytes());
        MerkleHash::from_bytes(*hasher.finalize().as_bytes())
    }
}

fn create_secret(path: &Path) -> std::io::Result<()> {
    let mut secret = [0u8; SECRET_LEN];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
    publish_secret(path, &secret)
}

/// Publishes `secret` at `path` unless a secret is there already (then left as it was).
fn publish_secret(path: &Path, secret: &[u8; SECRET_LEN]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().expect("secret path has a parent");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(
        ".secret.{}.{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(secret)?;
        file.sync_all()?;
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    sync_dirs(dir)
}

/// Reads a secret file (`index rebuild --secret-file`): the 32 bytes of a data directory's
/// `keys/secret`.
pub fn read_secret_file(path: &Path) -> std::io::Result<[u8; SECRET_LEN]> {
    let bytes = std::fs::read(path)?;
    bytes.as_slice().try_into().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} should hold {SECRET_LEN} bytes (a data directory's keys/secret), found {}",
                path.display(),
                bytes.len()
            ),
        )
    })
}

/// Installs `secret` as the data directory's secret; `AlreadyExists` when it has one.
pub fn install_secret(data_dir: &Path, secret: &[u8; SECRET_LEN]) -> std::io::Result<()> {
    let path = secret_path(data_dir);
    if path.exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} exists", path.display()),
        ));
    }
    publish_secret(&path, secret)
}

/// fsyncs the secret's directory and the one holding it, so that after a power loss the
/// secret every token and URL was signed with is still there under its name.
fn sync_dirs(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => std::fs::File::open(parent)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_is_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Keys::load_or_create(dir.path()).unwrap();
        let b = Keys::load_or_create(dir.path()).unwrap();
        assert_eq!(a.token_mac(b"x"), b.token_mac(b"x"));
        assert_ne!(
            a.token_mac(b"x"),
            a.url_mac(b"x"),
            "purposes use different keys"
        );
        assert_ne!(a.dedup_key(1), a.dedup_key(2));
    }

    #[test]
    fn the_secret_directories_are_synced() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        Keys::load_or_create(&data).unwrap();
        let keys_dir = secret_path(&data).parent().unwrap().to_path_buf();
        sync_dirs(&keys_dir).unwrap();
        assert!(
            sync_dirs(&data.join("missing")).is_err(),
            "it opens what it syncs"
        );
    }
}
