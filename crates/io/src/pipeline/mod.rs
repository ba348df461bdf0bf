//! Chunking and hashing a stream with both cores busy and bounded memory.
//!
//! A chunker thread takes the input block by block and finds chunk boundaries (with three
//! cores or more, a helper cuts the second half of each block ahead: [`cutting`]); chunks are
//! zero-copy slices of those blocks (a chunk that straddles two blocks is copied once). The
//! calling thread hashes chunks and builds the file's Merkle tree while the chunker moves
//! ahead; an optional thread computes the sha256 of the raw blocks. Blocks that are read (not
//! mapped) are read on a thread of their own a few blocks ahead, so the copy out of the page
//! cache overlaps the chunking instead of adding to it.
//!
//! Blocks come from pooled `read()` buffers, or, for regular files the caller lets map (see
//! [`Mapper`]: only files git-xet owns), from read-only memory mappings of consecutive
//! windows, which saves copying every byte out of the page cache. A block is released
//! (buffer back to the pool, window unmapped) when the last chunk referencing it is dropped,
//! so memory stays at a few blocks however large the input.
//!
//! [`ChunkFeed`] does the same for bytes the caller is handed piece by piece (a clean filter
//! reading git's pipe), keeping only each chunk's hash and size.

mod blocks;
mod cutting;

use std::io::Read;
use std::sync::mpsc;
use std::thread;

use bytes::Bytes;
use sha2::Digest;

use crate::platform::mmap::Mapper;
use blocks::{
    BlockSource, ChannelBlocks, FileBlocks, MappedBlocks, PooledBuffer, ReadAhead, ReadBlocks,
};
pub use cutting::SPLIT_CHUNKING_ENV;
use cutting::{read_and_chunk, HalfCutter};
use git_xet_core::hash::{chunk_hash, file_hash_from_root, MerkleHash};
use git_xet_core::merkle::MerkleBuilder;

/// Size of each read buffer.
pub const READ_BUFFER_SIZE: usize = 4 * 1024 * 1024;
/// Size of each mapped window of a regular file (a multiple of the page size).
const MAP_WINDOW_SIZE: usize = 8 * 1024 * 1024;
/// Blocks read ahead of the chunker.
const READ_AHEAD_BLOCKS: usize = 2;
/// Chunks queued between the reader and the hasher.
const CHUNK_QUEUE: usize = 64;
/// Regular files up to this size are chunked and hashed on the calling thread.
const INLINE_MAX_BYTES: u64 = 1 << 20;

/// One chunk of the input, hashed.
#[derive(Debug, Clone)]
pub struct HashedChunk {
    pub hash: MerkleHash,
    pub data: Bytes,
}

/// What the pipeline learned about the whole input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSummary {
    pub file_hash: MerkleHash,
    pub size: u64,
    pub num_chunks: u64,
    pub sha256: Option<[u8; 32]>,
}

/// Why the pipeline stopped early.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError<E> {
    #[error("reading input: {0}")]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Sink(E),
}

/// Every chunk (hash, size) of an input, and its summary (without sha256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedInput {
    pub summary: StreamSummary,
    pub chunks: Vec<(MerkleHash, u32)>,
}

/// A chunk list stops being kept past this many chunks (about 256 GiB of input, 150 MiB of
/// list): [`ChunkFeed::finish`] then returns `None`.
const MAX_FED_CHUNKS: usize = 1 << 22;

/// Chunks bytes that arrive piece by piece from elsewhere (say, the content git streams to a
/// clean filter) on threads of its own, so the caller only copies each piece once. Inputs
/// shorter than one block ([`READ_BUFFER_SIZE`]) are never chunked: they are cheap to chunk
/// again when needed, and [`ChunkFeed::finish`] returns `None` for them.
pub struct ChunkFeed {
    block: Vec<u8>,
    pool: mpsc::Receiver<Vec<u8>>,
    home: mpsc::Sender<Vec<u8>>,
    worker: Option<FeedWorker>,
}

struct FeedWorker {
    blocks: mpsc::SyncSender<Bytes>,
    done: thread::JoinHandle<Option<ChunkedInput>>,
}

