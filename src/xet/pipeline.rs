//! Chunking and hashing a stream with both cores busy and bounded memory.
//!
//! A reader thread fills pooled buffers and finds chunk boundaries; chunks are zero-copy
//! slices of those buffers (a chunk that straddles two buffers is copied once). The calling
//! thread hashes chunks and builds the file's Merkle tree while the reader moves ahead; an
//! optional third thread computes the sha256 of the raw buffers. Buffers return to the pool
//! when the last chunk referencing them is dropped, so memory stays at a few buffers however
//! large the input.

use std::io::Read;
use std::sync::mpsc;
use std::thread;

use bytes::Bytes;
use sha2::Digest;

use crate::xet::chunker::Chunker;
use crate::xet::hash::{chunk_hash, file_hash_from_root, MerkleHash};
use crate::xet::merkle::MerkleBuilder;

/// Size of each read buffer.
pub const READ_BUFFER_SIZE: usize = 4 * 1024 * 1024;
/// Chunks queued between the reader and the hasher.
const CHUNK_QUEUE: usize = 64;

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

/// A buffer lent out by the pool; goes back when dropped.
struct PooledBuffer {
    buf: Vec<u8>,
    len: usize,
    home: mpsc::Sender<Vec<u8>>,
}

impl AsRef<[u8]> for PooledBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        let _ = self.home.send(std::mem::take(&mut self.buf));
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reader thread body: read, find boundaries, send chunks (and raw buffers for sha256).
fn read_and_chunk<R: Read>(
    mut reader: R,
    chunks: mpsc::SyncSender<Bytes>,
    raw: Option<mpsc::SyncSender<Bytes>>,
) -> std::io::Result<()> {
    let (home, pool) = mpsc::channel::<Vec<u8>>();
    let mut chunker = Chunker::new();
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let mut buf = pool.try_recv().unwrap_or_else(|_| vec![0u8; READ_BUFFER_SIZE]);
        let n = fill(&mut reader, &mut buf)?;
        if n == 0 {
            break;
        }
        let shared = Bytes::from_owner(PooledBuffer { buf, len: n, home: home.clone() });
        if let Some(raw) = &raw {
            if raw.send(shared.clone()).is_err() {
                return Ok(());
            }
        }
        let mut start = 0;
        while let Some(len) = chunker.next_boundary(&shared[start..]) {
            let end = start + len;
            let chunk = if carry.is_empty() {
                shared.slice(start..end)
            } else {
                carry.extend_from_slice(&shared[start..end]);
                Bytes::from(std::mem::take(&mut carry))
            };
            if chunks.send(chunk).is_err() {
                return Ok(()); // the consumer stopped; it reports why
            }
            start = end;
        }
        carry.extend_from_slice(&shared[start..]);
        if n < READ_BUFFER_SIZE {
            break;
        }
    }
    if chunker.finish().is_some() {
        let _ = chunks.send(Bytes::from(carry));
    }
    Ok(())
}

/// Chunks and hashes everything `reader` yields, calling `sink` with each chunk in order.
/// Returns the file hash, size and (when asked) sha256. If `sink` fails, reading stops and
/// its error is returned.
pub fn chunk_and_hash<R, E>(
    reader: R,
    want_sha256: bool,
    mut sink: impl FnMut(HashedChunk) -> Result<(), E>,
) -> Result<StreamSummary, PipelineError<E>>
where
    R: Read + Send,
{
    thread::scope(|scope| {
        let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Bytes>(CHUNK_QUEUE);
        let (raw_tx, raw_rx) = if want_sha256 {
            let (tx, rx) = mpsc::sync_channel::<Bytes>(2);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let reader_thread = scope.spawn(move || read_and_chunk(reader, chunk_tx, raw_tx));
        let sha_thread = raw_rx.map(|rx| {
            scope.spawn(move || {
                let mut sha = sha2::Sha256::new();
                for buf in rx {
                    sha.update(&buf);
                }
                <[u8; 32]>::from(sha.finalize())
            })
        });

        let mut merkle = MerkleBuilder::new();
        let mut size = 0u64;
        let mut sink_error = None;
        for data in chunk_rx.iter() {
            let hash = chunk_hash(&data);
            merkle.push(hash, data.len() as u64);
            size += data.len() as u64;
            if let Err(e) = sink(HashedChunk { hash, data }) {
                sink_error = Some(e);
                break;
            }
        }
        // Dropping the receiver (end of scope for chunk_rx) unblocks the reader on early exit.
        drop(chunk_rx);
        let read_result = reader_thread.join().expect("reader thread panicked");
        let sha256 = sha_thread.map(|t| t.join().expect("sha256 thread panicked"));
        if let Some(e) = sink_error {
            return Err(PipelineError::Sink(e));
        }
        read_result?;
        let num_chunks = merkle.len();
        Ok(StreamSummary {
            file_hash: file_hash_from_root(num_chunks, merkle.finish()),
            size,
            num_chunks,
            sha256,
        })
    })
}

/// File hash (and optionally sha256) of everything `reader` yields.
pub fn hash_stream<R: Read + Send>(reader: R, want_sha256: bool) -> std::io::Result<StreamSummary> {
    chunk_and_hash(reader, want_sha256, |_| Ok::<(), std::convert::Infallible>(())).map_err(|e| match e {
        PipelineError::Read(e) => e,
        PipelineError::Sink(never) => match never {},
    })
}
