//! Downloads: reconstruction query, plan, parallel production of segments (local files,
//! chunk cache, network), in-order writing to a temporary file, verification, rename.

mod fetch;
mod frames;
mod memory;
pub mod plan;
mod shared;
mod tap;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::error::{ClientError, Result};
use crate::progress::ProgressFn;
use crate::records::RecordStore;
use crate::CasClient;
use git_xet_core::hash::sha256_hex;
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::MerkleHash;

use fetch::{Context, Counters, DecodedChunk};
pub use memory::{slice_reconstruction, FirstChunk, RangeEdges, RangeSink};
use plan::{LocalChunk, LocalMap};
pub use shared::SharedFetches;
pub use tap::ContentTap;

/// Chunks buffered per segment being produced ahead of the writer.
const SEGMENT_QUEUE: usize = 32;
/// Files per batch reconstruction query (a Batch API answer's worth; a 7 KB URL).
pub const RECONSTRUCTIONS_PER_QUERY: usize = 100;

/// A local file that may hold chunks of the file being downloaded (typically an earlier
/// version of it). It is used only if a reconstruction record of it exists in the metadata
/// directory (written when this client uploaded or downloaded it); every chunk read from it
/// is checked against its recorded hash.
#[derive(Debug, Clone)]
pub struct LocalSource {
    pub path: PathBuf,
    /// Its XET file hash, when known; otherwise found through `sha256`.
    pub file_hash: Option<MerkleHash>,
    pub sha256: Option<[u8; 32]>,
}

/// How to download.
#[derive(Clone, Default)]
pub struct DownloadOptions {
    /// Bytes `start..=end` only (end inclusive, like HTTP). Past the end of the file the
    /// output is shorter.
    pub range: Option<(u64, u64)>,
    /// The result must have this sha256 (e.g. the git-lfs oid) or it is discarded.
    pub expected_sha256: Option<[u8; 32]>,
    pub sources: Vec<LocalSource>,
    pub progress: Option<ProgressFn>,
    /// Hands the bytes over as they are written, before the file is verified (see
    /// [`ContentTap`]); whole files only.
    pub tap: Option<ContentTap>,
    /// Runs of xorb bytes fetched once for several downloads of one batch (from
    /// [`reconstructions`](CasClient::reconstructions)).
    pub shared: Option<Arc<SharedFetches>>,
}

/// Where the bytes came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DownloadOutcome {
    pub bytes_written: u64,
    /// Xorb bytes fetched over the network (compressed, as transferred).
    pub network_bytes: u64,
    /// Xorb bytes read from the chunk cache.
    pub cache_bytes: u64,
    /// Bytes read from local source files.
    pub local_bytes: u64,
    /// Whether the XET file hash was recomputed and matched (whole-file downloads).
    pub file_hash_verified: bool,
    pub sha256: Option<[u8; 32]>,
}

/// Chunks of the local sources that this reconstruction uses (only those: the map stays
/// the size of the download, not of the sources).
fn build_local_map(
    store: Option<&RecordStore>,
    sources: &[LocalSource],
    recon: &Reconstruction,
) -> (LocalMap, Vec<PathBuf>) {
    let mut wanted: std::collections::HashMap<MerkleHash, Vec<(u32, u32)>> = Default::default();
    for t in &recon.terms {
        wanted
            .entry(t.hash)
            .or_default()
            .push((t.range.start, t.range.end));
    }
    let is_wanted = |xorb: &MerkleHash, i: u32| {
        wanted
            .get(xorb)
            .is_some_and(|ranges| ranges.iter().any(|&(s, e)| s <= i && i < e))
    };
    let mut map = LocalMap::new();
    let mut paths = Vec::new();
    let Some(store) = store else {
        return (map, paths);
    };
    for source in sources {
        let hash = source.file_hash.or_else(|| {
            source
                .sha256
                .as_ref()
                .and_then(|s| store.file_hash_for_sha256(s))
        });
        let Some(record) = hash.and_then(|h| store.load(&h)) else {
            continue;
        };
        match std::fs::metadata(&source.path) {
            Ok(m) if m.len() == record.size() => {}
            _ => continue, // missing or not the recorded file
        }
        let index = paths.len();
        paths.push(source.path.clone());
        let mut offset = 0u64;
        for term in &record.terms {
            for (k, &(hash, len)) in term.chunks.iter().enumerate() {
                let i = term.start + k as u32;
                if is_wanted(&term.xorb, i) {
                    let chunk = LocalChunk {
                        source: index,
                        offset,
                        len,
                        hash,
                    };
                    map.entry((term.xorb, i)).or_insert(chunk);
                }
                offset += u64::from(len);
            }
        }
    }
    (map, paths)
}

