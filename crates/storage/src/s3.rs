//! S3-compatible object storage through the `object_store` crate: keys
//! `PREFIX/xorbs/ab/<hash>.xorb` and `PREFIX/shards/ab/<hash>.shard` (FsStore's layout),
//! configured the standard way from `AWS_*` environment variables.
//!
//! Uploads are staged in a local file (validated through a mapping of it by the caller), then
//! stored with one PUT, or a multipart upload above [`SINGLE_PUT_MAX`]. S3 makes an object
//! visible only once its PUT (or its multipart completion) succeeds, so a crash leaves no half
//! object; an abandoned multipart upload is invisible and the store's lifecycle rules reap it.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as S3Path;
use object_store::signer::Signer;
use object_store::{GetOptions, GetRange, ObjectStore as _, PutMode, PutOptions, PutPayload};

use crate::{
    map_range, BoxFuture, ByteStream, ObjectInfo, ObjectKey, ObjectKind, ObjectStore, ObjectTail,
    ObjectVersion, Staged,
};
use git_xet_core::MerkleHash;

/// Objects up to this size go up in one PUT; larger ones as a multipart upload.
const SINGLE_PUT_MAX: u64 = 64 * 1024 * 1024;
/// Part size of a multipart upload (S3's minimum is 5 MiB).
const PART_SIZE: u64 = 16 * 1024 * 1024;

#[derive(Clone)]
pub struct S3Store {
    s3: Arc<AmazonS3>,
    /// The client's settings, for [`S3Store::check`]'s own short-timeout client.
    builder: AmazonS3Builder,
    /// Key prefix without a trailing `/`; empty for the bucket's root.
    prefix: String,
    tmp: PathBuf,
}

impl S3Store {
    /// A store on `bucket` under `prefix`, configured from the `AWS_*` environment variables;
    /// staging files go to `tmp`. Nothing is sent until the first request ([`S3Store::check`]
    /// sends one).
    pub fn open(bucket: &str, prefix: &str, tmp: &Path) -> std::io::Result<S3Store> {
        Self::with_builder(AmazonS3Builder::from_env(), bucket, prefix, tmp)
    }

    /// [`S3Store::open`] with the client settings of `builder` instead of the environment.
    pub fn with_builder(
        builder: AmazonS3Builder,
        bucket: &str,
        prefix: &str,
        tmp: &Path,
    ) -> std::io::Result<S3Store> {
        let builder = builder.with_bucket_name(bucket);
        let s3 = builder
            .clone()
            .build()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        std::fs::create_dir_all(tmp)?;
        Ok(S3Store {
            s3: Arc::new(s3),
            builder,
            prefix: prefix.trim_matches('/').to_string(),
            tmp: tmp.to_path_buf(),
        })
    }

    /// Checks within seconds that the bucket exists and takes these credentials (one LIST
    /// under the prefix, bounded retries): what a server does before it starts listening.
    pub fn check(&self) -> Result<(), super::S3ProbeError> {
        super::s3_probe::probe(&self.builder, &self.prefix)
    }

    fn kind_prefix(&self, kind: ObjectKind) -> String {
        let (dir, _) = layout(kind);
        if self.prefix.is_empty() {
            dir.to_string()
        } else {
            format!("{}/{dir}", self.prefix)
        }
    }

    fn path(&self, key: &ObjectKey) -> S3Path {
        let (_, ext) = layout(key.kind);
        let hex = key.hash.to_hex();
        S3Path::from(format!(
            "{}/{}/{hex}.{ext}",
            self.kind_prefix(key.kind),
            &hex[..2]
        ))
    }

