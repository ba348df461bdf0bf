//! Building xorbs within the 64 MiB / 8192-chunk limits.

use crate::compression::{compress, CompressionScheme};
use crate::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS, MAX_XORB_SIZE};
use crate::error::{Result, XorbFull};
use crate::hash::{chunk_hash, MerkleHash};
use crate::xorb::{ChunkHeader, XorbFooter, CHUNK_HEADER_LEN};

/// A chunk ready to go into a xorb: its hash, and its bytes as they will be stored.
/// Compressing is the expensive part of building a xorb, so callers may do it in parallel
/// and hand the results to [`XorbBuilder::push`] in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedChunk {
    pub hash: MerkleHash,
    pub uncompressed_len: u32,
    pub scheme: CompressionScheme,
    pub stored: Vec<u8>,
}

impl CompressedChunk {
    /// Compresses `data` (whose hash is `hash`) with the scheme the deployed client would use.
    pub fn new(hash: MerkleHash, data: &[u8]) -> Self {
        assert!(
            !data.is_empty() && data.len() <= MAX_CHUNK_SIZE,
            "chunks are 1..=128 KiB"
        );
        let (scheme, stored) = compress(data);
        CompressedChunk {
            hash,
            uncompressed_len: data.len() as u32,
            scheme,
            stored,
        }
    }

    /// Hashes and compresses `data`.
    pub fn from_data(data: &[u8]) -> Self {
        Self::new(chunk_hash(data), data)
    }

    /// Size of this chunk's record in a xorb.
    pub fn record_len(&self) -> usize {
        CHUNK_HEADER_LEN + self.stored.len()
    }
}

/// Accumulates chunk records and the footer; refuses a chunk that would break a limit.
#[derive(Debug, Default)]
pub struct XorbBuilder {
    data: Vec<u8>,
    footer: XorbFooter,
}

/// A finished xorb: its hash, its bytes, and the footer describing them.
#[derive(Debug, Clone)]
pub struct SerializedXorb {
    pub hash: MerkleHash,
    pub bytes: Vec<u8>,
    pub footer: XorbFooter,
}

impl SerializedXorb {
    pub fn num_chunks(&self) -> usize {
        self.footer.num_chunks()
    }

    /// Total uncompressed bytes of its chunks.
    pub fn unpacked_len(&self) -> u64 {
        self.footer.unpacked_len()
    }
}

impl XorbBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn num_chunks(&self) -> usize {
        self.footer.num_chunks()
    }

    pub fn is_empty(&self) -> bool {
        self.num_chunks() == 0
    }

    /// Uncompressed bytes so far.
    pub fn unpacked_len(&self) -> u64 {
        self.footer.unpacked_len()
    }

    /// Serialized size so far, footer and trailer included.
    pub fn serialized_len(&self) -> usize {
        self.data.len() + XorbFooter::encoded_len(self.num_chunks()) + 4
    }

    /// Whether one more chunk whose record is `record_len` bytes keeps the xorb in bounds.
    pub fn fits(&self, record_len: usize) -> bool {
        let n = self.num_chunks() + 1;
        n <= MAX_XORB_CHUNKS
            && self.data.len() + record_len + XorbFooter::encoded_len(n) + 4 <= MAX_XORB_SIZE
    }

    /// Appends a chunk; fails without changing anything if it would break a limit.
    pub fn push(&mut self, chunk: &CompressedChunk) -> Result<()> {
        if !self.fits(chunk.record_len()) {
            return Err(XorbFull {
                chunks: self.num_chunks(),
                bytes: self.serialized_len(),
                record_len: chunk.record_len(),
            }
            .into());
        }
        let header = ChunkHeader::new(
            chunk.scheme,
            chunk.stored.len(),
            chunk.uncompressed_len as usize,
        );
        self.data.extend_from_slice(&header.to_bytes());
        self.data.extend_from_slice(&chunk.stored);
        self.footer.chunk_hashes.push(chunk.hash);
        self.footer.chunk_ends.push(self.data.len() as u32);
        let unpacked = self.footer.unpacked_len() as u32 + chunk.uncompressed_len;
        self.footer.unpacked_ends.push(unpacked);
        Ok(())
    }

    /// Hashes, compresses and appends raw chunk bytes; returns the chunk hash.
    pub fn push_data(&mut self, data: &[u8]) -> Result<MerkleHash> {
        let chunk = CompressedChunk::from_data(data);
        self.push(&chunk)?;
        Ok(chunk.hash)
    }

    /// Computes the xorb hash and writes the footer.
    pub fn finish(self) -> SerializedXorb {
        let XorbBuilder {
            mut data,
            mut footer,
        } = self;
        footer.hash = footer.computed_hash();
        data.reserve_exact(XorbFooter::encoded_len(footer.num_chunks()) + 4);
        footer.write_to(&mut data);
        SerializedXorb {
            hash: footer.hash,
            bytes: data,
            footer,
        }
    }
}
