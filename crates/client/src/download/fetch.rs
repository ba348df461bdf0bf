//! Producing a segment's chunks, in order, into a bounded channel: from local files, from
//! the chunk cache, or from the network (streaming, so memory does not depend on the size of
//! the range). Every chunk's header is checked, every chunk is decompressed to exactly its
//! declared length, and every term's total is checked against the reconstruction.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::Stream;
use futures::TryStreamExt;
use tokio::sync::mpsc;

use crate::cas::CasApi;
use crate::chunk_cache::{CacheWriter, ChunkCache};
use crate::download::frames::{one_frame, FrameError, Frames};
use crate::download::plan::{FetchUnit, LocalChunk, Piece, Segment};
use crate::error::{ClientError, Result};
use crate::http::describe_transport_error;
use crate::retry::Verdict;
use git_xet_core::compression::CompressionScheme;
use git_xet_core::hash::chunk_hash;
use git_xet_core::xorb::{decode_chunk, ChunkHeader, CHUNK_HEADER_LEN};
use git_xet_core::MerkleHash;

/// A chunk ready to be written.
#[derive(Debug)]
pub struct DecodedChunk {
    pub hash: MerkleHash,
    pub data: Bytes,
    /// Bytes of its record in the xorb (header included); 0 when read from a local file.
    pub stored_len: u32,
}

/// Counters shared by all segments of a download.
#[derive(Debug, Default)]
pub struct Counters {
    pub network_bytes: AtomicU64,
    pub cache_bytes: AtomicU64,
    pub local_bytes: AtomicU64,
    /// Cache entries read or written by this download (purged if it fails verification).
    pub cache_paths: std::sync::Mutex<Vec<PathBuf>>,
}

/// What segments need.
pub struct Context {
    pub api: CasApi,
    /// The file and range being downloaded, to ask again for fetch URLs that expired.
    pub file: MerkleHash,
    pub range: Option<(u64, u64)>,
    pub cache: Option<Arc<ChunkCache>>,
    /// Whether ranges are read from `cache` (a retry after a failed verification reads
    /// only the network, but still writes what it fetched, so the chunk store is whole
    /// again afterwards).
    pub read_cache: bool,
    pub sources: Vec<PathBuf>,
    /// Runs of xorb bytes this download shares with others of its batch.
    pub shared: Option<Arc<crate::download::SharedFetches>>,
    pub counters: Counters,
    /// Whether each chunk's hash is computed: a download checks the file hash with them; a
    /// range read into memory has nothing to check them against (a tenth of its CPU).
    pub hash_chunks: bool,
}

pub type ChunkSender = mpsc::Sender<Result<DecodedChunk>>;

/// Why reading records stopped.
enum ReadError {
    /// The stream broke (retry the network; for the cache: damaged).
    Io(String),
    /// The bytes are wrong.
    Corrupt(String),
    /// The receiver is gone (the download was abandoned).
    Closed,
}

/// Produces a segment's chunks into `tx`; the first error is sent too.
pub async fn produce(ctx: Arc<Context>, segment: Segment, tx: ChunkSender) {
    let result = match segment {
        Segment::Local { pieces } => {
            let ctx2 = ctx.clone();
            let tx2 = tx.clone();
            tokio::task::spawn_blocking(move || read_local(&ctx2, pieces, &tx2))
                .await
                .unwrap_or_else(|e| {
                    Err(ClientError::Aborted(format!("local read task failed: {e}")))
                })
        }
        Segment::Fetch { unit, pieces } => fetch_unit(&ctx, &unit, &pieces, &tx).await,
    };
    if let Err(e) = result {
        let _ = tx.send(Err(e)).await;
    }
}

