//! CAS client: HTTP with retries and tokens; deduplicating upload sessions; reconstructing
//! downloads; the local shard and chunk caches. Speaks only the CAS API (docs/formats.md,
//! "CAS HTTP API", under `{cas_url}/v1`), so it works with any conforming XET
//! server. Depends on the protocol core only.
//!
//! # Using it
//!
//! ```no_run
//! # async fn demo() -> Result<(), git_xet_client::ClientError> {
//! use git_xet_client::{CasClient, ClientConfig, DownloadOptions, Token};
//! use std::path::Path;
//!
//! let mut config = ClientConfig::new("http://127.0.0.1:8080");
//! config.token = Some(Token::with_unix_expiry("secret", 1_900_000_000));
//! config.metadata_dir = Some(".git/xet".into()); // shard cache + reconstruction records
//! let client = CasClient::new(config)?;
//!
//! // Upload: any number of files, then one shard registers them all.
//! let mut session = client.start_upload().await?;
//! let file = session.add_file(Path::new("model.bin"), None).await?;
//! let summary = session.finish().await?; // xorbs and shard are on the server now
//! eprintln!("{}", summary.stats);
//!
//! // Download, verified against the file hash (always) and the sha256 (when given).
//! let options = DownloadOptions { expected_sha256: Some(file.sha256), ..Default::default() };
//! client.download(&file.file_hash, Path::new("copy.bin"), options).await?;
//! # Ok(()) }
//! ```
//!
//! - **Configuration** ([`ClientConfig`]): CAS URL; token = initial [`Token`] (secret +
//!   expiry) and an optional async [`RefreshFn`], called 30 s before expiry and once after a
//!   401; [`RetryPolicy`]; upload/download concurrency; `metadata_dir` (per repository:
//!   `.git/xet`; holds per CAS server `servers/<key>/` with `shards/` (merged when small
//!   ones gather; `shards.lock` beside it) and `dedup-shards/`, and for all servers `files/`
//!   and `chunk-lists/`); chunk cache directory and size
//!   ([`ClientConfig::with_user_caches`] picks the user cache directory); staging directory
//!   for xorbs being uploaded; global dedup on/off.
//! - **Upload** ([`UploadSession`]): `add_file` / `add_reader` stream a file through
//!   chunking, dedup (session -> shard cache -> global dedup, with fragmentation prevention;
//!   files up to 256 KiB do not wait for the global dedup answer, which is kept for later)
//!   and packing; `add_chunked_file` does the same from a [`chunk_lists::ChunkList`] saved
//!   when the content went by earlier, reading only the chunks it packs (each checked against
//!   the list). New xorbs upload in parallel as they fill. `finish` waits for them,
//!   uploads one shard (verification entries and sha256 for every file), keeps it in the
//!   shard cache and returns [`UploadSummary`] (per file: [`FileUpload`] = file hash,
//!   sha256, size, [`DedupStats`]; per session: [`SessionStats`]). Never report an upload
//!   as done before `finish` returned Ok.
//!   Memory is bounded whatever the size: chunks stored raw are sent from the source file
//!   (which must not change until `finish`), compressed ones are staged in `staging_dir`;
//!   every `shard_flush_chunks` chunks the closed xorbs are registered by an intermediate
//!   shard and their metadata leaves memory; reconstruction records are spooled to disk.
//! - **Download** ([`CasClient::download`]): whole file or `range` (inclusive end);
//!   writes to a temporary file beside the output and renames it only after verification
//!   (XET file hash for whole files, sha256 when `expected_sha256` is set); on failure nothing
//!   is left at the output path. [`LocalSource`]s (e.g. the previous version of the file in
//!   `.git/lfs/objects`, identified by its XET hash or sha256) are read instead of fetching
//!   the chunks they share, when this client recorded their reconstruction (it does for
//!   everything it uploads or downloads whole with a `metadata_dir`).
//! - **HTTP** ([`transport`]): every HTTP client of the client side comes from one
//!   [`HttpFactory`], built from plain [`HttpSettings`] (git's `http.*` keys and variables,
//!   filled by the git layer; [`ClientConfig::http`]): trusted CAs, client certificates,
//!   proxies, extra headers. [`transport::Authenticator`] runs the credential protocol;
//!   failures are typed ([`TransportError`], as [`ClientError::Transport`] when retrying
//!   cannot help).
//! - **Progress**: a [`ProgressFn`] `(bytes done, total)` per file, for both directions.
//! - **Blocking callers**: [`BlockingClient`].
//! - **Errors**: one type, [`ClientError`], whose messages say what failed and why (server
//!   reasons included); tokens never appear in messages or logs. `StaleDedup` means the
//!   server refused xorbs the shard cache vouched for; the cache is cleared, so the same
//!   upload again succeeds (the agent retries once by itself).

mod blocking;
mod cas;
mod cas_client;
pub mod chunk_cache;
pub mod chunk_lists;
mod download;
mod error;
mod http;
pub mod progress;
pub mod records;
pub mod retry;
pub mod shard_cache;
pub mod stats;
pub mod store;
mod token;
pub mod transport;
mod upload;

pub use blocking::{BlockingClient, BlockingUpload};
pub use cas::CasApi;
pub use cas_client::{
    endpoint_key, CasClient, ClientConfig, DEFAULT_DOWNLOAD_CONCURRENCY, DEFAULT_UPLOAD_CONCURRENCY,
};
pub use download::{
    slice_reconstruction, ContentTap, DownloadOptions, DownloadOutcome, FirstChunk, LocalSource,
    RangeEdges, RangeSink, SharedFetches,
};
pub use error::{CacheDamage, ClientError, Result};
/// How an upload reaches a file's bytes: mapped (only files git-xet owns) or read.
pub use git_xet_io::platform::mmap::Mapper;
pub use progress::ProgressFn;
pub use retry::RetryPolicy;
pub use stats::{DedupStats, SessionStats};
pub use token::{RefreshFn, RefreshFuture, Token, TokenSource};
pub use transport::{HttpFactory, HttpSettings, TransportError};
pub use upload::{
    compress_parallel, FileUpload, Registered, UploadSession, UploadSummary, MIN_RUN_BYTES,
    MIN_RUN_CHUNKS,
};