    /// Stores `payload` unless `key` exists; returns the stored version, `None` when the key
    /// existed. `PutMode::Create` sends `If-None-Match: *`; Garage 2.5 does not implement it
    /// (it ignores the header and overwrites; see the `garage_put_is_not_conditional` test),
    /// so two writers of one key can both succeed and the last one's bytes stay. Keys are
    /// content hashes, but a xorb has several valid layouts: the xorb path compares the
    /// stored version with what it indexed (the server's `cas/stored_xorb.rs`).
    async fn put_payload(
        &self,
        key: ObjectKey,
        payload: PutPayload,
    ) -> std::io::Result<Option<ObjectVersion>> {
        let path = self.path(&key);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self.s3.put_opts(&path, payload, opts).await {
            Ok(put) => Ok(Some(self.put_version(key, put).await?)),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    /// The version a PUT reported, or (a store that sends no ETag) the one a HEAD reports.
    async fn put_version(
        &self,
        key: ObjectKey,
        put: object_store::PutResult,
    ) -> std::io::Result<ObjectVersion> {
        match put.e_tag {
            Some(tag) => Ok(ObjectVersion(tag)),
            None => self.version(key).await?.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "object gone right after it was stored",
                )
            }),
        }
    }

    /// A multipart upload of `file`'s first `len` bytes, sent from mappings of it.
    async fn put_multipart(
        &self,
        key: ObjectKey,
        file: Arc<std::fs::File>,
        len: u64,
    ) -> std::io::Result<Option<ObjectVersion>> {
        let path = self.path(&key);
        let mut upload = self.s3.put_multipart(&path).await.map_err(to_io)?;
        let mut offset = 0;
        let sent: std::io::Result<object_store::PutResult> = async {
            while offset < len {
                let n = (len - offset).min(PART_SIZE);
                let part = {
                    let file = file.clone();
                    tokio::task::spawn_blocking(move || map_range(&file, offset, n as usize))
                        .await
                        .map_err(std::io::Error::other)??
                };
                upload.put_part(part.into()).await.map_err(to_io)?;
                offset += n;
            }
            upload.complete().await.map_err(to_io)
        }
        .await;
        match sent {
            Ok(put) => Ok(Some(self.put_version(key, put).await?)),
            Err(e) => {
                // Best effort: an upload left behind is invisible and reaped by lifecycle rules.
                let _ = upload.abort().await;
                Err(e)
            }
        }
    }

    async fn get_range(&self, key: ObjectKey, range: Range<u64>) -> std::io::Result<ByteStream> {
        let path = self.path(&key);
        if range.is_empty() {
            // S3 refuses an empty range; still say whether the object (and offset) exist.
            let meta = self.s3.head(&path).await.map_err(to_io)?;
            check_range(&range, meta.size)?;
            return Ok(futures::stream::empty().boxed());
        }
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        let got = self.s3.get_opts(&path, opts).await.map_err(to_io)?;
        // A range running past the end is answered with what there is: refuse it, like FsStore.
        check_range(&range, got.meta.size)?;
        if got.range != range {
            return Err(outside(&range, got.meta.size));
        }
        Ok(got.into_stream().map_err(to_io).boxed())
    }
}

/// Without the builder's fields: they hold the secret key.
impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("s3", &self.s3.to_string())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// An object's version: its ETag, else (a store that sends none) its size and time.
fn meta_version(meta: &object_store::ObjectMeta) -> ObjectVersion {
    match &meta.e_tag {
        Some(tag) => ObjectVersion(tag.clone()),
        None => ObjectVersion(format!("{}@{}", meta.size, meta.last_modified.to_rfc3339())),
    }
}

/// Directory and file extension of a kind of object (as in FsStore).
fn layout(kind: ObjectKind) -> (&'static str, &'static str) {
    match kind {
        ObjectKind::Xorb => ("xorbs", "xorb"),
        ObjectKind::Shard => ("shards", "shard"),
    }
}

fn outside(range: &Range<u64>, len: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("range {range:?} is outside an object of {len} bytes"),
    )
}

fn check_range(range: &Range<u64>, len: u64) -> std::io::Result<()> {
    if range.start > range.end || range.end > len {
        return Err(outside(range, len));
    }
    Ok(())
}

/// Maps an `object_store` error to the `std::io::Error` kind callers act on, by variant.
fn to_io(e: object_store::Error) -> std::io::Error {
    use std::io::ErrorKind;
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        object_store::Error::InvalidPath { .. } => ErrorKind::InvalidInput,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented => {
            ErrorKind::Unsupported
        }
        _ => ErrorKind::Other,
    };
    std::io::Error::new(kind, e)
}

/// `<hash>` of a listed key `.../ab/<hash>.EXT`; other names are skipped, never reported.
fn listed_hash(path: &S3Path, ext: &str) -> Option<MerkleHash> {
    let name = path.filename()?;
    let hex = name.strip_suffix(ext)?.strip_suffix('.')?;
    MerkleHash::from_hex(hex).ok()
}