impl FeedWorker {
    fn start() -> FeedWorker {
        let (blocks, rx) = mpsc::sync_channel::<Bytes>(2);
        let done = thread::spawn(move || {
            let mut chunks = Vec::new();
            let summary = run(ChannelBlocks(rx), false, |c| {
                if chunks.len() == MAX_FED_CHUNKS {
                    return Err(());
                }
                chunks.push((c.hash, c.data.len() as u32));
                Ok(())
            })
            .ok()?;
            Some(ChunkedInput { summary, chunks })
        });
        FeedWorker { blocks, done }
    }
}

impl Default for ChunkFeed {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkFeed {
    pub fn new() -> Self {
        let (home, pool) = mpsc::channel();
        ChunkFeed {
            block: Vec::new(),
            pool,
            home,
            worker: None,
        }
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.block.capacity() == 0 && self.worker.is_some() {
                self.block = self.pool.try_recv().unwrap_or_default();
                self.block.clear();
                self.block.reserve_exact(READ_BUFFER_SIZE);
            }
            let take = (READ_BUFFER_SIZE - self.block.len()).min(data.len());
            self.block.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.block.len() == READ_BUFFER_SIZE {
                self.send_block();
            }
        }
    }

    fn send_block(&mut self) {
        let buf = std::mem::take(&mut self.block);
        let len = buf.len();
        let block = Bytes::from_owner(PooledBuffer {
            buf,
            len,
            home: self.home.clone(),
        });
        let worker = self.worker.get_or_insert_with(FeedWorker::start);
        // A worker that stopped early (too many chunks) makes `finish` return None.
        let _ = worker.blocks.send(block);
    }

    /// The chunks of everything fed, or `None` if the input was shorter than one block.
    pub fn finish(mut self) -> Option<ChunkedInput> {
        self.worker.as_ref()?;
        if !self.block.is_empty() {
            self.send_block();
        }
        let worker = self.worker.take()?;
        drop(worker.blocks);
        worker.done.join().ok().flatten()
    }
}

/// Chunks and hashes everything `reader` yields, calling `sink` with each chunk in order.
/// Returns the file hash, size and (when asked) sha256. If `sink` fails, reading stops and
/// its error is returned.
pub fn chunk_and_hash<R, E>(
    reader: R,
    want_sha256: bool,
    sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>>
where
    R: Read + Send,
{
    run_reading_ahead(ReadBlocks::new(reader), want_sha256, sink)
}

/// Like [`chunk_and_hash`] for a file, read from its start: a regular file is mapped window
/// by window when `mapper` maps (the caller vouched for the file: see [`Mapper::new`]), else
/// read with positioned reads, and fails with `UnexpectedEof` if it shrinks meanwhile;
/// anything else (pipes, devices) is read as a stream.
pub fn chunk_and_hash_file<E>(
    file: &std::fs::File,
    mapper: Mapper,
    want_sha256: bool,
    sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return run_reading_ahead(ReadBlocks::new(file), want_sha256, sink);
    }
    let len = meta.len();
    match (mapper.maps(), len <= INLINE_MAX_BYTES) {
        (true, inline) => {
            let blocks = MappedBlocks::new(mapper, file, len);
            if inline {
                run_inline(blocks, want_sha256, sink)
            } else {
                run(blocks, want_sha256, sink)
            }
        }
        (false, true) => run_inline(FileBlocks::new(file, len), want_sha256, sink),
        (false, false) => run_reading_ahead(FileBlocks::new(file, len), want_sha256, sink),
    }
}

