//! The client's configuration and the [`CasClient`] built from it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cas::CasApi;
use crate::chunk_cache::{default_cache_root, ChunkCache, DEFAULT_CHUNK_CACHE_BYTES};
use crate::error::{ClientError, Result};
use crate::http::Http;
use crate::records::RecordStore;
use crate::retry::RetryPolicy;
use crate::shard_cache::ShardIndex;
use crate::token::{RefreshFn, Token, TokenSource};
use crate::transport::HttpFactory;

/// Xorbs uploaded at once. Each is streamed from a staging file, so this costs sockets, not
/// memory; 4 keeps a fast link busy while the next xorb is packed.
pub const DEFAULT_UPLOAD_CONCURRENCY: usize = 4;
/// Xorb ranges fetched ahead of the writer. Each buffers at most 32 chunks (~2 MiB).
pub const DEFAULT_DOWNLOAD_CONCURRENCY: usize = 8;

/// Chunks of closed xorbs kept in memory before they are registered by an intermediate
/// shard: ~16 GiB of new data, ~10 MiB of metadata.
pub const DEFAULT_SHARD_FLUSH_CHUNKS: usize = 1 << 18;

/// Everything a [`CasClient`] needs. Start from [`ClientConfig::new`] and set what differs.
#[derive(Clone)]
pub struct ClientConfig {
    /// The CAS base URL; requests go to `{cas_url}/v1/...`.
    pub cas_url: String,
    /// The initial access token (None: ask `refresh` first, or anonymous).
    pub token: Option<Token>,
    /// Produces a new token 30 s before expiry and after a 401.
    pub refresh: Option<RefreshFn>,
    pub retry: RetryPolicy,
    pub upload_concurrency: usize,
    pub download_concurrency: usize,
    /// Shard cache and reconstruction records (per repository: `.git/xet`). None: no local
    /// dedup against earlier sessions, no reuse of local files. The shard cache inside is
    /// kept per CAS server ([`ClientConfig::shard_cache_dir`]); the records hold only
    /// content hashes and serve every server.
    pub metadata_dir: Option<PathBuf>,
    /// Chunk cache directory and size limit. None: no chunk cache.
    pub chunk_cache: Option<(PathBuf, u64)>,
    /// Where reconstruction records go (`<dir>/files`), when not under `metadata_dir`: the
    /// per-user chunk store's root ([`crate::store`]), so its files can be rebuilt offline.
    pub records_dir: Option<PathBuf>,
    /// Keep the xorbs an upload sends in the chunk cache (the per-user chunk store: so that
    /// what this clone pushed can be rebuilt offline, and another clone needs no download).
    pub store_uploads: bool,
    /// Where xorbs are staged before upload (default: the system temporary directory).
    pub staging_dir: Option<PathBuf>,
    /// Ask the server's global dedup for eligible chunks.
    pub global_dedup: bool,
    /// Once closed xorbs hold this many chunks, they are registered with an intermediate
    /// shard and their metadata leaves memory (default about 16 GiB of new data).
    pub shard_flush_chunks: usize,
    /// Where HTTP clients come from (git's TLS, proxy and header settings).
    pub http: HttpFactory,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("cas_url", &self.cas_url)
            .field("token", &self.token)
            .field("refreshable", &self.refresh.is_some())
            .field("retry", &self.retry)
            .field("upload_concurrency", &self.upload_concurrency)
            .field("download_concurrency", &self.download_concurrency)
            .field("metadata_dir", &self.metadata_dir)
            .field("chunk_cache", &self.chunk_cache)
            .field("records_dir", &self.records_dir)
            .field("store_uploads", &self.store_uploads)
            .field("staging_dir", &self.staging_dir)
            .field("global_dedup", &self.global_dedup)
            .field("shard_flush_chunks", &self.shard_flush_chunks)
            .field("http", &self.http)
            .finish()
    }
}

/// A short stable name for a CAS URL, to keep per-server caches apart.
pub fn endpoint_key(cas_url: &str) -> String {
    let hash = blake3::hash(cas_url.trim_end_matches('/').as_bytes());
    hash.to_hex()[..16].to_string()
}

impl ClientConfig {
    /// Defaults: no token, no caches, global dedup on.
    pub fn new(cas_url: impl Into<String>) -> Self {
        ClientConfig {
            cas_url: cas_url.into(),
            token: None,
            refresh: None,
            retry: RetryPolicy::default(),
            upload_concurrency: DEFAULT_UPLOAD_CONCURRENCY,
            download_concurrency: DEFAULT_DOWNLOAD_CONCURRENCY,
            metadata_dir: None,
            chunk_cache: None,
            records_dir: None,
            store_uploads: false,
            staging_dir: None,
            global_dedup: true,
            shard_flush_chunks: DEFAULT_SHARD_FLUSH_CHUNKS,
            http: HttpFactory::default(),
        }
    }

