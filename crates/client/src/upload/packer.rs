//! Packing new chunks into xorbs: a thread receives chunks in order, compresses them in
//! parallel batches, lays out each xorb's records (see [`body`](super::body): raw chunks
//! stay in the source file, compressed ones go to a staging file, headers and the footer in
//! memory), and at each xorb boundary hands the finished xorb to the uploader.
//!
//! Nothing holds a whole xorb in memory, so several 64 MiB xorbs can be uploading at once
//! while the next is being built without the process growing past a few buffers.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::thread;

use bytes::Bytes;
use tempfile::TempPath;

use crate::error::{ClientError, Result};
use crate::upload::body::{BodyBuilder, StagedXorb};
use crate::upload::uploader::{ShardUpload, Upload};
use git_xet_core::compression::{bg4_recommended, CompressionScheme};
use git_xet_core::xorb::{ChunkHeader, CompressedChunk, XorbFooter, CHUNK_HEADER_LEN};
use git_xet_core::MerkleHash;

/// Chunks queued between the planner and the packer (about 16 MiB).
const QUEUE: usize = 256;
/// Uncompressed bytes compressed together in one parallel batch.
const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Compressed chunks up to this size stay in memory rather than in the staging file.
const SMALL_PAYLOAD: usize = 4096;

/// Where a chunk's bytes can be read again: its offset in the file being uploaded.
#[derive(Debug, Clone)]
pub struct SourceRef {
    pub file: Arc<File>,
    pub offset: u64,
}

pub enum PackerMsg {
    /// The next chunk of the open xorb.
    Chunk {
        hash: MerkleHash,
        data: Bytes,
        source: Option<SourceRef>,
    },
    /// The open xorb is complete; the planner computed its hash.
    Close { hash: MerkleHash },
    /// A shard of xorbs closed before it, to upload once they are stored.
    Shard(ShardUpload),
}

/// Handle to the packing thread.
pub struct Packer {
    tx: Option<mpsc::SyncSender<PackerMsg>>,
    thread: Option<thread::JoinHandle<Result<()>>>,
}

struct Staging {
    writer: BufWriter<File>,
    reader: Arc<File>,
    path: TempPath,
    offset: u64,
}

struct XorbFile {
    body: BodyBuilder,
    staging: Option<Staging>,
    footer: XorbFooter,
}

fn staging_error(dir: &PathBuf) -> impl Fn(std::io::Error) -> ClientError + '_ {
    move |e| ClientError::io("writing a staged xorb", dir, e)
}

impl XorbFile {
    fn new() -> Self {
        XorbFile {
            body: BodyBuilder::default(),
            staging: None,
            footer: XorbFooter::default(),
        }
    }

    fn stage(&mut self, dir: &PathBuf, payload: &[u8]) -> Result<()> {
        if self.staging.is_none() {
            std::fs::create_dir_all(dir)
                .map_err(|e| ClientError::io("creating the staging directory", dir, e))?;
            let tmp = tempfile::Builder::new()
                .prefix("xorb-")
                .suffix(".staging")
                .tempfile_in(dir)
                .map_err(|e| ClientError::io("creating a staging file", dir, e))?;
            let reader = Arc::new(tmp.reopen().map_err(staging_error(dir))?);
            let (file, path) = tmp.into_parts();
            // Small: payloads (larger than this) go straight to the file, uncopied.
            let writer = BufWriter::with_capacity(8 * 1024, file);
            self.staging = Some(Staging {
                writer,
                reader,
                path,
                offset: 0,
            });
        }
        let staging = self.staging.as_mut().expect("just created");
        staging
            .writer
            .write_all(payload)
            .map_err(staging_error(dir))?;
        self.body
            .push_file(&staging.reader, staging.offset, payload.len() as u32);
        staging.offset += payload.len() as u64;
        Ok(())
    }

