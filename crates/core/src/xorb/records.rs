//! Chunk records: the 8-byte header and the stored bytes that follow it.

use crate::compression::{decompress_into, CompressionScheme};
use crate::constants::MAX_CHUNK_SIZE;
use crate::error::{ChunkHeaderError, Result, XorbError};

pub const CHUNK_HEADER_LEN: usize = 8;
const CHUNK_HEADER_VERSION: u8 = 0;

/// A chunk header as stored: version, stored length, scheme, uncompressed length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub version: u8,
    pub compressed_len: u32,
    pub scheme: CompressionScheme,
    pub uncompressed_len: u32,
}

impl ChunkHeader {
    pub fn new(scheme: CompressionScheme, compressed_len: usize, uncompressed_len: usize) -> Self {
        debug_assert!(compressed_len <= MAX_CHUNK_SIZE && uncompressed_len <= MAX_CHUNK_SIZE);
        ChunkHeader {
            version: CHUNK_HEADER_VERSION,
            compressed_len: compressed_len as u32,
            scheme,
            uncompressed_len: uncompressed_len as u32,
        }
    }

    pub fn to_bytes(&self) -> [u8; CHUNK_HEADER_LEN] {
        let c = self.compressed_len.to_le_bytes();
        let u = self.uncompressed_len.to_le_bytes();
        [
            self.version,
            c[0],
            c[1],
            c[2],
            self.scheme as u8,
            u[0],
            u[1],
            u[2],
        ]
    }

    /// Parses and validates a header; `remaining` is how many bytes follow it.
    pub fn parse(
        bytes: &[u8; CHUNK_HEADER_LEN],
        remaining: usize,
    ) -> Result<Self, ChunkHeaderError> {
        let version = bytes[0];
        if version != CHUNK_HEADER_VERSION {
            return Err(ChunkHeaderError::UnknownVersion(version));
        }
        let compressed_len = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], 0]);
        let uncompressed_len = u32::from_le_bytes([bytes[5], bytes[6], bytes[7], 0]);
        let scheme = CompressionScheme::from_u8(bytes[4])
            .ok_or(ChunkHeaderError::UnknownCompression(bytes[4]))?;
        if uncompressed_len == 0 || uncompressed_len as usize > MAX_CHUNK_SIZE {
            return Err(ChunkHeaderError::UncompressedSize(uncompressed_len));
        }
        if compressed_len == 0 || compressed_len as usize > MAX_CHUNK_SIZE {
            return Err(ChunkHeaderError::CompressedSize(compressed_len));
        }
        if compressed_len as usize > remaining {
            return Err(ChunkHeaderError::PastEnd {
                declared: compressed_len,
                remaining,
            });
        }
        Ok(ChunkHeader {
            version,
            compressed_len,
            scheme,
            uncompressed_len,
        })
    }
}

/// One chunk record borrowed from a buffer.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRecord<'a> {
    pub header: ChunkHeader,
    pub stored: &'a [u8],
}

impl ChunkRecord<'_> {
    /// Serialized size: header plus stored bytes.
    pub fn len(&self) -> usize {
        CHUNK_HEADER_LEN + self.stored.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Decompresses the chunk, appending it to `out`.
    pub fn decode_into(&self, out: &mut Vec<u8>) -> Result<()> {
        decode_chunk(&self.header, self.stored, out)
    }
}

/// Decompresses one chunk's stored bytes according to its header.
pub fn decode_chunk(header: &ChunkHeader, stored: &[u8], out: &mut Vec<u8>) -> Result<()> {
    Ok(decompress_into(
        header.scheme,
        stored,
        header.uncompressed_len as usize,
        out,
    )?)
}

/// Iterates over consecutive chunk records, e.g. a byte range fetched from a xorb.
/// Stops after the first error.
pub struct ChunkRecords<'a> {
    bytes: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> ChunkRecords<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ChunkRecords {
            bytes,
            offset: 0,
            failed: false,
        }
    }

    /// Offset of the next record within the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for ChunkRecords<'a> {
    type Item = Result<ChunkRecord<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset == self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.offset..];
        let Some(header_bytes) = rest.first_chunk::<CHUNK_HEADER_LEN>() else {
            self.failed = true;
            return Some(Err(XorbError::TruncatedChunkHeader {
                offset: self.offset,
                left: rest.len(),
            }
            .into()));
        };
        let header = match ChunkHeader::parse(header_bytes, rest.len() - CHUNK_HEADER_LEN) {
            Ok(h) => h,
            Err(kind) => {
                self.failed = true;
                return Some(Err(XorbError::ChunkHeader {
                    offset: self.offset,
                    kind,
                }
                .into()));
            }
        };
        let end = CHUNK_HEADER_LEN + header.compressed_len as usize;
        let record = ChunkRecord {
            header,
            stored: &rest[CHUNK_HEADER_LEN..end],
        };
        self.offset += end;
        Some(Ok(record))
    }
}
