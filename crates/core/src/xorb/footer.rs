//! The CasObjectInfo footer and its 4-byte length trailer.

use crate::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS};
use crate::error::{Result, XorbError};
use crate::hash::{xorb_hash, MerkleHash};
use crate::xorb::CHUNK_HEADER_LEN;

const IDENT: &[u8; 7] = b"XETBLOB";
const VERSION: u8 = 1;
const HASHES_IDENT: &[u8; 7] = b"XBLBHSH";
const HASHES_VERSION: u8 = 0;
const BOUNDARIES_IDENT: &[u8; 7] = b"XBLBBND";
const BOUNDARIES_VERSION: u8 = 1;

/// Fixed part of the footer: main header (40), two section headers (12 each), trailer (28).
const FIXED_LEN: usize = 40 + 12 + 12 + 28;
/// Per chunk: a hash, a serialized end offset and an unpacked end offset.
const PER_CHUNK_LEN: usize = 32 + 4 + 4;

/// The xorb's metadata: its hash, and per chunk its hash and end offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XorbFooter {
    pub hash: MerkleHash,
    pub chunk_hashes: Vec<MerkleHash>,
    /// End of each chunk record (header included) in the serialized chunk region.
    pub chunk_ends: Vec<u32>,
    /// End of each chunk in the concatenated uncompressed data.
    pub unpacked_ends: Vec<u32>,
}

impl XorbFooter {
    pub fn num_chunks(&self) -> usize {
        self.chunk_hashes.len()
    }

    /// Footer length (without the 4-byte trailer) for `n` chunks.
    pub const fn encoded_len(n: usize) -> usize {
        FIXED_LEN + PER_CHUNK_LEN * n
    }

    /// Length of the serialized chunk region.
    pub fn data_len(&self) -> usize {
        self.chunk_ends.last().map_or(0, |&e| e as usize)
    }

    /// Total uncompressed bytes.
    pub fn unpacked_len(&self) -> u64 {
        self.unpacked_ends.last().map_or(0, |&e| u64::from(e))
    }

    /// Byte range of chunk `i`'s record in the serialized xorb.
    pub fn chunk_record_range(&self, i: usize) -> std::ops::Range<usize> {
        let start = if i == 0 {
            0
        } else {
            self.chunk_ends[i - 1] as usize
        };
        start..self.chunk_ends[i] as usize
    }

    /// Byte range of the records of chunks `start..end` (end exclusive).
    pub fn records_range(&self, start: usize, end: usize) -> std::ops::Range<usize> {
        let from = if start == 0 {
            0
        } else {
            self.chunk_ends[start - 1] as usize
        };
        from..self.chunk_ends[end - 1] as usize
    }

    pub fn unpacked_chunk_len(&self, i: usize) -> u32 {
        let start = if i == 0 { 0 } else { self.unpacked_ends[i - 1] };
        self.unpacked_ends[i] - start
    }

    /// Uncompressed size of chunks `start..end`.
    pub fn unpacked_range_len(&self, start: usize, end: usize) -> u64 {
        let from = if start == 0 {
            0
        } else {
            self.unpacked_ends[start - 1]
        };
        u64::from(self.unpacked_ends[end - 1] - from)
    }

    /// The xorb hash recomputed from the footer's chunk hashes and sizes.
    pub fn computed_hash(&self) -> MerkleHash {
        xorb_hash(
            (0..self.num_chunks())
                .map(|i| (self.chunk_hashes[i], u64::from(self.unpacked_chunk_len(i)))),
        )
    }

