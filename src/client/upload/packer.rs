//! Packing new chunks into xorbs: a thread receives chunks in order, compresses them in
//! parallel batches, appends the records to a staging file, and at each xorb boundary writes
//! the footer and hands the finished file to the uploader.
//!
//! Xorbs are staged on disk, not in memory, so that several 64 MiB xorbs can be uploading at
//! once while the next is being built without the process growing past a few buffers.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

use bytes::Bytes;
use tempfile::{NamedTempFile, TempPath};

use crate::client::error::{ClientError, Result};
use crate::xet::compression::{bg4_recommended, CompressionScheme};
use crate::xet::xorb::{ChunkHeader, CompressedChunk, XorbFooter};
use crate::xet::MerkleHash;

/// Chunks queued between the planner and the packer (about 16 MiB).
const QUEUE: usize = 256;
/// Uncompressed bytes compressed together in one parallel batch.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

pub enum PackerMsg {
    /// The next chunk of the open xorb.
    Chunk { hash: MerkleHash, data: Bytes },
    /// The open xorb is complete; the planner computed its hash.
    Close { hash: MerkleHash },
}

/// A serialized xorb waiting in the staging directory (deleted when dropped).
#[derive(Debug)]
pub struct StagedXorb {
    pub hash: MerkleHash,
    pub path: TempPath,
    pub len: u64,
    pub num_chunks: usize,
}

/// Handle to the packing thread.
pub struct Packer {
    tx: Option<mpsc::SyncSender<PackerMsg>>,
    thread: Option<thread::JoinHandle<Result<()>>>,
}

struct XorbFile {
    file: BufWriter<NamedTempFile>,
    footer: XorbFooter,
}