impl CasClient {
    /// Downloads the file `file_hash` (or a range of it) to `output`. The data arrives in a
    /// temporary file beside `output` and is renamed over it only once complete and verified:
    /// the XET file hash is always recomputed for whole files, and the sha256 when expected.
    pub async fn download(
        &self,
        file_hash: &MerkleHash,
        output: &Path,
        options: DownloadOptions,
    ) -> Result<DownloadOutcome> {
        if options.range.is_some() && options.tap.is_some() {
            return Err(ClientError::InvalidArgument(
                "a content tap needs a whole-file download, not a range".into(),
            ));
        }
        if let Some((s, e)) = options.range {
            if e < s {
                return Err(ClientError::InvalidArgument(format!(
                    "invalid range {s}-{e}: the end is before the start"
                )));
            }
        }
        self.download_from(file_hash, None, output, options).await
    }

    /// The reconstructions of many whole files in one request per
    /// [`RECONSTRUCTIONS_PER_QUERY`] of them, for [`download_reconstructed`]; files the
    /// server does not show (or a server without the batch query) get `None`, and their
    /// download asks for theirs alone. With each, the runs of xorb bytes its query's files
    /// share (for [`DownloadOptions::shared`]).
    ///
    /// [`download_reconstructed`]: CasClient::download_reconstructed
    pub async fn reconstructions(
        &self,
        files: &[MerkleHash],
    ) -> std::collections::HashMap<MerkleHash, (Reconstruction, Option<Arc<SharedFetches>>)> {
        let queries = files
            .chunks(RECONSTRUCTIONS_PER_QUERY)
            .map(|part| self.api.reconstructions(part));
        let mut found = std::collections::HashMap::new();
        for (part, answer) in files
            .chunks(RECONSTRUCTIONS_PER_QUERY)
            .zip(futures::future::join_all(queries).await)
        {
            match answer {
                Ok(batch) => {
                    let shared = SharedFetches::from_batch(&batch.fetch_info);
                    for file in part {
                        if let Some(recon) = batch.file(file) {
                            found.insert(*file, (recon, shared.clone()));
                        }
                    }
                }
                // Each file's own query then says what is wrong, if anything is.
                Err(e) => tracing::debug!("batch reconstruction query: {e}"),
            }
        }
        found
    }

    /// [`download`](CasClient::download) of a whole file with its reconstruction already
    /// known (from [`reconstructions`](CasClient::reconstructions)): one round trip fewer.
    /// What is written is verified exactly as there.
    pub async fn download_reconstructed(
        &self,
        file_hash: &MerkleHash,
        recon: Reconstruction,
        output: &Path,
        options: DownloadOptions,
    ) -> Result<DownloadOutcome> {
        if options.range.is_some() {
            return Err(ClientError::InvalidArgument(
                "a known reconstruction is of the whole file, not a range".into(),
            ));
        }
        self.download_from(file_hash, Some(recon), output, options)
            .await
    }