    /// Appends the footer and its length trailer.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let n = self.num_chunks();
        let n32 = n as u32;
        let start = out.len();
        out.extend_from_slice(IDENT);
        out.push(VERSION);
        out.extend_from_slice(self.hash.as_bytes());
        out.extend_from_slice(HASHES_IDENT);
        out.push(HASHES_VERSION);
        out.extend_from_slice(&n32.to_le_bytes());
        for hash in &self.chunk_hashes {
            out.extend_from_slice(hash.as_bytes());
        }
        out.extend_from_slice(BOUNDARIES_IDENT);
        out.push(BOUNDARIES_VERSION);
        out.extend_from_slice(&n32.to_le_bytes());
        for end in &self.chunk_ends {
            out.extend_from_slice(&end.to_le_bytes());
        }
        for end in &self.unpacked_ends {
            out.extend_from_slice(&end.to_le_bytes());
        }
        let len = Self::encoded_len(n);
        let hashes_from_end = (len - 40) as u32;
        let boundaries_from_end = (len - (40 + 12 + 32 * n)) as u32;
        out.extend_from_slice(&n32.to_le_bytes());
        out.extend_from_slice(&hashes_from_end.to_le_bytes());
        out.extend_from_slice(&boundaries_from_end.to_le_bytes());
        out.extend_from_slice(&[0u8; 16]);
        debug_assert_eq!(out.len() - start, len);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }

    /// Parses and checks the footer of a complete serialized xorb: its structure, its offsets
    /// against each other and against the chunk region, and the xorb hash against the chunk
    /// hashes. It does not look at the chunk records (see `validate_xorb`).
    pub fn parse(xorb: &[u8]) -> Result<Self> {
        let parsed = Self::parse_structure(xorb)?;
        let computed = parsed.computed_hash();
        if computed != parsed.hash {
            return Err(XorbError::Hash {
                footer: parsed.hash,
                computed,
            }
            .into());
        }
        Ok(parsed)
    }

    /// The footer of a stored xorb of `total` bytes from its last bytes `tail` (at least the
    /// footer and its trailer: [`XorbFooter::MAX_TAIL`] always suffices), checked as
    /// [`XorbFooter::parse`] checks it, without reading the chunk region.
    pub fn parse_tail(tail: &[u8], total: u64) -> Result<Self> {
        let parsed = Self::parse_tail_structure(tail, total)?;
        let computed = parsed.computed_hash();
        if computed != parsed.hash {
            return Err(XorbError::Hash {
                footer: parsed.hash,
                computed,
            }
            .into());
        }
        Ok(parsed)
    }

    /// The longest footer with its trailer: a tail this long holds any xorb's footer.
    pub const MAX_TAIL: usize = Self::encoded_len(MAX_XORB_CHUNKS) + 4;

    /// Like [`XorbFooter::parse`] but without comparing the stored xorb hash to the computed
    /// one, so that a xorb with a wrong hash can still be inspected.
    pub fn parse_structure(xorb: &[u8]) -> Result<Self> {
        Self::parse_tail_structure(xorb, xorb.len() as u64)
    }

    fn parse_tail_structure(tail: &[u8], total: u64) -> Result<Self> {
        let Ok(total) = usize::try_from(total) else {
            return Err(XorbError::TooLarge { total }.into());
        };
        if tail.len() > total {
            return Err(XorbError::TailLongerThanXorb {
                tail: tail.len(),
                total,
            }
            .into());
        }
        let Some(trailer) = tail.last_chunk::<4>() else {
            return Err(XorbError::TooShort { total }.into());
        };
        let info_len = u32::from_le_bytes(*trailer) as usize;
        if info_len < FIXED_LEN || info_len > total - 4 {
            return Err(XorbError::FooterLengthOutOfRange {
                footer_len: info_len,
                total,
            }
            .into());
        }
        if info_len > tail.len() - 4 {
            return Err(XorbError::FooterBeyondTail {
                footer_len: info_len,
                read: tail.len() - 4,
            }
            .into());
        }
        let data_len = total - 4 - info_len;
        let footer = &tail[tail.len() - 4 - info_len..tail.len() - 4];
        let mut r = Reader {
            bytes: footer,
            pos: 0,
        };

        r.ident(IDENT, "footer")?;
        r.version(VERSION, "footer")?;
        let hash = r.hash();
        r.ident(HASHES_IDENT, "hash section")?;
        r.version(HASHES_VERSION, "hash section")?;
        let n = r.u32() as usize;
        if n == 0 {
            return Err(XorbError::NoChunks.into());
        }
        if n > MAX_XORB_CHUNKS {
            return Err(XorbError::TooManyChunks { count: n }.into());
        }
        if Self::encoded_len(n) != info_len {
            return Err(XorbError::FooterLength {
                footer_len: info_len,
                chunks: n,
                expected: Self::encoded_len(n),
            }
            .into());
        }
        let chunk_hashes: Vec<MerkleHash> = (0..n).map(|_| r.hash()).collect();
        r.ident(BOUNDARIES_IDENT, "boundary section")?;
        r.version(BOUNDARIES_VERSION, "boundary section")?;
        let n_boundaries = r.u32() as usize;
        if n_boundaries != n {
            return Err(XorbError::SectionCount {
                section: "boundary section",
                count: n_boundaries,
                hashes: n,
            }
            .into());
        }
        let chunk_ends: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let unpacked_ends: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let n_trailer = r.u32() as usize;
        let hashes_from_end = r.u32() as usize;
        let boundaries_from_end = r.u32() as usize;
        if n_trailer != n {
            return Err(XorbError::SectionCount {
                section: "footer trailer",
                count: n_trailer,
                hashes: n,
            }
            .into());
        }
        if hashes_from_end != info_len - 40 {
            return Err(XorbError::SectionOffset {
                section: "hash section",
                got: hashes_from_end,
                expected: info_len - 40,
            }
            .into());
        }
        if boundaries_from_end != info_len - (52 + 32 * n) {
            return Err(XorbError::SectionOffset {
                section: "boundary section",
                got: boundaries_from_end,
                expected: info_len - (52 + 32 * n),
            }
            .into());
        }

        let mut prev = 0u32;
        for (i, &end) in chunk_ends.iter().enumerate() {
            let min_span = (CHUNK_HEADER_LEN + 1) as u32;
            if end < prev.saturating_add(min_span)
                || end - prev > (CHUNK_HEADER_LEN + MAX_CHUNK_SIZE) as u32
            {
                return Err(XorbError::Boundary {
                    index: i,
                    end,
                    prev,
                }
                .into());
            }
            prev = end;
        }
        if prev as usize != data_len {
            return Err(XorbError::BoundariesEnd {
                end: prev,
                region: data_len,
            }
            .into());
        }
        let mut prev = 0u32;
        for (i, &end) in unpacked_ends.iter().enumerate() {
            if end <= prev || end - prev > MAX_CHUNK_SIZE as u32 {
                return Err(XorbError::UnpackedBoundary {
                    index: i,
                    end,
                    prev,
                }
                .into());
            }
            prev = end;
        }

        Ok(XorbFooter {
            hash,
            chunk_hashes,
            chunk_ends,
            unpacked_ends,
        })
    }
}