impl XorbFile {
    fn create(dir: &PathBuf) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ClientError::io("creating the staging directory", dir, e))?;
        let file = tempfile::Builder::new()
            .prefix("xorb-")
            .suffix(".staging")
            .tempfile_in(dir)
            .map_err(|e| ClientError::io("creating a staging file", dir, e))?;
        Ok(XorbFile {
            file: BufWriter::with_capacity(1 << 20, file),
            footer: XorbFooter::default(),
        })
    }

    fn push(&mut self, chunk: &CompressedChunk) -> Result<()> {
        let header = ChunkHeader::new(
            chunk.scheme,
            chunk.stored.len(),
            chunk.uncompressed_len as usize,
        );
        let path = self.file.get_ref().path().to_path_buf();
        let write_err = |e| ClientError::io("writing a staged xorb", &path, e);
        self.file.write_all(&header.to_bytes()).map_err(write_err)?;
        self.file.write_all(&chunk.stored).map_err(write_err)?;
        let end = self.footer.data_len() as u32 + chunk.record_len() as u32;
        let unpacked = self.footer.unpacked_len() as u32 + chunk.uncompressed_len;
        self.footer.chunk_hashes.push(chunk.hash);
        self.footer.chunk_ends.push(end);
        self.footer.unpacked_ends.push(unpacked);
        Ok(())
    }

    fn finish(mut self, expected: MerkleHash) -> Result<StagedXorb> {
        self.footer.hash = self.footer.computed_hash();
        if self.footer.hash != expected {
            return Err(ClientError::Aborted(format!(
                "internal error: packed xorb hashes to {} but the planner expected {expected}",
                self.footer.hash
            )));
        }
        let mut tail = Vec::with_capacity(XorbFooter::encoded_len(self.footer.num_chunks()) + 4);
        self.footer.write_to(&mut tail);
        let file = self.file.get_ref().path().to_path_buf();
        self.file
            .write_all(&tail)
            .map_err(|e| ClientError::io("writing a staged xorb", &file, e))?;
        let temp = self
            .file
            .into_inner()
            .map_err(|e| ClientError::io("writing a staged xorb", &file, e.into_error()))?;
        let len = (self.footer.data_len() + tail.len()) as u64;
        Ok(StagedXorb {
            hash: expected,
            path: temp.into_temp_path(),
            len,
            num_chunks: self.footer.num_chunks(),
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
pub fn compress_chunk(hash: MerkleHash, data: &[u8]) -> CompressedChunk {
    if data.len() > 2 * PROBE_LEN {
        let sample = &data[..PROBE_LEN];
        let incompressible = !bg4_recommended(sample)
            && lz4_flex::block::compress(sample).len() * 100 >= sample.len() * 97;
        if incompressible {
            return CompressedChunk {
                hash,
                uncompressed_len: data.len() as u32,
                scheme: CompressionScheme::None,
                stored: data.to_vec(),
            };
        }
    }
    CompressedChunk::new(hash, data)
}

/// Compresses chunks on all cores, keeping their order.
pub fn compress_parallel(chunks: &[(MerkleHash, Bytes)]) -> Vec<CompressedChunk> {
    let workers = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    if chunks.len() < 2 || workers == 1 {
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
    out: tokio::sync::mpsc::Sender<StagedXorb>,
) -> Result<()> {
    let mut batch: Vec<(MerkleHash, Bytes)> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut open: Option<XorbFile> = None;
    let flush = |batch: &mut Vec<(MerkleHash, Bytes)>, open: &mut Option<XorbFile>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        if open.is_none() {
            *open = Some(XorbFile::create(&dir)?);
        }
        let xorb = open.as_mut().expect("just opened");
        for chunk in compress_parallel(batch) {
            xorb.push(&chunk)?;
        }
        batch.clear();
        Ok(())
    };
    for msg in rx {
        match msg {
            PackerMsg::Chunk { hash, data } => {
                batch_bytes += data.len();
                batch.push((hash, data));
                if batch_bytes >= BATCH_BYTES {
                    flush(&mut batch, &mut open)?;
                    batch_bytes = 0;
                }
            }
            PackerMsg::Close { hash } => {
                flush(&mut batch, &mut open)?;
                batch_bytes = 0;
                let Some(xorb) = open.take() else { continue };
                let staged = xorb.finish(hash)?;
                if out.blocking_send(staged).is_err() {
                    return Err(ClientError::Aborted("the xorb uploader stopped".into()));
                }
            }
        }
    }
    Ok(())
}

impl Packer {
    /// Starts the packing thread; finished xorbs go to `out`.
    pub fn start(staging_dir: PathBuf, out: tokio::sync::mpsc::Sender<StagedXorb>) -> Self {
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
    use crate::xet::hash::{chunk_hash, xorb_hash};
    use crate::xet::xorb::validate_xorb;

    #[test]
    fn packs_valid_xorbs_at_each_close() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut packer = Packer::start(dir.path().to_path_buf(), tx);
        let mut expected = Vec::new();
        for x in 0..2u8 {
            let chunks: Vec<Vec<u8>> = (0..50u8)
                .map(|i| vec![x ^ i; 1000 + i as usize * 37])
                .collect();
            for c in &chunks {
                packer
                    .send(PackerMsg::Chunk {
                        hash: chunk_hash(c),
                        data: Bytes::from(c.clone()),
                    })
                    .unwrap();
            }
            let hash = xorb_hash(chunks.iter().map(|c| (chunk_hash(c), c.len() as u64)));
            packer.send(PackerMsg::Close { hash }).unwrap();
            expected.push(hash);
        }
        packer
            .send(PackerMsg::Close {
                hash: MerkleHash::ZERO,
            })
            .unwrap(); // nothing open: ignored
        packer.finish().unwrap();
        for hash in expected {
            let staged = rx.try_recv().unwrap();
            assert_eq!(staged.hash, hash);
            let bytes = std::fs::read(&staged.path).unwrap();
            assert_eq!(bytes.len() as u64, staged.len);
            let footer = validate_xorb(&bytes).unwrap();
            assert_eq!(footer.hash, hash);
            assert_eq!(staged.num_chunks, 50);
        }
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn incompressible_chunks_are_stored_raw_and_others_compressed_as_deployed() {
        let random = crate::xet::compression::bg4_split(
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
        let c = compress_chunk(chunk_hash(&noise), &noise);
        assert_eq!(c.scheme, CompressionScheme::None);
        assert_eq!(c.stored, noise);
        let text = b"all work and no play makes jack a dull boy ".repeat(1500);
        assert_eq!(
            compress_chunk(chunk_hash(&text), &text),
            CompressedChunk::from_data(&text)
        );
        assert_eq!(
            compress_chunk(chunk_hash(&random), &random),
            CompressedChunk::from_data(&random)
        );
        // Compressible after a random start: stored raw, still a valid choice.
        let mut mixed = noise[..5000].to_vec();
        mixed.extend_from_slice(&text[..50_000]);
        let c = compress_chunk(chunk_hash(&mixed), &mixed);
        let mut back = Vec::new();
        crate::xet::compression::decompress_into(c.scheme, &c.stored, mixed.len(), &mut back)
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
