//! Footer-less xorbs. Deployed clients (hf-xet 1.8) upload a xorb as its chunk records only;
//! the receiving server decodes every chunk, rebuilds the footer and checks the xorb hash
//! the client named (docs/protocol.md, "The deployed ecosystem").

use crate::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS};
use crate::error::{Result, XorbError};
use crate::hash::chunk_hash;
use crate::xorb::{ChunkRecords, XorbFooter};

/// Whether `body` is a chunk region without a footer: its chunk records tile it exactly.
/// Looks at the 8-byte headers only. A complete xorb never qualifies, as its footer starts
/// with the ident `XETBLOB`, which is not a valid chunk header.
pub fn is_footerless(body: &[u8]) -> bool {
    let mut records = ChunkRecords::new(body);
    let mut n = 0usize;
    for record in records.by_ref() {
        if record.is_err() || n == MAX_XORB_CHUNKS {
            return false;
        }
        n += 1;
    }
    n > 0 && records.offset() == body.len()
}

/// The footer of a chunk region: every chunk decompressed and hashed, its end offsets in the
/// region and in the uncompressed stream, and the xorb hash over the chunks. What
/// `write_to` then appends is the footer the reference's `reconstruct_xorb_with_footer`
/// writes (checked against its output in crates/core/tests/protocol_core/vectors.rs).
pub fn rebuild_footer(region: &[u8]) -> Result<XorbFooter> {
    if u32::try_from(region.len()).is_err() {
        return Err(XorbError::RegionTooLarge { len: region.len() }.into());
    }
    let mut footer = XorbFooter::default();
    let mut scratch = Vec::with_capacity(MAX_CHUNK_SIZE);
    let mut records = ChunkRecords::new(region);
    let mut unpacked = 0u32;
    while let Some(record) = records.next() {
        let i = footer.num_chunks();
        let record = record.map_err(|e| XorbError::chunk(i, e))?;
        if i == MAX_XORB_CHUNKS {
            return Err(XorbError::TooManyChunks { count: i + 1 }.into());
        }
        scratch.clear();
        record
            .decode_into(&mut scratch)
            .map_err(|e| XorbError::chunk(i, e))?;
        // At most 8192 chunks of at most 128 KiB: the sum stays far below u32::MAX.
        unpacked += scratch.len() as u32;
        footer.chunk_hashes.push(chunk_hash(&scratch));
        footer.chunk_ends.push(records.offset() as u32);
        footer.unpacked_ends.push(unpacked);
    }
    if footer.num_chunks() == 0 {
        return Err(XorbError::NoChunks.into());
    }
    footer.hash = footer.computed_hash();
    Ok(footer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorb::{validate_xorb, XorbBuilder};

    fn sample() -> crate::xorb::SerializedXorb {
        let mut b = XorbBuilder::new();
        b.push_data(&[7u8; 5000]).unwrap();
        let noise: Vec<u8> = (0..9000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        b.push_data(&noise).unwrap();
        b.finish()
    }

    #[test]
    fn rebuilt_footer_equals_the_builders() {
        let xorb = sample();
        let region = &xorb.bytes[..xorb.footer.data_len()];
        assert!(is_footerless(region));
        assert!(!is_footerless(&xorb.bytes));
        let footer = rebuild_footer(region).unwrap();
        assert_eq!(footer, xorb.footer);
        let mut full = region.to_vec();
        footer.write_to(&mut full);
        assert_eq!(full, xorb.bytes);
        assert_eq!(validate_xorb(&full).unwrap().hash, xorb.footer.hash);
    }

    #[test]
    fn damaged_regions_are_refused() {
        let xorb = sample();
        let region = &xorb.bytes[..xorb.footer.data_len()];
        assert!(rebuild_footer(&[]).is_err());
        assert!(!is_footerless(&[]));
        // Truncated: the last record's stored bytes are cut short.
        assert!(!is_footerless(&region[..region.len() - 1]));
        assert!(rebuild_footer(&region[..region.len() - 1]).is_err());
        // A stored byte changed: the chunk no longer decodes to its declared size, or hashes
        // differently (then the xorb hash differs from the original).
        let mut bad = region.to_vec();
        bad[10] ^= 0xff;
        if let Ok(f) = rebuild_footer(&bad) {
            assert_ne!(f.hash, xorb.footer.hash);
        }
    }
}