impl ObjectStore for S3Store {
    fn put(&self, key: ObjectKey, data: Bytes) -> BoxFuture<'_, std::io::Result<bool>> {
        Box::pin(async move {
            if self.len(key).await?.is_some() {
                return Ok(false);
            }
            Ok(self.put_payload(key, data.into()).await?.is_some())
        })
    }

    fn stage(&self) -> std::io::Result<Staged> {
        Staged::create_in(&self.tmp)
    }

    fn put_staged(&self, key: ObjectKey, staged: Staged) -> BoxFuture<'_, std::io::Result<bool>> {
        Box::pin(async move {
            // An object already there is not sent again (a re-upload of known content).
            if self.len(key).await?.is_some() {
                return Ok(false);
            }
            Ok(self.put_staged_versioned(key, staged).await?.is_some())
        })
    }

    fn version(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        Box::pin(async move {
            match self.s3.head(&self.path(&key)).await {
                Ok(meta) => Ok(Some(meta_version(&meta))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(to_io(e)),
            }
        })
    }

    fn read_tail(&self, key: ObjectKey, max: u64) -> BoxFuture<'_, std::io::Result<ObjectTail>> {
        Box::pin(async move {
            let path = self.path(&key);
            if max == 0 {
                let meta = self.s3.head(&path).await.map_err(to_io)?;
                return Ok(ObjectTail {
                    bytes: Bytes::new(),
                    len: meta.size,
                    version: meta_version(&meta),
                });
            }
            let opts = GetOptions {
                range: Some(GetRange::Suffix(max)),
                ..Default::default()
            };
            // One GET: the bytes, the size and the version all describe the same object.
            let got = self.s3.get_opts(&path, opts).await.map_err(to_io)?;
            let (len, version) = (got.meta.size, meta_version(&got.meta));
            let bytes = got.bytes().await.map_err(to_io)?;
            Ok(ObjectTail {
                bytes,
                len,
                version,
            })
        })
    }

    fn put_staged_versioned(
        &self,
        key: ObjectKey,
        staged: Staged,
    ) -> BoxFuture<'_, std::io::Result<Option<ObjectVersion>>> {
        Box::pin(async move {
            // No HEAD first: the caller asked [`ObjectStore::version`] already.
            // The staging file is deleted when `_path` drops, after the upload.
            let (file, _path) = staged.into_parts();
            let len = file.metadata()?.len();
            if len == 0 {
                return self.put_payload(key, PutPayload::new()).await;
            }
            let file = Arc::new(file);
            if len > SINGLE_PUT_MAX {
                return self.put_multipart(key, file, len).await;
            }
            // Sent from a mapping of the staged file: no copy into the heap.
            let body = tokio::task::spawn_blocking(move || map_range(&file, 0, len as usize))
                .await
                .map_err(std::io::Error::other)??;
            self.put_payload(key, body.into()).await
        })
    }

    fn len(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<Option<u64>>> {
        Box::pin(async move {
            match self.s3.head(&self.path(&key)).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(to_io(e)),
            }
        })
    }

    fn read_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<Bytes>> {
        Box::pin(async move {
            let want = (range.end.saturating_sub(range.start)) as usize;
            let mut stream = self.get_range(key, range).await?;
            let mut out = bytes::BytesMut::with_capacity(want);
            while let Some(part) = stream.next().await {
                out.extend_from_slice(&part?);
            }
            Ok(out.freeze())
        })
    }

    fn stream_range(
        &self,
        key: ObjectKey,
        range: Range<u64>,
    ) -> BoxFuture<'_, std::io::Result<ByteStream>> {
        Box::pin(self.get_range(key, range))
    }

    fn list(
        &self,
        kind: ObjectKind,
    ) -> futures::stream::BoxStream<'_, std::io::Result<ObjectInfo>> {
        let (_, ext) = layout(kind);
        let prefix = S3Path::from(self.kind_prefix(kind));
        self.s3
            .list(Some(&prefix))
            .map_err(to_io)
            .try_filter_map(move |meta| async move {
                Ok(listed_hash(&meta.location, ext).map(|hash| ObjectInfo {
                    key: ObjectKey { kind, hash },
                    len: meta.size,
                    modified: meta.last_modified.into(),
                }))
            })
            .boxed()
    }

    fn delete(&self, key: ObjectKey) -> BoxFuture<'_, std::io::Result<bool>> {
        Box::pin(async move {
            // S3's DELETE succeeds on an absent key: HEAD first to tell the caller.
            if self.len(key).await?.is_none() {
                return Ok(false);
            }
            match self.s3.delete(&self.path(&key)).await {
                Ok(()) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(to_io(e)),
            }
        })
    }

    /// The `Range` is a signed header ([`super::sigv4`]), so the store refuses any other.
    fn presign_get(
        &self,
        key: ObjectKey,
        range: Range<u64>,
        expires_in: Duration,
    ) -> BoxFuture<'_, std::io::Result<Option<String>>> {
        Box::pin(async move {
            if range.is_empty() {
                return Err(outside(&range, 0));
            }
            // object_store knows the URL's form (path or virtual-hosted style, endpoint); its
            // own signature covers `host` only and is replaced.
            let url = self
                .s3
                .signed_url(reqwest::Method::GET, &self.path(&key), expires_in)
                .await
                .map_err(to_io)?;
            let mut url = url.to_string();
            if let Some(q) = url.find('?') {
                url.truncate(q);
            }
            let credential = self
                .s3
                .credentials()
                .get_credential()
                .await
                .map_err(to_io)?;
            let region = self
                .builder
                .get_config_value(&object_store::aws::AmazonS3ConfigKey::Region)
                .unwrap_or_else(|| "us-east-1".into());
            let creds = super::sigv4::Credentials {
                key_id: &credential.key_id,
                secret_key: &credential.secret_key,
                token: credential.token.as_deref(),
                region: &region,
            };
            let value = format!("bytes={}-{}", range.start, range.end - 1);
            let now = git_xet_io::time::now_secs();
            super::sigv4::presign_get(
                &creds,
                &url,
                &[("range", &value)],
                now,
                expires_in.as_secs(),
            )
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })
    }
}
