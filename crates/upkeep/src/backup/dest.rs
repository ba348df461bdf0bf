//! Where a backup lives: a directory, or an S3 bucket and prefix (configured like the
//! deployment's S3 object store, by the `AWS_*` environment variables). Keys are `/`-separated
//! paths under it; a file appears whole or not at all (written aside and renamed; one PUT).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as S3Path;
use object_store::{ObjectStore as _, PutPayload};

use git_xet_deployment::StoreLocation;

#[derive(Clone)]
pub enum Dest {
    Dir(PathBuf),
    S3 { s3: Arc<AmazonS3>, prefix: String },
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::Dir(dir) => write!(f, "{}", dir.display()),
            Dest::S3 { prefix, .. } => write!(f, "s3 prefix {prefix:?}"),
        }
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
}

fn to_io(e: object_store::Error) -> std::io::Error {
    match e {
        object_store::Error::NotFound { path, .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("{path} not found"))
        }
        other => std::io::Error::other(other.to_string()),
    }
}

impl Dest {
    /// A directory or `s3://BUCKET[/PREFIX]`, as `--object-store` takes them.
    pub fn parse(text: &str) -> std::io::Result<Dest> {
        Ok(match StoreLocation::parse(text).map_err(invalid)? {
            StoreLocation::Dir(dir) => Dest::Dir(std::path::absolute(&dir).unwrap_or(dir)),
            StoreLocation::S3 { bucket, prefix } => Dest::S3 {
                s3: Arc::new(
                    AmazonS3Builder::from_env()
                        .with_bucket_name(bucket)
                        .build()
                        .map_err(invalid)?,
                ),
                prefix,
            },
        })
    }

    fn file(dir: &Path, key: &str) -> PathBuf {
        dir.join(key)
    }

    fn s3_path(prefix: &str, key: &str) -> S3Path {
        if prefix.is_empty() {
            S3Path::from(key)
        } else {
            S3Path::from(format!("{prefix}/{key}"))
        }
    }

    /// Stores `data` under `key` (replacing what was there), durably.
    pub async fn put(&self, key: &str, data: Bytes) -> std::io::Result<()> {
        match self {
            Dest::Dir(dir) => {
                let path = Self::file(dir, key);
                tokio::task::spawn_blocking(move || write_file(&path, &data))
                    .await
                    .map_err(std::io::Error::other)?
            }
            Dest::S3 { s3, prefix } => s3
                .put(&Self::s3_path(prefix, key), PutPayload::from_bytes(data))
                .await
                .map(|_| ())
                .map_err(to_io),
        }
    }

    pub async fn get(&self, key: &str) -> std::io::Result<Bytes> {
        match self {
            Dest::Dir(dir) => tokio::fs::read(Self::file(dir, key)).await.map(Bytes::from),
            Dest::S3 { s3, prefix } => {
                let got = s3.get(&Self::s3_path(prefix, key)).await.map_err(to_io)?;
                got.bytes().await.map_err(to_io)
            }
        }
    }

    /// The size of `key`, or `None` when absent.
    pub async fn len(&self, key: &str) -> std::io::Result<Option<u64>> {
        match self {
            Dest::Dir(dir) => match tokio::fs::metadata(Self::file(dir, key)).await {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Dest::S3 { s3, prefix } => match s3.head(&Self::s3_path(prefix, key)).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(to_io(e)),
            },
        }
    }

    /// Every key under `under` (a directory-like prefix without a trailing `/`) and its size.
    pub async fn list(&self, under: &str) -> std::io::Result<Vec<(String, u64)>> {
        match self {
            Dest::Dir(dir) => {
                let (dir, under) = (dir.clone(), under.to_string());
                tokio::task::spawn_blocking(move || {
                    let mut out = Vec::new();
                    walk(&dir, &dir.join(&under), &mut out)?;
                    Ok(out)
                })
                .await
                .map_err(std::io::Error::other)?
            }
            Dest::S3 { s3, prefix } => {
                let base = Self::s3_path(prefix, under);
                let strip = if prefix.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}/")
                };
                s3.list(Some(&base))
                    .map_ok(|meta| {
                        let key = meta.location.as_ref();
                        (
                            key.strip_prefix(&strip).unwrap_or(key).to_string(),
                            meta.size,
                        )
                    })
                    .try_collect()
                    .await
                    .map_err(to_io)
            }
        }
    }
}

/// Writes `path` through a temporary name, fsyncing the file and its directory.
fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let parent = path.parent().expect("a key has a parent directory");
    std::fs::create_dir_all(parent)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(parent)?.sync_all()
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        let path = entry.path();
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else if !entry.file_name().to_string_lossy().starts_with(".tmp") {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push((rel.to_string_lossy().into_owned(), meta.len()));
        }
    }
    Ok(())
}
