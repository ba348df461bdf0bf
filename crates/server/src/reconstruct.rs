//! Planning a file's reconstruction for a byte range: which xorb chunk ranges to read, and
//! where the range starts in the first of them. Shared by the reconstruction API and the
//! git-lfs `basic` download, which streams the same plan.
//!
//! What a plan holds is bounded where files are registered (shard_check.rs): at most 65,536
//! terms (so an answer lists at most that many), and at most 4 Mi chunks in the distinct
//! xorbs whose layouts [`load_metas`] loads for one file (about 170 MB at the very worst).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{ServerError, ServerResult};
use git_xet_core::reconstruction::{
    ChunkRange, FetchInfo, HttpRange, Reconstruction, ReconstructionTerm,
};
use git_xet_core::MerkleHash;
use git_xet_index::{FileRecord, Index, XorbMeta};

/// One term trimmed to the requested range.
#[derive(Debug, Clone)]
pub struct PlannedTerm {
    pub xorb: Arc<XorbMeta>,
    pub start: u32,
    pub end: u32,
    /// Uncompressed bytes of chunks `start..end`.
    pub unpacked: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Bytes of the first term before the range starts.
    pub offset_into_first_range: u64,
    pub terms: Vec<PlannedTerm>,
}

/// Loads the layouts of every xorb a file uses.
pub fn load_metas(
    index: &dyn Index,
    file: &FileRecord,
) -> ServerResult<HashMap<MerkleHash, Arc<XorbMeta>>> {
    let mut metas = HashMap::new();
    for term in &file.terms {
        if let std::collections::hash_map::Entry::Vacant(slot) = metas.entry(term.xorb_hash) {
            let meta = index.xorb(&term.xorb_hash)?.ok_or_else(|| {
                ServerError::internal(format!(
                    "file {} uses xorb {} which is not indexed",
                    file.file_hash, term.xorb_hash
                ))
            })?;
            slot.insert(meta);
        }
    }
    Ok(metas)
}

/// The terms of `file` overlapping `range` (half-open, non-empty, inside the file), each
/// trimmed to the chunks that overlap it.
pub fn plan(
    file: &FileRecord,
    metas: &HashMap<MerkleHash, Arc<XorbMeta>>,
    range: Range<u64>,
) -> ServerResult<Plan> {
    let mut out = Plan::default();
    let mut term_start = 0u64;
    for term in &file.terms {
        let term_end = term_start + u64::from(term.unpacked_bytes);
        if term_end <= range.start {
            term_start = term_end;
            continue;
        }
        if term_start >= range.end {
            break;
        }
        let xorb = metas
            .get(&term.xorb_hash)
            .ok_or_else(|| ServerError::internal(format!("no layout for xorb {}", term.xorb_hash)))?
            .clone();
        if term.chunk_end as usize > xorb.num_chunks() {
            return Err(ServerError::internal(format!(
                "term outside xorb {}",
                term.xorb_hash
            )));
        }
        let (mut start, mut end) = (term.chunk_start, term.chunk_end);
        let mut first_byte = term_start;
        while start + 1 < end && first_byte + u64::from(xorb.chunk_len(start)) <= range.start {
            first_byte += u64::from(xorb.chunk_len(start));
            start += 1;
        }
        let mut last_byte = term_end;
        while end - 1 > start && last_byte - u64::from(xorb.chunk_len(end - 1)) >= range.end {
            last_byte -= u64::from(xorb.chunk_len(end - 1));
            end -= 1;
        }
        if out.terms.is_empty() {
            out.offset_into_first_range = range.start.saturating_sub(first_byte);
        }
        out.terms.push(PlannedTerm {
            xorb,
            start,
            end,
            unpacked: last_byte - first_byte,
        });
        term_start = term_end;
    }
    Ok(out)
}