/// Cursor over a footer whose total length was already checked.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out = self.bytes[self.pos..self.pos + N]
            .try_into()
            .expect("length checked");
        self.pos += N;
        out
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn hash(&mut self) -> MerkleHash {
        MerkleHash::from_bytes(self.take())
    }

    fn ident(&mut self, expected: &[u8; 7], what: &'static str) -> Result<()> {
        let got: [u8; 7] = self.take();
        if &got != expected {
            return Err(XorbError::Ident {
                section: what,
                got: String::from_utf8_lossy(&got).into_owned(),
                expected: String::from_utf8_lossy(expected).into_owned(),
            }
            .into());
        }
        Ok(())
    }

    fn version(&mut self, expected: u8, what: &'static str) -> Result<()> {
        let [got] = self.take();
        if got != expected {
            return Err(XorbError::Version {
                section: what,
                got,
                expected,
            }
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorb::XorbBuilder;

    /// The footer read from a stored xorb's last bytes is the one parsed from all of it; a
    /// tail shorter than the footer is refused, never misread.
    #[test]
    fn parse_tail_reads_the_footer_from_the_last_bytes() {
        let mut builder = XorbBuilder::new();
        for i in 0..5u8 {
            builder.push_data(&vec![i; 20_000]).unwrap();
        }
        let xorb = builder.finish();
        let whole = XorbFooter::parse(&xorb.bytes).unwrap();
        let total = xorb.bytes.len() as u64;
        let need = XorbFooter::encoded_len(5) + 4;
        for n in [need, need + 1, xorb.bytes.len()] {
            let tail = &xorb.bytes[xorb.bytes.len() - n..];
            assert_eq!(XorbFooter::parse_tail(tail, total).unwrap(), whole);
        }
        let short = &xorb.bytes[xorb.bytes.len() - need + 1..];
        assert!(XorbFooter::parse_tail(short, total).is_err());
        assert!(XorbFooter::parse_tail(&xorb.bytes, total - 1).is_err());
    }
}