/// [`run`] with the source read on a thread of its own (see [`ReadAhead`]).
fn run_reading_ahead<E>(
    source: impl BlockSource + Send,
    want_sha256: bool,
    sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>> {
    thread::scope(|scope| run(ReadAhead::start(scope, source), want_sha256, sink))
}

fn run<E>(
    source: impl BlockSource + Send,
    want_sha256: bool,
    sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>> {
    thread::scope(|scope| {
        let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Bytes>(CHUNK_QUEUE);
        let (raw_tx, raw_rx) = if want_sha256 {
            let (tx, rx) = mpsc::sync_channel::<Bytes>(2);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let helper = cutting::helper_pays().then(|| HalfCutter::start(scope));
        let reader_thread = scope.spawn(move || {
            read_and_chunk(
                source,
                helper.as_ref(),
                |block| {
                    raw_tx
                        .as_ref()
                        .is_none_or(|tx| tx.send(block.clone()).is_ok())
                },
                |chunk| chunk_tx.send(chunk).is_ok(),
            )
            .map(|joined| {
                if helper.is_some() {
                    tracing::debug!("split chunking: the helper's cut joined in {joined} blocks");
                }
            })
        });
        let sha_thread = raw_rx.map(|rx| {
            scope.spawn(move || {
                let mut sha = sha2::Sha256::new();
                for buf in rx {
                    sha.update(&buf);
                }
                <[u8; 32]>::from(sha.finalize())
            })
        });

        let mut consumer = Consumer::new(sink);
        for data in chunk_rx.iter() {
            if !consumer.take(data) {
                break;
            }
        }
        // Dropping the receiver (end of scope for chunk_rx) unblocks the reader on early exit.
        drop(chunk_rx);
        let read_result = reader_thread.join().expect("reader thread panicked");
        let sha256 = sha_thread.map(|t| t.join().expect("sha256 thread panicked"));
        consumer.finish(read_result, sha256)
    })
}

/// The chunk consumer both paths share: hashes each chunk, hands it to the sink, and keeps
/// the file hash, the size and why the sink stopped.
struct Consumer<S, E> {
    sink: S,
    merkle: MerkleBuilder,
    size: u64,
    error: Option<E>,
}

impl<E, S: FnMut(HashedChunk) -> Result<(), E>> Consumer<S, E> {
    fn new(sink: S) -> Self {
        Consumer {
            sink,
            merkle: MerkleBuilder::new(),
            size: 0,
            error: None,
        }
    }

    /// False once the sink failed: nothing more should be read.
    fn take(&mut self, data: Bytes) -> bool {
        let hash = chunk_hash(&data);
        self.merkle.push(hash, data.len() as u64);
        self.size += data.len() as u64;
        match (self.sink)(HashedChunk { hash, data }) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// The sink's error first (it stopped the reading), then the reading's.
    fn finish(
        self,
        read: std::io::Result<()>,
        sha256: Option<[u8; 32]>,
    ) -> Result<StreamSummary, PipelineError<E>> {
        if let Some(e) = self.error {
            return Err(PipelineError::Sink(e));
        }
        read?;
        let num_chunks = self.merkle.len();
        Ok(StreamSummary {
            file_hash: file_hash_from_root(num_chunks, self.merkle.finish()),
            size: self.size,
            num_chunks,
            sha256,
        })
    }
}

/// [`run`] on the calling thread, for inputs too small to gain from overlapping reading,
/// hashing and the sink: spawning its threads would cost more than the work.
fn run_inline<E>(
    source: impl BlockSource,
    want_sha256: bool,
    sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>> {
    let mut sha = want_sha256.then(sha2::Sha256::new);
    let mut consumer = Consumer::new(sink);
    let read = read_and_chunk(
        source,
        None,
        |block| {
            if let Some(sha) = &mut sha {
                sha.update(block);
            }
            true
        },
        |data| consumer.take(data),
    )
    .map(drop);
    consumer.finish(read, sha.map(|s| <[u8; 32]>::from(s.finalize())))
}

/// File hash (and optionally sha256) of a file, mapped or read as `mapper` says.
pub fn hash_file(
    file: &std::fs::File,
    mapper: Mapper,
    want_sha256: bool,
) -> std::io::Result<StreamSummary> {
    chunk_and_hash_file(file, mapper, want_sha256, |_| {
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|e| match e {
        PipelineError::Read(e) => e,
        PipelineError::Sink(never) => match never {},
    })
}

/// File hash (and optionally sha256) of everything `reader` yields.
pub fn hash_stream<R: Read + Send>(reader: R, want_sha256: bool) -> std::io::Result<StreamSummary> {
    chunk_and_hash(reader, want_sha256, |_| {
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|e| match e {
        PipelineError::Read(e) => e,
        PipelineError::Sink(never) => match never {},
    })
}
