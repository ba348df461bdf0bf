//! Full validation of serialized xorbs, inspection, and chunk-range extraction.

use crate::error::{Result, XorbError};
use crate::hash::{chunk_hash, MerkleHash};
use crate::xorb::{ChunkRecords, XorbFooter};

/// Checks a complete xorb as a server must before storing it: the footer (structure, limits,
/// offsets, xorb hash) and every chunk record (header fields, position against the footer's
/// boundaries, decompressed size, and chunk hash against the footer).
pub fn validate_xorb(xorb: &[u8]) -> Result<XorbFooter> {
    let footer = XorbFooter::parse(xorb)?;
    let region = &xorb[..footer.data_len()];
    let mut scratch = Vec::with_capacity(crate::constants::MAX_CHUNK_SIZE);
    let mut records = ChunkRecords::new(region);
    for i in 0..footer.num_chunks() {
        let record = match records.next() {
            Some(r) => r.map_err(|e| XorbError::chunk(i, e))?,
            None => return Err(XorbError::ChunkMissing { index: i }.into()),
        };
        let end = records.offset() as u32;
        check_place(&footer, i, end, record.header.uncompressed_len)?;
        scratch.clear();
        record
            .decode_into(&mut scratch)
            .map_err(|e| XorbError::chunk(i, e))?;
        check_hash(&footer, i, chunk_hash(&scratch))?;
    }
    Ok(footer)
}

/// Checks that chunk `i`'s record ends at `end` and holds `unpacked` bytes, as the footer says.
pub(super) fn check_place(footer: &XorbFooter, i: usize, end: u32, unpacked: u32) -> Result<()> {
    if end != footer.chunk_ends[i] {
        return Err(XorbError::ChunkEnd {
            index: i,
            end,
            footer: footer.chunk_ends[i],
        }
        .into());
    }
    let expected = footer.unpacked_chunk_len(i);
    if unpacked != expected {
        return Err(XorbError::ChunkSize {
            index: i,
            header: unpacked,
            footer: expected,
        }
        .into());
    }
    Ok(())
}

/// Checks chunk `i`'s hash against the footer's.
pub(super) fn check_hash(footer: &XorbFooter, i: usize, actual: MerkleHash) -> Result<()> {
    if actual != footer.chunk_hashes[i] {
        return Err(XorbError::ChunkHash {
            index: i,
            actual,
            footer: footer.chunk_hashes[i],
        }
        .into());
    }
    Ok(())
}

/// Decompressed bytes of chunks `start..end` (end exclusive), decoding only those chunks:
/// the footer's boundary offsets locate them directly.
pub fn extract_chunks(
    xorb: &[u8],
    footer: &XorbFooter,
    start: usize,
    end: usize,
) -> Result<Vec<u8>> {
    if start >= end || end > footer.num_chunks() {
        return Err(XorbError::ChunkRange {
            start,
            end,
            chunks: footer.num_chunks(),
        }
        .into());
    }
    let range = footer.records_range(start, end);
    let mut out = Vec::with_capacity(footer.unpacked_range_len(start, end) as usize);
    for (k, record) in ChunkRecords::new(&xorb[range]).enumerate() {
        let i = start + k;
        let record = record.map_err(|e| XorbError::chunk(i, e))?;
        let expected = footer.unpacked_chunk_len(i);
        if record.header.uncompressed_len != expected {
            return Err(XorbError::ChunkSize {
                index: i,
                header: record.header.uncompressed_len,
                footer: expected,
            }
            .into());
        }
        record
            .decode_into(&mut out)
            .map_err(|e| XorbError::chunk(i, e))?;
    }
    Ok(out)
}

/// What `git xet xorb inspect` reports about one chunk.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ChunkReport {
    pub index: usize,
    pub hash: MerkleHash,
    pub offset: u32,
    pub stored_size: u32,
    pub uncompressed_size: u32,
    pub compression: String,
    /// Whether the chunk decompresses to its declared size and hashes to the footer's hash.
    pub verified: bool,
}

/// What `git xet xorb inspect` reports about a xorb.
#[derive(Debug, Clone, serde::Serialize)]
pub struct XorbReport {
    pub hash: MerkleHash,
    pub computed_hash: MerkleHash,
    pub hash_verified: bool,
    pub num_chunks: usize,
    pub serialized_size: usize,
    pub uncompressed_size: u64,
    pub compression_counts: std::collections::BTreeMap<String, usize>,
    pub chunks_verified: bool,
    pub chunks: Vec<ChunkReport>,
}

/// Inspects a xorb. The footer must parse structurally; a hash mismatch or a bad chunk is
/// reported rather than refused, so that damaged xorbs can be examined.
pub fn inspect_xorb(xorb: &[u8]) -> Result<XorbReport> {
    // A wrong stored hash is something to report, not a reason to stop.
    let footer = XorbFooter::parse_structure(xorb)?;
    let computed = footer.computed_hash();
    let mut chunks = Vec::with_capacity(footer.num_chunks());
    let mut counts = std::collections::BTreeMap::new();
    let mut scratch = Vec::new();
    for i in 0..footer.num_chunks() {
        let range = footer.chunk_record_range(i);
        let mut records = ChunkRecords::new(&xorb[range.clone()]);
        let (stored, compression, verified) = match records.next() {
            Some(Ok(record)) => {
                scratch.clear();
                let ok = record.stored.len() + 8 == range.len()
                    && record.header.uncompressed_len == footer.unpacked_chunk_len(i)
                    && record.decode_into(&mut scratch).is_ok()
                    && chunk_hash(&scratch) == footer.chunk_hashes[i];
                (
                    record.header.compressed_len,
                    record.header.scheme.name().to_string(),
                    ok,
                )
            }
            _ => (0, "invalid".to_string(), false),
        };
        *counts.entry(compression.clone()).or_insert(0) += 1;
        chunks.push(ChunkReport {
            index: i,
            hash: footer.chunk_hashes[i],
            offset: range.start as u32,
            stored_size: stored,
            uncompressed_size: footer.unpacked_chunk_len(i),
            compression,
            verified,
        });
    }
    Ok(XorbReport {
        hash: footer.hash,
        computed_hash: computed,
        hash_verified: computed == footer.hash,
        num_chunks: footer.num_chunks(),
        serialized_size: xorb.len(),
        uncompressed_size: footer.unpacked_len(),
        compression_counts: counts,
        chunks_verified: chunks.iter().all(|c| c.verified),
        chunks,
    })
}