fn read_local(
    ctx: &Context,
    pieces: Vec<(Piece, Vec<LocalChunk>)>,
    tx: &ChunkSender,
) -> Result<()> {
    // Open files with their read position: reused chunks are mostly consecutive, so most
    // reads need no seek.
    let mut files: Vec<Option<(std::fs::File, u64)>> =
        (0..ctx.sources.len()).map(|_| None).collect();
    for (_, chunks) in pieces {
        for c in chunks {
            let path = &ctx.sources[c.source];
            if files[c.source].is_none() {
                let f = std::fs::File::open(path)
                    .map_err(|e| ClientError::io("opening a local source", path, e))?;
                files[c.source] = Some((f, 0));
            }
            let (file, pos) = files[c.source].as_mut().expect("opened");
            let len = c.len as usize;
            // Read into spare capacity: no zeroing of buffers about to be overwritten.
            let mut data = Vec::with_capacity(len);
            let read = (|| {
                if *pos != c.offset {
                    file.seek(SeekFrom::Start(c.offset))?;
                }
                Read::take(&*file, len as u64).read_to_end(&mut data)
            })();
            *pos = c.offset + data.len() as u64;
            read.map_err(|e| ClientError::io("reading a local source", path, e))?;
            let hash = chunk_hash(&data);
            if data.len() != len || hash != c.hash {
                return Err(ClientError::corrupt(
                    format!("reusing {}", path.display()),
                    "the local file changed since it was recorded",
                ));
            }
            ctx.counters
                .local_bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            if tx
                .blocking_send(Ok(DecodedChunk {
                    hash,
                    data: Bytes::from(data),
                    stored_len: 0,
                }))
                .is_err()
            {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Walks records of a unit, emitting those the pieces need, checking each term's length.
struct Emitter<'a> {
    pieces: &'a [Piece],
    /// Index of the next record to read (absolute chunk index in the xorb).
    next: u32,
    /// Records before this index were already emitted by an earlier attempt.
    emitted_upto: u32,
    piece: usize,
    piece_bytes: u64,
    hash_chunks: bool,
}

impl Emitter<'_> {
    fn done(&self) -> bool {
        self.piece >= self.pieces.len()
    }

    /// Handles one record; returns Err on a broken stream or bad data. A chunk stored raw
    /// is `stored` itself: no copy.
    async fn record(
        &mut self,
        header: ChunkHeader,
        stored: Bytes,
        tx: &ChunkSender,
    ) -> std::result::Result<(), ReadError> {
        let index = self.next;
        self.next += 1;
        let Some(piece) = self.pieces.get(self.piece) else {
            return Ok(());
        };
        if index < piece.range.start || index < self.emitted_upto {
            return Ok(());
        }
        let raw = header.scheme == CompressionScheme::None
            && stored.len() == header.uncompressed_len as usize;
        let data = if raw {
            stored
        } else {
            let mut data = Vec::with_capacity(header.uncompressed_len as usize);
            decode_chunk(&header, &stored, &mut data)
                .map_err(|e| ReadError::Corrupt(format!("chunk {index}: {e}")))?;
            Bytes::from(data)
        };
        self.piece_bytes += data.len() as u64;
        let hash = if self.hash_chunks {
            chunk_hash(&data)
        } else {
            MerkleHash::default()
        };
        let chunk = DecodedChunk {
            hash,
            data,
            stored_len: (CHUNK_HEADER_LEN as u32).saturating_add(header.compressed_len),
        };
        tx.send(Ok(chunk)).await.map_err(|_| ReadError::Closed)?;
        self.emitted_upto = index + 1;
        if index + 1 == piece.range.end {
            if self.piece_bytes != u64::from(piece.unpacked) {
                return Err(ReadError::Corrupt(format!(
                    "term {} decodes to {} bytes but the reconstruction says {}",
                    piece.term, self.piece_bytes, piece.unpacked
                )));
            }
            self.piece += 1;
            self.piece_bytes = 0;
        }
        Ok(())
    }
}

/// Reads records from `frames` (which starts at chunk `emitter.next` and holds `len` bytes)
/// until the pieces are satisfied and, when caching, until the end; tees raw bytes to `cache`.
async fn read_records<S>(
    frames: &mut Frames<S>,
    len: u64,
    emitter: &mut Emitter<'_>,
    mut cache: Option<&mut CacheWriter>,
    tx: &ChunkSender,
    counter: &AtomicU64,
) -> std::result::Result<(), ReadError>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let mut consumed = 0u64;
    while consumed < len {
        if emitter.done() && cache.is_none() {
            return Ok(());
        }
        let head: [u8; CHUNK_HEADER_LEN] = frames
            .take(CHUNK_HEADER_LEN)
            .await
            .map_err(|e| ReadError::Io(format!("reading a chunk header: {e}")))?[..]
            .try_into()
            .map_err(|_| ReadError::Io("reading a chunk header: a short read".into()))?;
        let remaining = (len - consumed)
            .saturating_sub(CHUNK_HEADER_LEN as u64)
            .min(usize::MAX as u64) as usize;
        let header = ChunkHeader::parse(&head, remaining)
            .map_err(|e| ReadError::Corrupt(format!("chunk {}: {e}", emitter.next)))?;
        // At most `remaining`: parse checked it.
        let stored = frames
            .take(header.compressed_len as usize)
            .await
            .map_err(|e: FrameError| ReadError::Io(format!("reading chunk data: {e}")))?;
        let n = (CHUNK_HEADER_LEN + stored.len()) as u64;
        consumed += n;
        counter.fetch_add(n, Ordering::Relaxed);
        if let Some(c) = cache.as_deref_mut() {
            if c.write_record(&head, &stored).is_err() {
                cache = None; // the cache is best effort
            }
        }
        emitter.record(header, stored, tx).await?;
    }
    if !emitter.done() {
        return Err(ReadError::Corrupt(format!(
            "the range ended at chunk {} before the term's last chunk",
            emitter.next
        )));
    }
    Ok(())
}

async fn fetch_unit(
    ctx: &Context,
    unit: &FetchUnit,
    pieces: &[Piece],
    tx: &ChunkSender,
) -> Result<()> {
    let what = format!(
        "downloading chunks {}..{} of xorb {}",
        unit.chunks.start, unit.chunks.end, unit.xorb
    );
    let mut emitter = Emitter {
        pieces,
        next: 0,
        emitted_upto: 0,
        piece: 0,
        piece_bytes: 0,
        hash_chunks: ctx.hash_chunks,
    };

    if let Some(cache) = ctx.cache.as_ref().filter(|_| ctx.read_cache) {
        let last = pieces[pieces.len() - 1].range.end;
        let span = git_xet_core::reconstruction::ChunkRange::new(pieces[0].range.start, last);
        if let Some(hit) = cache.get(&unit.xorb, span) {
            // A missing file means another process evicted the entry meanwhile: a miss.
            if let Ok(file) = tokio::fs::File::open(&hit.path).await {
                let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
                let blocks = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024);
                let mut reader = Frames::new(blocks);
                emitter.next = hit.range.start;
                let paths = &ctx.counters.cache_paths;
                paths
                    .lock()
                    .expect("cache paths lock")
                    .push(hit.path.clone());
                let counter = &ctx.counters.cache_bytes;
                match read_records(&mut reader, len, &mut emitter, None, tx, counter).await {
                    Ok(()) | Err(ReadError::Closed) => return Ok(()),
                    Err(ReadError::Io(e) | ReadError::Corrupt(e)) => {
                        let path = hit.path.display();
                        tracing::warn!("damaged chunk cache entry {path}: {e}; fetching instead");
                        cache.remove(&hit.path);
                    }
                }
            }
        }
    }
    if let Some(shared) = &ctx.shared {
        if let Some(data) = shared.take(&ctx.api, unit).await {
            emitter.next = unit.chunks.start;
            let mut reader = Frames::new(one_frame(data.clone()));
            let counter = &ctx.counters.network_bytes;
            let len = unit.url_range.len();
            match read_records(&mut reader, len, &mut emitter, None, tx, counter).await {
                Ok(()) => {
                    keep_shared(ctx, unit, &data);
                    return Ok(());
                }
                Err(ReadError::Closed) => return Ok(()),
                Err(ReadError::Corrupt(reason)) => return Err(ClientError::corrupt(&what, reason)),
                Err(ReadError::Io(e)) => tracing::debug!("{what}: {e}; fetching it alone"),
            }
        }
    }
    fetch_from_network(ctx, unit, &mut emitter, tx, &what).await
}