    fn push(
        &mut self,
        dir: &PathBuf,
        chunk: &PackedChunk,
        source: Option<&SourceRef>,
    ) -> Result<()> {
        let header = ChunkHeader::new(
            chunk.scheme,
            chunk.stored.len(),
            chunk.uncompressed_len as usize,
        );
        self.body.push_mem(&header.to_bytes());
        match source {
            Some(src) if chunk.scheme == CompressionScheme::None => {
                self.body
                    .push_file(&src.file, src.offset, chunk.uncompressed_len)
            }
            _ if chunk.stored.len() <= SMALL_PAYLOAD => self.body.push_mem(&chunk.stored),
            _ => self.stage(dir, &chunk.stored)?,
        }
        let end = self.footer.data_len() as u32 + (CHUNK_HEADER_LEN + chunk.stored.len()) as u32;
        let unpacked = self.footer.unpacked_len() as u32 + chunk.uncompressed_len;
        self.footer.chunk_hashes.push(chunk.hash);
        self.footer.chunk_ends.push(end);
        self.footer.unpacked_ends.push(unpacked);
        Ok(())
    }

    fn finish(mut self, dir: &PathBuf, expected: MerkleHash) -> Result<StagedXorb> {
        self.footer.hash = self.footer.computed_hash();
        if self.footer.hash != expected {
            return Err(ClientError::Aborted(format!(
                "internal error: packed xorb hashes to {} but the planner expected {expected}",
                self.footer.hash
            )));
        }
        let data_len = self.footer.data_len() as u64;
        let mut tail = Vec::with_capacity(XorbFooter::encoded_len(self.footer.num_chunks()) + 4);
        self.footer.write_to(&mut tail);
        self.body.push_mem(&tail);
        let staging = match self.staging {
            Some(mut s) => {
                s.writer.flush().map_err(staging_error(dir))?;
                Some(s.path)
            }
            None => None,
        };
        let num_chunks = self.footer.num_chunks();
        Ok(StagedXorb {
            hash: expected,
            body: Arc::new(self.body.finish(staging)),
            num_chunks,
            data_len,
        })
    }
}

/// Bytes sampled to decide whether a chunk is worth compressing.
const PROBE_LEN: usize = 4096;

/// Compresses one chunk. The spec lets a client choose any scheme; ours is the deployed
/// client's rule, except that a chunk whose first 4 KiB neither LZ4 nor byte grouping would
/// shrink is stored as is without trying the whole chunk. Random or already compressed data
/// then costs a 4 KiB probe instead of a full LZ4 pass (most of the upload CPU otherwise).
/// The xorb hash depends only on the chunks, never on how they are stored.
pub fn compress_chunk(hash: MerkleHash, data: &Bytes) -> PackedChunk {
    if data.len() > 2 * PROBE_LEN {
        let sample = &data[..PROBE_LEN];
        let incompressible = !bg4_recommended(sample)
            && lz4_flex::block::compress(sample).len() * 100 >= sample.len() * 97;
        if incompressible {
            return PackedChunk {
                hash,
                uncompressed_len: data.len() as u32,
                scheme: CompressionScheme::None,
                stored: data.clone(),
            };
        }
    }
    let c = CompressedChunk::new(hash, data);
    let stored = if c.scheme == CompressionScheme::None {
        data.clone()
    } else {
        Bytes::from(c.stored)
    };
    PackedChunk {
        hash,
        uncompressed_len: c.uncompressed_len,
        scheme: c.scheme,
        stored,
    }
}

/// A chunk as it goes into a xorb. Stored raw, `stored` is the input itself (shared, not
/// copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedChunk {
    pub hash: MerkleHash,
    pub uncompressed_len: u32,
    pub scheme: CompressionScheme,
    pub stored: Bytes,
}

/// Batches smaller than this are compressed on the packer's own thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Compresses chunks on all cores (a batch of at least [`PARALLEL_MIN_BYTES`]), keeping
/// their order.
pub fn compress_parallel(chunks: &[(MerkleHash, Bytes)]) -> Vec<PackedChunk> {
    // std reads the cgroup files on every call: once per process is enough.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let bytes: usize = chunks.iter().map(|(_, d)| d.len()).sum();
    // Starting threads costs more than compressing a few chunks.
    let workers = if chunks.len() < 2 || bytes < PARALLEL_MIN_BYTES {
        1
    } else {
        *CORES.get_or_init(|| {
            thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(1, 8)
        })
    };
    if workers == 1 {
        return chunks.iter().map(|(h, d)| compress_chunk(*h, d)).collect();
    }
    let per = chunks.len().div_ceil(workers);
    thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(h, d)| compress_chunk(*h, d))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compression thread panicked"))
            .collect()
    })
}

