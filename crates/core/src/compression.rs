//! Per-chunk compression inside xorbs: none, LZ4 frame, and byte-grouping-4 followed by LZ4.
//!
//! The scheme is chosen like the deployed client chooses it, so that our xorbs come out
//! byte-identical to theirs: BG4 when the bytes at the four positions of each 4-byte group
//! have clearly different bit-count distributions (typical of float tensors), LZ4 otherwise,
//! and the raw bytes whenever compression does not make the chunk strictly smaller.

use std::io::{Read, Write};

use crate::constants::MAX_CHUNK_SIZE;
use crate::error::CompressionError;

#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionScheme {
    None = 0,
    Lz4 = 1,
    ByteGrouping4Lz4 = 2,
}

impl CompressionScheme {
    pub fn from_u8(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::None),
            1 => Some(Self::Lz4),
            2 => Some(Self::ByteGrouping4Lz4),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lz4 => "lz4",
            Self::ByteGrouping4Lz4 => "bg4-lz4",
        }
    }
}

impl std::fmt::Display for CompressionScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Predicts whether byte grouping helps: the largest KL divergence between the popcount
/// histogram of one byte position and that of all positions must exceed 0.02.
pub fn bg4_recommended(data: &[u8]) -> bool {
    let mut histograms = [[0u32; 9]; 4];
    let mut groups = data.chunks_exact(4);
    for group in &mut groups {
        for (lane, &b) in group.iter().enumerate() {
            histograms[lane][b.count_ones() as usize] += 1;
        }
    }
    for (lane, &b) in groups.remainder().iter().enumerate() {
        histograms[lane][b.count_ones() as usize] += 1;
    }

    // A base count of one keeps every probability of the pooled histogram non-zero.
    let mut pooled = [1u32; 9];
    let mut totals = [0u32; 4];
    for (lane, histogram) in histograms.iter().enumerate() {
        for (bits, &count) in histogram.iter().enumerate() {
            pooled[bits] += count;
            totals[lane] += count;
        }
    }
    let pooled_total: u32 = totals.iter().sum();

    let mut max_divergence = 0f64;
    for (lane, histogram) in histograms.iter().enumerate() {
        let mut divergence = 0f64;
        for (bits, &count) in histogram.iter().enumerate() {
            let p = f64::from(count) / f64::from(totals[lane]);
            let q = f64::from(pooled[bits]) / f64::from(pooled_total);
            divergence += p * (p / q).ln();
        }
        // An empty lane gives NaN, which `max` ignores, as the deployed code's f64::max does.
        max_divergence = max_divergence.max(divergence);
    }
    max_divergence > 0.02
}

/// The scheme the deployed client would try for this chunk.
pub fn choose_scheme(data: &[u8]) -> CompressionScheme {
    if bg4_recommended(data) {
        CompressionScheme::ByteGrouping4Lz4
    } else {
        CompressionScheme::Lz4
    }
}

/// Byte grouping: all bytes at position 0 of each 4-byte group, then position 1, 2, 3.
/// With a length not divisible by 4 the first groups get one extra byte each.
pub fn bg4_split(data: &[u8]) -> Vec<u8> {
    let n = data.len();
    let mut out = vec![0u8; n];
    let mut starts = [0usize; 4];
    for lane in 1..4 {
        starts[lane] = starts[lane - 1] + group_len(n, lane - 1);
    }
    let full = n / 4;
    for g in 0..full {
        for (lane, start) in starts.iter().enumerate() {
            out[start + g] = data[4 * g + lane];
        }
    }
    for lane in 0..n % 4 {
        out[starts[lane] + full] = data[4 * full + lane];
    }
    out
}

/// Inverse of [`bg4_split`].
pub fn bg4_regroup(grouped: &[u8]) -> Vec<u8> {
    let n = grouped.len();
    let mut out = vec![0u8; n];
    let mut starts = [0usize; 4];
    for lane in 1..4 {
        starts[lane] = starts[lane - 1] + group_len(n, lane - 1);
    }
    let full = n / 4;
    for g in 0..full {
        for (lane, start) in starts.iter().enumerate() {
            out[4 * g + lane] = grouped[start + g];
        }
    }
    for lane in 0..n % 4 {
        out[4 * full + lane] = grouped[starts[lane] + full];
    }
    out
}

fn group_len(n: usize, lane: usize) -> usize {
    n / 4 + usize::from(lane < n % 4)
}

fn lz4_frame(data: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(data.len() / 2 + 64));
    encoder
        .write_all(data)
        .expect("writing to a Vec cannot fail");
    encoder.finish().expect("writing to a Vec cannot fail")
}

/// Compresses a chunk with the chosen scheme. Returns the scheme actually used and the bytes
/// to store: the raw bytes (scheme `None`) unless compression made them strictly smaller.
pub fn compress(data: &[u8]) -> (CompressionScheme, Vec<u8>) {
    compress_with(choose_scheme(data), data)
}

/// Compresses with a given scheme, falling back to `None` when it does not help.
pub fn compress_with(scheme: CompressionScheme, data: &[u8]) -> (CompressionScheme, Vec<u8>) {
    let compressed = match scheme {
        CompressionScheme::None => return (CompressionScheme::None, data.to_vec()),
        CompressionScheme::Lz4 => lz4_frame(data),
        CompressionScheme::ByteGrouping4Lz4 => lz4_frame(&bg4_split(data)),
    };
    if compressed.len() >= data.len() {
        (CompressionScheme::None, data.to_vec())
    } else {
        (scheme, compressed)
    }
}

/// Decompresses one stored chunk, appending exactly `uncompressed_len` bytes to `out`.
/// The declared length is checked against [`MAX_CHUNK_SIZE`] before anything is allocated,
/// and a stream that decodes to more or fewer bytes is rejected.
pub fn decompress_into(
    scheme: CompressionScheme,
    stored: &[u8],
    uncompressed_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    if uncompressed_len == 0 || uncompressed_len > MAX_CHUNK_SIZE {
        return Err(CompressionError::SizeOutOfRange {
            len: uncompressed_len,
        });
    }
    match scheme {
        CompressionScheme::None => {
            if stored.len() != uncompressed_len {
                return Err(CompressionError::RawLength {
                    stored: stored.len(),
                    declared: uncompressed_len,
                });
            }
            out.extend_from_slice(stored);
        }
        CompressionScheme::Lz4 => {
            lz4_decode_bounded(stored, uncompressed_len, out)?;
        }
        CompressionScheme::ByteGrouping4Lz4 => {
            let mut grouped = Vec::with_capacity(uncompressed_len);
            lz4_decode_bounded(stored, uncompressed_len, &mut grouped)?;
            out.extend_from_slice(&bg4_regroup(&grouped));
        }
    }
    Ok(())
}

/// Decodes an LZ4 frame, refusing to produce more than `expected` bytes. The decoder's own
/// buffers are bounded by the frame format (at most a 4 MiB block).
fn lz4_decode_bounded(
    stored: &[u8],
    expected: usize,
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let start = out.len();
    out.reserve(expected);
    let decoder = lz4_flex::frame::FrameDecoder::new(stored);
    let read = decoder
        .take(expected as u64 + 1)
        .read_to_end(out)
        .map_err(|e| CompressionError::Lz4Frame {
            reason: e.to_string(),
        });
    let produced = out.len() - start;
    match read {
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
        Ok(_) if produced != expected => {
            out.truncate(start);
            Err(if produced > expected {
                CompressionError::Lz4Long { declared: expected }
            } else {
                CompressionError::Lz4Short {
                    produced,
                    declared: expected,
                }
            })
        }
        Ok(_) => Ok(()),
    }
}