    /// Uses the per-user cache directory `<cache>/git-xet/` for metadata, and a 10 GiB chunk
    /// cache under `<cache>/git-xet/chunks`.
    pub fn with_user_caches(mut self) -> Self {
        if let Some(root) = default_cache_root() {
            self.metadata_dir.get_or_insert_with(|| root.clone());
            self.chunk_cache
                .get_or_insert_with(|| (root.join("chunks"), DEFAULT_CHUNK_CACHE_BYTES));
        }
        self
    }

    /// Uses the per-user chunk store at `root` (at most `max_bytes` of chunks): fetched
    /// ranges are kept there and files' reconstructions recorded there.
    pub fn with_store(mut self, root: &std::path::Path, max_bytes: u64) -> Self {
        self.chunk_cache = Some((crate::store::ChunkStore::chunks_dir(root), max_bytes));
        self.records_dir = Some(root.to_path_buf());
        self.store_uploads = true;
        self
    }

    /// This server's shard cache: `<metadata dir>/servers/<endpoint key>/`. A shard says
    /// which xorbs one server holds; read for another server, its chunks would be deduplicated
    /// against xorbs that server never received, and the upload refused.
    pub fn shard_cache_dir(&self) -> Option<PathBuf> {
        let dir = self.metadata_dir.as_ref()?;
        Some(dir.join("servers").join(endpoint_key(&self.cas_url)))
    }
}

/// A client of one CAS server. Cheap to clone; share it between tasks.
#[derive(Clone)]
pub struct CasClient {
    pub(crate) api: CasApi,
    pub(crate) config: ClientConfig,
    pub(crate) chunk_cache: Option<Arc<ChunkCache>>,
    pub(crate) records: Option<RecordStore>,
    /// The shard cache's index, kept between sessions of this process (taken by a session,
    /// given back by its `finish`).
    pub(crate) shard_index: Arc<std::sync::Mutex<Option<ShardIndex>>>,
}

impl fmt::Debug for CasClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CasClient")
            .field("config", &self.config)
            .finish()
    }
}

impl CasClient {
    pub fn new(config: ClientConfig) -> Result<Self> {
        let tokens = match (&config.token, &config.refresh) {
            (_, Some(refresh)) => TokenSource::refreshable(config.token.clone(), refresh.clone()),
            (Some(token), None) => TokenSource::fixed(token.clone()),
            (None, None) => TokenSource::anonymous(),
        };
        let http = Http::new(
            &config.cas_url,
            Arc::new(tokens),
            config.retry,
            &config.http,
        )?;
        // The cache only saves bandwidth: one that cannot be opened is skipped, not fatal.
        let chunk_cache = match &config.chunk_cache {
            Some((dir, max)) => match ChunkCache::open(dir, *max) {
                Ok(cache) => Some(Arc::new(cache)),
                Err(e) => {
                    tracing::warn!("working without the chunk cache: {e}");
                    None
                }
            },
            None => None,
        };
        if config.upload_concurrency == 0 || config.download_concurrency == 0 {
            return Err(ClientError::InvalidArgument(
                "concurrency must be at least 1".into(),
            ));
        }
        let records = config
            .records_dir
            .as_deref()
            .or(config.metadata_dir.as_deref())
            .map(RecordStore::new);
        Ok(CasClient {
            api: CasApi::new(&config.cas_url, http),
            config,
            chunk_cache,
            records,
            shard_index: Default::default(),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The low-level CAS API (for callers that need a single request).
    pub fn api(&self) -> &CasApi {
        &self.api
    }

    /// The XET file hash of a local file recorded with this sha256 (uploaded or downloaded
    /// earlier through this metadata directory), if any.
    pub fn known_file_hash(&self, sha256: &[u8; 32]) -> Option<git_xet_core::MerkleHash> {
        self.records.as_ref()?.file_hash_for_sha256(sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_keys_ignore_a_trailing_slash() {
        assert_eq!(endpoint_key("http://a:1/"), endpoint_key("http://a:1"));
        assert_ne!(endpoint_key("http://a:1"), endpoint_key("http://a:2"));
    }

    #[test]
    fn bad_configuration_is_refused() {
        assert!(CasClient::new(ClientConfig::new("not a url")).is_err());
        let mut c = ClientConfig::new("http://127.0.0.1:1");
        c.download_concurrency = 0;
        assert!(CasClient::new(c).is_err());
        assert!(CasClient::new(ClientConfig::new("http://127.0.0.1:1")).is_ok());
    }
}