/// Keeps a unit's bytes that came from a shared run in the cache too (the chunk store must
/// hold what any download brought, however it was fetched).
fn keep_shared(ctx: &Context, unit: &FetchUnit, data: &[u8]) {
    let Some(cache) = &ctx.cache else { return };
    if data.len() as u64 != unit.url_range.len() || !cache.accepts(data.len() as u64) {
        return;
    }
    if cache.get(&unit.xorb, unit.chunks).is_some() {
        return;
    }
    let Ok(mut writer) = cache.writer(&unit.xorb, unit.chunks) else {
        return;
    };
    if writer.write(data).is_ok() {
        if let Some(path) = writer.commit(cache) {
            ctx.counters
                .cache_paths
                .lock()
                .expect("cache paths lock")
                .push(path);
        }
    }
}

/// A fresh URL for the same xorb bytes, from a new reconstruction query.
async fn renewed_url(ctx: &Context, unit: &FetchUnit) -> Result<String> {
    let recon = ctx.api.reconstruction(&ctx.file, ctx.range).await?;
    recon
        .fetch_info
        .get(&unit.xorb)
        .and_then(|entries| {
            entries.iter().find(|f| {
                f.range.start <= unit.chunks.start
                    && f.url_range.start <= unit.url_range.start
                    && f.range
                        .contains_range(&git_xet_core::reconstruction::ChunkRange::new(
                            unit.chunks.start,
                            unit.chunks.end,
                        ))
            })
        })
        .map(|f| f.url.clone())
        .ok_or_else(|| {
            ClientError::protocol(
                "renewing an expired fetch URL",
                format!(
                    "the new reconstruction has no fetch info for xorb {}",
                    unit.xorb
                ),
            )
        })
}