fn run(
    dir: PathBuf,
    rx: mpsc::Receiver<PackerMsg>,
    out: tokio::sync::mpsc::Sender<Upload>,
) -> Result<()> {
    let mut batch: Vec<(MerkleHash, Bytes)> = Vec::new();
    let mut sources: Vec<Option<SourceRef>> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut open: Option<XorbFile> = None;
    let flush = |batch: &mut Vec<(MerkleHash, Bytes)>,
                 sources: &mut Vec<Option<SourceRef>>,
                 open: &mut Option<XorbFile>|
     -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let xorb = open.get_or_insert_with(XorbFile::new);
        for (chunk, source) in compress_parallel(batch).iter().zip(sources.iter()) {
            xorb.push(&dir, chunk, source.as_ref())?;
        }
        batch.clear();
        sources.clear();
        Ok(())
    };
    loop {
        let msg = match rx.try_recv() {
            Ok(msg) => msg,
            Err(mpsc::TryRecvError::Empty) => {
                // Nothing waiting: compress what came now, not at the xorb's close, which
                // the session's registration waits for (a session of small files
                // closes its one xorb right before registering). A packer that is the
                // bottleneck rarely finds its queue empty and keeps compressing in
                // parallel batches.
                flush(&mut batch, &mut sources, &mut open)?;
                batch_bytes = 0;
                match rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        match msg {
            PackerMsg::Chunk { hash, data, source } => {
                batch_bytes += data.len();
                batch.push((hash, data));
                sources.push(source);
                if batch_bytes >= BATCH_BYTES {
                    flush(&mut batch, &mut sources, &mut open)?;
                    batch_bytes = 0;
                }
            }
            PackerMsg::Close { hash } => {
                flush(&mut batch, &mut sources, &mut open)?;
                batch_bytes = 0;
                let Some(xorb) = open.take() else { continue };
                let staged = xorb.finish(&dir, hash)?;
                if out.blocking_send(Upload::Xorb(staged)).is_err() {
                    return Err(ClientError::Aborted("the xorb uploader stopped".into()));
                }
            }
            PackerMsg::Shard(shard) => {
                if out.blocking_send(Upload::Shard(shard)).is_err() {
                    return Err(ClientError::Aborted("the xorb uploader stopped".into()));
                }
            }
        }
    }
    Ok(())
}

impl Packer {
    /// Starts the packing thread; finished xorbs go to `out`.
    pub fn start(staging_dir: PathBuf, out: tokio::sync::mpsc::Sender<Upload>) -> Self {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let thread = thread::Builder::new()
            .name("xet-packer".into())
            .spawn(move || run(staging_dir, rx, out))
            .expect("spawning the packer thread");
        Packer {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Queues a message; fails when the packer has stopped (its error comes from `finish`).
    pub fn send(&self, msg: PackerMsg) -> Result<()> {
        let tx = self.tx.as_ref().expect("packer already finished");
        tx.send(msg)
            .map_err(|_| ClientError::Aborted("the xorb packer stopped".into()))
    }

    /// Waits for everything queued to be packed and handed on.
    pub fn finish(&mut self) -> Result<()> {
        self.tx.take();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| ClientError::Aborted("the xorb packer panicked".into()))?,
            None => Ok(()),
        }
    }
}

/// Where the planner sends chunks and xorb boundaries (the packer, or a test double).
pub trait PackSink: Send {
    fn send(&mut self, msg: PackerMsg) -> Result<()>;
    /// Waits until everything sent has been handed on.
    fn finish(&mut self) -> Result<()>;
}

impl PackSink for Packer {
    fn send(&mut self, msg: PackerMsg) -> Result<()> {
        Packer::send(self, msg)
    }

    fn finish(&mut self) -> Result<()> {
        Packer::finish(self)
    }
}

impl Drop for Packer {
    fn drop(&mut self) {
        self.tx.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::{chunk_hash, xorb_hash};
    use git_xet_core::xorb::validate_xorb;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn packs_valid_xorbs_from_memory_staging_and_source_files() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut packer = Packer::start(dir.path().to_path_buf(), tx);
        // The "file being uploaded", for chunks stored raw by reference.
        let source_bytes = noise(50 * 20_000, 9);
        let mut source = tempfile::NamedTempFile::new().unwrap();
        source.write_all(&source_bytes).unwrap();
        let source_file = Arc::new(source.reopen().unwrap());
        let text = b"all work and no play makes jack a dull boy ".repeat(500);

        let mut expected = Vec::new();
        for kind in 0..3u8 {
            let chunks: Vec<(Vec<u8>, Option<SourceRef>)> = (0..50usize)
                .map(|i| match kind {
                    // Compressible: small ones stay in memory, larger ones are staged.
                    0 => (text[..1000 + i * 400].to_vec(), None),
                    // Random, from the source file: referenced, not copied.
                    1 => {
                        let at = i * 20_000;
                        let r = SourceRef {
                            file: source_file.clone(),
                            offset: at as u64,
                        };
                        (source_bytes[at..at + 20_000].to_vec(), Some(r))
                    }
                    // Random, from a stream: staged.
                    _ => (noise(15_000, i as u64), None),
                })
                .collect();
            for (c, src) in &chunks {
                let msg = PackerMsg::Chunk {
                    hash: chunk_hash(c),
                    data: Bytes::from(c.clone()),
                    source: src.clone(),
                };
                packer.send(msg).unwrap();
            }
            let hash = xorb_hash(chunks.iter().map(|(c, _)| (chunk_hash(c), c.len() as u64)));
            packer.send(PackerMsg::Close { hash }).unwrap();
            expected.push(hash);
        }
        // Nothing open: ignored.
        packer
            .send(PackerMsg::Close {
                hash: MerkleHash::ZERO,
            })
            .unwrap();
        packer.finish().unwrap();
        for hash in expected {
            let Upload::Xorb(staged) = rx.try_recv().unwrap() else {
                panic!("a xorb")
            };
            assert_eq!(staged.hash, hash);
            let bytes = staged.body.to_vec().unwrap();
            assert_eq!(bytes.len() as u64, staged.body.len());
            let footer = validate_xorb(&bytes).unwrap();
            assert_eq!(footer.hash, hash);
            assert_eq!(staged.num_chunks, 50);
        }
        assert!(rx.try_recv().is_err());
        // Staging files go away with the xorbs.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn incompressible_chunks_are_stored_raw_and_others_compressed_as_deployed() {
        let random = git_xet_core::compression::bg4_split(
            &(0..60_000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect::<Vec<_>>(),
        );
        let mut state = 7u64;
        let noise: Vec<u8> = (0..60_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        let deployed = |data: &[u8]| {
            let c = CompressedChunk::from_data(data);
            (c.scheme, c.stored)
        };
        let ours = |data: &[u8]| {
            let c = compress_chunk(chunk_hash(data), &Bytes::copy_from_slice(data));
            (c.scheme, c.stored.to_vec())
        };
        assert_eq!(ours(&noise), (CompressionScheme::None, noise.clone()));
        let text = b"all work and no play makes jack a dull boy ".repeat(1500);
        assert_eq!(ours(&text), deployed(&text));
        assert_eq!(ours(&random), deployed(&random));
        // Compressible after a random start: stored raw, still a valid choice.
        let mut mixed = noise[..5000].to_vec();
        mixed.extend_from_slice(&text[..50_000]);
        let c = compress_chunk(chunk_hash(&mixed), &Bytes::from(mixed.clone()));
        let mut back = Vec::new();
        git_xet_core::compression::decompress_into(c.scheme, &c.stored, mixed.len(), &mut back)
            .unwrap();
        assert_eq!(back, mixed);
    }

    #[test]
    fn a_wrong_hash_stops_the_packer() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::channel(8);
        let mut packer = Packer::start(dir.path().to_path_buf(), tx);
        packer
            .send(PackerMsg::Chunk {
                hash: chunk_hash(b"x"),
                data: Bytes::from_static(b"x"),
                source: None,
            })
            .unwrap();
        packer
            .send(PackerMsg::Close {
                hash: MerkleHash::ZERO,
            })
            .unwrap();
        assert!(packer.finish().is_err());
    }
}