    async fn download_from(
        &self,
        file_hash: &MerkleHash,
        known: Option<Reconstruction>,
        output: &Path,
        options: DownloadOptions,
    ) -> Result<DownloadOutcome> {
        if *file_hash == MerkleHash::ZERO {
            return self.write_empty(output, &options);
        }
        let recon = match known {
            Some(recon) => recon,
            None => self.api.reconstruction(file_hash, options.range).await?,
        };
        let reused =
            self.chunk_cache.is_some() || (self.records.is_some() && !options.sources.is_empty());
        match self
            .download_attempt(file_hash, &recon, output, &options, true)
            .await
        {
            Err(ClientError::Corrupt { what, reason }) if reused => {
                // Cached or local bytes may be what is wrong: try once more without them.
                tracing::warn!("{what}: {reason}; retrying with data from the server only");
                self.download_attempt(file_hash, &recon, output, &options, false)
                    .await
            }
            other => other,
        }
    }

    fn write_empty(&self, output: &Path, options: &DownloadOptions) -> Result<DownloadOutcome> {
        if options.range.is_some_and(|(s, _)| s > 0) {
            return Err(ClientError::InvalidArgument(
                "the range starts past the end of an empty file".into(),
            ));
        }
        let empty_sha: [u8; 32] =
            sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new()).into();
        if let Some(expected) = options.expected_sha256 {
            if expected != empty_sha {
                return Err(ClientError::corrupt(
                    "downloading the empty file",
                    format!(
                        "expected sha256 {} but the empty file has {}",
                        sha256_hex(&expected),
                        sha256_hex(&empty_sha)
                    ),
                ));
            }
        }
        let temp = writer::create_temp(output)?;
        temp.persist(output)
            .map_err(|e| ClientError::io("saving the output", output, e.error))?;
        Ok(DownloadOutcome {
            file_hash_verified: true,
            sha256: Some(empty_sha),
            ..Default::default()
        })
    }

    async fn download_attempt(
        &self,
        file_hash: &MerkleHash,
        recon: &Reconstruction,
        output: &Path,
        options: &DownloadOptions,
        reuse_local: bool,
    ) -> Result<DownloadOutcome> {
        let whole = options.range.is_none();
        let (local, sources) = if reuse_local {
            build_local_map(self.records.as_ref(), &options.sources, recon)
        } else {
            (LocalMap::new(), Vec::new())
        };
        let segments = plan::plan(recon, &local)?;
        let terms_len = recon.terms_len();
        let skip = recon.offset_into_first_range;
        if skip >= terms_len {
            return Err(ClientError::protocol(
                "downloading",
                "offset_into_first_range is past the terms",
            ));
        }
        let limit = options.range.map(|(s, e)| e - s + 1);
        let expected_len = limit.map_or(terms_len - skip, |l| l.min(terms_len - skip));
        let setup = writer::WriterSetup {
            output: output.to_path_buf(),
            skip,
            limit,
            file_hash: whole,
            sha256: options.expected_sha256.is_some(),
            record: whole && self.records.is_some(),
            progress: options.progress.clone(),
            expected_len,
            tap: options.tap.clone(),
        };
        let ctx = Arc::new(Context {
            api: self.api.clone(),
            file: *file_hash,
            range: options.range,
            cache: self.chunk_cache.clone(),
            read_cache: reuse_local,
            sources,
            shared: options.shared.clone(),
            counters: Counters::default(),
            hash_chunks: true,
        });

        let (wtx, wrx) = mpsc::channel::<DecodedChunk>(64);
        let writer = tokio::task::spawn_blocking(move || writer::run(setup, wrx));
        let produced = self.produce_all(ctx.clone(), segments, wtx).await;
        let written = writer
            .await
            .map_err(|e| ClientError::Aborted(format!("the writer failed: {e}")))
            .and_then(|w| w);
        let result = produced
            .and(written)
            .and_then(|w| self.finish_download(file_hash, recon, output, options, w, expected_len));
        let c = &ctx.counters;
        if let (Err(ClientError::Corrupt { .. }), Some(cache)) = (&result, &self.chunk_cache) {
            // Never keep bytes that were part of a failed verification.
            for path in c.cache_paths.lock().expect("cache paths lock").iter() {
                cache.remove(path);
            }
        }
        let bytes_written = result?;
        Ok(DownloadOutcome {
            bytes_written: bytes_written.0,
            network_bytes: c.network_bytes.load(Ordering::Relaxed),
            cache_bytes: c.cache_bytes.load(Ordering::Relaxed),
            local_bytes: c.local_bytes.load(Ordering::Relaxed),
            file_hash_verified: bytes_written.1,
            sha256: bytes_written.2,
        })
    }

    /// Verifies what was written and moves it into place; returns (bytes, file hash
    /// verified, sha256).
    fn finish_download(
        &self,
        file_hash: &MerkleHash,
        recon: &Reconstruction,
        output: &Path,
        options: &DownloadOptions,
        written: writer::Written,
        expected_len: u64,
    ) -> Result<(u64, bool, Option<[u8; 32]>)> {
        let what = format!("downloading {file_hash}");
        if written.bytes != expected_len {
            return Err(ClientError::corrupt(
                &what,
                format!("wrote {} bytes, expected {expected_len}", written.bytes),
            ));
        }
        if let Some(actual) = written.file_hash {
            if actual != *file_hash {
                return Err(ClientError::corrupt(
                    &what,
                    format!("the data hashes to {actual}"),
                ));
            }
        }
        if let (Some(expected), Some(actual)) = (options.expected_sha256, written.sha256) {
            if expected != actual {
                return Err(ClientError::corrupt(
                    &what,
                    format!(
                        "expected sha256 {} but the data has {}",
                        sha256_hex(&expected),
                        sha256_hex(&actual)
                    ),
                ));
            }
        }
        written
            .temp
            .persist(output)
            .map_err(|e| ClientError::io("saving the output", output, e.error))?;
        if let (Some(store), Some(log)) = (&self.records, written.record) {
            let terms: Vec<_> = recon
                .terms
                .iter()
                .map(|t| (t.hash, t.range.start, t.range.len()))
                .collect();
            if let Err(e) = store.save_from_log(file_hash, written.sha256, &terms, log) {
                tracing::warn!("could not record how {file_hash} is stored: {e}");
            }
        }
        Ok((written.bytes, written.file_hash.is_some(), written.sha256))
    }

    /// Runs up to `download_concurrency` segments ahead of the writer and forwards their
    /// chunks in order.
    async fn produce_all(
        &self,
        ctx: Arc<Context>,
        segments: Vec<plan::Segment>,
        wtx: mpsc::Sender<DecodedChunk>,
    ) -> Result<()> {
        let wtx = &wtx;
        self.produce_each(ctx, segments, move |chunk| async move {
            wtx.send(chunk)
                .await
                .map_err(|_| ClientError::Aborted("the output writer stopped".into()))
        })
        .await
    }

    /// Runs up to `download_concurrency` segments ahead and hands their chunks, in order,
    /// to `each` on this task (a range read into memory takes them without a hop through
    /// another task and channel per chunk); stops at the first error of either.
    async fn produce_each<F, Fut>(
        &self,
        ctx: Arc<Context>,
        segments: Vec<plan::Segment>,
        mut each: F,
    ) -> Result<()>
    where
        F: FnMut(DecodedChunk) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let mut running = futures::stream::iter(segments.into_iter().map(|segment| {
            let ctx = ctx.clone();
            async move {
                let (tx, rx) = mpsc::channel(SEGMENT_QUEUE);
                tokio::spawn(fetch::produce(ctx, segment, tx));
                rx
            }
        }))
        .buffered(self.config.download_concurrency.max(1));
        while let Some(mut rx) = running.next().await {
            while let Some(item) = rx.recv().await {
                each(item?).await?;
            }
        }
        Ok(())
    }
}