async fn fetch_from_network(
    ctx: &Context,
    unit: &FetchUnit,
    emitter: &mut Emitter<'_>,
    tx: &ChunkSender,
    what: &str,
) -> Result<()> {
    let policy = ctx.api.http().policy();
    let started = Instant::now();
    let mut attempts = 0u32;
    let mut url = unit.url.clone();
    let mut renewed = false;
    loop {
        attempts += 1;
        // Restart at the unit's beginning; records already emitted are skipped, not decoded.
        emitter.next = unit.chunks.start;
        let mut cache_writer = match &ctx.cache {
            Some(c) if c.accepts(unit.url_range.len()) => c.writer(&unit.xorb, unit.chunks).ok(),
            _ => None,
        };
        let response = match ctx.api.fetch_range(what, &url, unit.url_range).await {
            Ok(r) => r,
            // Fetch URLs are signed and expire: ask for the reconstruction again, once.
            Err(ClientError::Http {
                status: 401 | 403 | 410,
                ..
            }) if !renewed => {
                renewed = true;
                url = renewed_url(ctx, unit).await?;
                tracing::info!("{what}: the fetch URL expired; using a new one");
                continue;
            }
            Err(e) => return Err(e),
        };
        let stream = response
            .bytes_stream()
            .map_err(|e| std::io::Error::other(describe_transport_error(&e)));
        let mut reader = Frames::new(stream);
        let outcome = read_records(
            &mut reader,
            unit.url_range.len(),
            emitter,
            cache_writer.as_mut(),
            tx,
            &ctx.counters.network_bytes,
        )
        .await;
        let reason = match outcome {
            Ok(()) => {
                if let (Some(w), Some(c)) = (cache_writer, &ctx.cache) {
                    if let Some(path) = w.commit(c) {
                        ctx.counters
                            .cache_paths
                            .lock()
                            .expect("cache paths lock")
                            .push(path);
                    }
                }
                return Ok(());
            }
            Err(ReadError::Closed) => return Ok(()),
            Err(ReadError::Corrupt(reason)) => return Err(ClientError::corrupt(what, reason)),
            Err(ReadError::Io(reason)) => reason,
        };
        match policy.verdict(attempts, started.elapsed(), None) {
            Verdict::RetryAfter(delay) => {
                tracing::warn!("{what}: {reason}; retrying in {:.1}s", delay.as_secs_f64());
                tokio::time::sleep(delay).await;
            }
            Verdict::GiveUp => {
                return Err(ClientError::RetriesExhausted {
                    what: what.to_string(),
                    attempts,
                    elapsed_secs: started.elapsed().as_secs_f64(),
                    last: reason,
                })
            }
        }
    }
}