/// The reconstruction API's answer for a plan. Chunk ranges of the same xorb that overlap
/// or touch share one fetch entry, so a client makes one request for them. Each entry gets
/// its own URL from `url_for(xorb, bytes)`: a URL grants its entry's bytes only.
pub fn to_reconstruction(
    plan: &Plan,
    mut url_for: impl FnMut(&MerkleHash, HttpRange) -> String,
) -> Reconstruction {
    // Per xorb: its layout and the chunk ranges the terms use.
    type Ranges = (Arc<XorbMeta>, Vec<(u32, u32)>);
    let mut ranges: HashMap<MerkleHash, Ranges> = HashMap::new();
    let terms = plan
        .terms
        .iter()
        .map(|t| {
            ranges
                .entry(t.xorb.hash())
                .or_insert_with(|| (t.xorb.clone(), Vec::new()))
                .1
                .push((t.start, t.end));
            ReconstructionTerm {
                hash: t.xorb.hash(),
                unpacked_length: t.unpacked as u32,
                range: ChunkRange::new(t.start, t.end),
            }
        })
        .collect();
    let mut fetch_info = HashMap::new();
    for (hash, (xorb, mut list)) in ranges {
        list.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (s, e) in list {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let infos = merged
            .into_iter()
            .map(|(s, e)| {
                let bytes = xorb.footer.records_range(s as usize, e as usize);
                let url_range = HttpRange {
                    start: bytes.start as u64,
                    end: bytes.end as u64 - 1,
                };
                FetchInfo {
                    range: ChunkRange::new(s, e),
                    url: url_for(&hash, url_range),
                    url_range,
                }
            })
            .collect();
        fetch_info.insert(hash, infos);
    }
    Reconstruction {
        offset_into_first_range: plan.offset_into_first_range,
        terms,
        fetch_info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::shard::FileTerm;
    use git_xet_core::xorb::XorbFooter;

    /// A xorb of chunks of 10, 20, 30, 40 bytes (records 18, 28, 38, 48 bytes).
    fn meta() -> Arc<XorbMeta> {
        let sizes = [10u32, 20, 30, 40];
        let mut unpacked_ends = Vec::new();
        let mut chunk_ends = Vec::new();
        let (mut u, mut c) = (0, 0);
        for s in sizes {
            u += s;
            c += s + 8;
            unpacked_ends.push(u);
            chunk_ends.push(c);
        }
        let footer = XorbFooter {
            hash: MerkleHash::from_bytes([5; 32]),
            chunk_hashes: vec![MerkleHash::ZERO; 4],
            chunk_ends,
            unpacked_ends,
        };
        Arc::new(XorbMeta {
            footer,
            stored_len: 0,
        })
    }

    fn file() -> (FileRecord, HashMap<MerkleHash, Arc<XorbMeta>>) {
        let m = meta();
        let term = |s, e, n| FileTerm {
            xorb_hash: m.hash(),
            cas_flags: 0,
            unpacked_bytes: n,
            chunk_start: s,
            chunk_end: e,
        };
        // bytes 0..60 = chunks 0..3, then 60..130 = chunks 2..4
        let f = FileRecord {
            file_hash: MerkleHash::ZERO,
            size: 130,
            sha256: [0; 32],
            terms: vec![term(0, 3, 60), term(2, 4, 70)],
        };
        let mut metas = HashMap::new();
        metas.insert(m.hash(), m);
        (f, metas)
    }

    #[test]
    fn whole_file_keeps_every_term() {
        let (f, metas) = file();
        let p = plan(&f, &metas, 0..130).unwrap();
        assert_eq!(p.offset_into_first_range, 0);
        let got: Vec<_> = p
            .terms
            .iter()
            .map(|t| (t.start, t.end, t.unpacked))
            .collect();
        assert_eq!(got, vec![(0, 3, 60), (2, 4, 70)]);
        let r = to_reconstruction(&p, |_, _| "u".into());
        let infos = &r.fetch_info[&metas.values().next().unwrap().hash()];
        assert_eq!(infos.len(), 1, "overlapping ranges merge");
        assert_eq!((infos[0].range.start, infos[0].range.end), (0, 4));
        assert_eq!((infos[0].url_range.start, infos[0].url_range.end), (0, 131));
    }

    #[test]
    fn ranges_trim_to_overlapping_chunks() {
        let (f, metas) = file();
        // bytes 15..=35: chunk 1 (10..30) and chunk 2 (30..60) of the first term
        let p = plan(&f, &metas, 15..36).unwrap();
        assert_eq!(p.offset_into_first_range, 5);
        let got: Vec<_> = p
            .terms
            .iter()
            .map(|t| (t.start, t.end, t.unpacked))
            .collect();
        assert_eq!(got, vec![(1, 3, 50)]);
        // bytes 59..=100: last byte of term 1 (chunk 2) and chunks 2..4 of term 2 (60..90, 90..130)
        let p = plan(&f, &metas, 59..101).unwrap();
        assert_eq!(p.offset_into_first_range, 29);
        let got: Vec<_> = p
            .terms
            .iter()
            .map(|t| (t.start, t.end, t.unpacked))
            .collect();
        assert_eq!(got, vec![(2, 3, 30), (2, 4, 70)]);
        // one byte at the very end
        let p = plan(&f, &metas, 129..130).unwrap();
        let got: Vec<_> = p
            .terms
            .iter()
            .map(|t| (t.start, t.end, t.unpacked))
            .collect();
        assert_eq!((p.offset_into_first_range, got), (39, vec![(3, 4, 40)]));
        let r = to_reconstruction(&p, |_, _| "u".into());
        let info = &r.fetch_info.values().next().unwrap()[0];
        assert_eq!((info.url_range.start, info.url_range.end), (84, 131));
    }
}
