//! Where `import-lfs` reads objects from: a local directory, or a bucket of S3-compatible
//! object storage (`s3://BUCKET[/PREFIX]`, client settings from the `AWS_*` environment
//! variables as for the server's own S3 store). Both are listed the same way (every file or
//! key whose last path component is a sha256) and each object is read as a stream, so a
//! multi-GB object never sits in memory.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as S3Path;
use object_store::ObjectStore as _;

use git_xet_core::lfs::parse_oid;

/// An LFS object store to import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Dir(PathBuf),
    /// `prefix` without leading or trailing `/`; empty for the whole bucket.
    S3 {
        bucket: String,
        prefix: String,
    },
}

/// A `--from` value that names no store we can read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SourceError {
    #[error("{0}: no bucket named; write s3://BUCKET or s3://BUCKET/PREFIX")]
    NoBucket(String),
    #[error(
        "{0}: only a local directory or s3://BUCKET/PREFIX can be read; copy other storage \
         to a directory first and import that"
    )]
    Scheme(String),
}

impl Source {
    /// `s3://BUCKET[/PREFIX]`, or a directory (any text without a `://`).
    pub fn parse(text: &str) -> Result<Source, SourceError> {
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(SourceError::NoBucket(text.to_string()));
            }
            return Ok(Source::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        if text.contains("://") {
            return Err(SourceError::Scheme(text.to_string()));
        }
        Ok(Source::Dir(PathBuf::from(text)))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Dir(dir) => write!(f, "{}", dir.display()),
            Source::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Source::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// One object found: its name (a sha256), size and where it is.
pub(super) struct Found {
    pub oid: [u8; 32],
    pub size: u64,
    /// The file's path, or `s3://BUCKET/KEY`: what reports and errors show.
    pub name: PathBuf,
    at: At,
}

enum At {
    File(PathBuf),
    Key(S3Path),
}

/// An opened source: lists objects and reads them.
pub(super) enum Reader {
    Dir(PathBuf),
    S3 {
        s3: Arc<AmazonS3>,
        bucket: String,
        prefix: String,
    },
}

impl Reader {
    /// Nothing is sent to object storage until [`Reader::list`].
    pub fn open(source: &Source) -> std::io::Result<Reader> {
        Ok(match source {
            Source::Dir(dir) => Reader::Dir(dir.clone()),
            Source::S3 { bucket, prefix } => {
                let s3 = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .build()
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                Reader::S3 {
                    s3: Arc::new(s3),
                    bucket: bucket.clone(),
                    prefix: prefix.clone(),
                }
            }
        })
    }

    /// Every object named by a sha256, sorted by name, and how many other files or keys
    /// there were (left alone).
    pub fn list(&self, rt: &tokio::runtime::Handle) -> std::io::Result<(Vec<Found>, u64)> {
        let mut found = Vec::new();
        let mut ignored = 0;
        match self {
            Reader::Dir(dir) => list_dir(dir, &mut found, &mut ignored)?,
            Reader::S3 { s3, bucket, prefix } => {
                let under = (!prefix.is_empty()).then(|| S3Path::from(prefix.as_str()));
                let listed: Vec<_> = rt
                    .block_on(s3.list(under.as_ref()).try_collect())
                    .map_err(to_io)?;
                for meta in listed {
                    match meta
                        .location
                        .filename()
                        .and_then(|name| parse_oid(name).ok())
                    {
                        Some(oid) => found.push(Found {
                            oid,
                            size: meta.size,
                            name: PathBuf::from(format!("s3://{bucket}/{}", meta.location)),
                            at: At::Key(meta.location),
                        }),
                        None => ignored += 1,
                    }
                }
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((found, ignored))
    }

    /// The object's bytes as a blocking reader; from S3 the body is streamed as it arrives
    /// (call from a thread outside `rt`).
    pub fn read(
        &self,
        rt: &tokio::runtime::Handle,
        found: &Found,
    ) -> std::io::Result<Box<dyn Read + Send>> {
        match (&found.at, self) {
            (At::File(path), _) => Ok(Box::new(std::fs::File::open(path)?)),
            (At::Key(key), Reader::S3 { s3, .. }) => {
                let got = rt.block_on(s3.get(key)).map_err(to_io)?;
                let body = tokio_util::io::StreamReader::new(got.into_stream().map_err(to_io));
                Ok(Box::new(tokio_util::io::SyncIoBridge::new_with_handle(
                    body,
                    rt.clone(),
                )))
            }
            (At::Key(_), Reader::Dir(_)) => Err(std::io::Error::other("an S3 key in a directory")),
        }
    }
}

fn to_io(e: object_store::Error) -> std::io::Error {
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, e)
        }
        e => std::io::Error::other(e),
    }
}

/// Every file under `dir` named by a sha256; symbolic links are not followed.
fn list_dir(dir: &Path, found: &mut Vec<Found>, ignored: &mut u64) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            list_dir(&path, found, ignored)?;
        } else if kind.is_file() {
            match entry
                .file_name()
                .to_str()
                .and_then(|name| parse_oid(name).ok())
            {
                Some(oid) => found.push(Found {
                    oid,
                    size: entry.metadata()?.len(),
                    name: path.clone(),
                    at: At::File(path),
                }),
                None => *ignored += 1,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_names_a_directory_or_a_bucket() {
        let s3 = |bucket: &str, prefix: &str| Source::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
        };
        assert_eq!(Source::parse("s3://b"), Ok(s3("b", "")));
        assert_eq!(Source::parse("s3://b/"), Ok(s3("b", "")));
        assert_eq!(Source::parse("s3://b/lfs/org/"), Ok(s3("b", "lfs/org")));
        assert_eq!(
            Source::parse("/srv/lfs"),
            Ok(Source::Dir("/srv/lfs".into()))
        );
        assert!(matches!(
            Source::parse("s3:///x"),
            Err(SourceError::NoBucket(_))
        ));
        assert!(matches!(
            Source::parse("gs://b/x"),
            Err(SourceError::Scheme(_))
        ));
        assert_eq!(s3("b", "p/q").to_string(), "s3://b/p/q");
        assert_eq!(s3("b", "").to_string(), "s3://b");
    }
}
