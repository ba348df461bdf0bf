//! Turning a reconstruction into an ordered list of segments to produce: runs of terms
//! served from local files, and xorb byte ranges to fetch, each fetched once for a run of
//! consecutive terms (adjacent or overlapping `fetch_info` ranges of one xorb are merged).

use std::collections::HashMap;

use crate::error::{ClientError, Result};
use git_xet_core::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS};
use git_xet_core::reconstruction::{ChunkRange, HttpRange, Reconstruction};
use git_xet_core::MerkleHash;

/// A chunk available in a local file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalChunk {
    /// Index of the local file among the sources.
    pub source: usize,
    pub offset: u64,
    pub len: u32,
    pub hash: MerkleHash,
}

/// (xorb hash, chunk index) -> where the chunk's bytes are on disk.
pub type LocalMap = HashMap<(MerkleHash, u32), LocalChunk>;

/// One term of the reconstruction, as a range of chunks of a xorb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub term: usize,
    pub range: ChunkRange,
    pub unpacked: u32,
}

/// A byte range of a xorb to fetch, holding chunks `chunks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchUnit {
    pub xorb: MerkleHash,
    pub url: String,
    pub url_range: HttpRange,
    pub chunks: ChunkRange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Consecutive terms, read from local files.
    Local {
        pieces: Vec<(Piece, Vec<LocalChunk>)>,
    },
    /// Consecutive terms, in increasing chunk order within one fetched range.
    Fetch { unit: FetchUnit, pieces: Vec<Piece> },
}

fn invalid(reason: String) -> ClientError {
    ClientError::protocol("planning the download", reason)
}

fn check(recon: &Reconstruction) -> Result<()> {
    if recon.terms.is_empty() {
        return Err(invalid("the reconstruction has no terms".into()));
    }
    for (i, t) in recon.terms.iter().enumerate() {
        let n = t.range.len() as u64;
        if t.range.is_empty()
            || n > MAX_XORB_CHUNKS as u64
            || t.range.end as usize > MAX_XORB_CHUNKS
        {
            return Err(invalid(format!(
                "term {i} has chunk range {}..{}",
                t.range.start, t.range.end
            )));
        }
        if t.unpacked_length == 0 || u64::from(t.unpacked_length) > n * MAX_CHUNK_SIZE as u64 {
            return Err(invalid(format!(
                "term {i} declares {} bytes for {n} chunks",
                t.unpacked_length
            )));
        }
    }
    for (xorb, entries) in &recon.fetch_info {
        for f in entries {
            if f.range.is_empty() || f.url_range.end < f.url_range.start {
                return Err(invalid(format!(
                    "fetch info for xorb {xorb} has an empty range"
                )));
            }
        }
    }
    Ok(())
}

/// The local chunks of a term, if all of them are local.
fn local_chunks(local: &LocalMap, xorb: &MerkleHash, range: ChunkRange) -> Option<Vec<LocalChunk>> {
    if local.is_empty() {
        return None;
    }
    (range.start..range.end)
        .map(|i| local.get(&(*xorb, i)).copied())
        .collect()
}

/// Plans the segments of a reconstruction.
pub fn plan(recon: &Reconstruction, local: &LocalMap) -> Result<Vec<Segment>> {
    check(recon)?;
    let mut segments: Vec<Segment> = Vec::new();
    for (i, term) in recon.terms.iter().enumerate() {
        let piece = Piece {
            term: i,
            range: term.range,
            unpacked: term.unpacked_length,
        };
        if let Some(chunks) = local_chunks(local, &term.hash, term.range) {
            let sum: u64 = chunks.iter().map(|c| u64::from(c.len)).sum();
            if sum == u64::from(term.unpacked_length) {
                match segments.last_mut() {
                    Some(Segment::Local { pieces }) => pieces.push((piece, chunks)),
                    _ => segments.push(Segment::Local {
                        pieces: vec![(piece, chunks)],
                    }),
                }
                continue;
            }
        }
        let entry = recon.fetch_for(term).ok_or_else(|| {
            invalid(format!(
                "no fetch info covers term {i} (xorb {}, chunks {}..{})",
                term.hash, term.range.start, term.range.end
            ))
        })?;
        if let Some(Segment::Fetch { unit, pieces }) = segments.last_mut() {
            let after_previous = pieces
                .last()
                .is_some_and(|p| term.range.start >= p.range.end);
            if unit.xorb == term.hash && unit.url == entry.url && after_previous {
                if unit.chunks.contains_range(&term.range) {
                    pieces.push(piece);
                    continue;
                }
                // The entry continues (or overlaps the end of) the unit: fetch both at once.
                let continues = entry.range.start >= unit.chunks.start
                    && entry.range.start <= unit.chunks.end
                    && entry.range.end > unit.chunks.end
                    && entry.url_range.start <= unit.url_range.end + 1
                    && entry.url_range.end > unit.url_range.end;
                if continues {
                    unit.chunks.end = entry.range.end;
                    unit.url_range.end = entry.url_range.end;
                    pieces.push(piece);
                    continue;
                }
            }
        }
        let unit = FetchUnit {
            xorb: term.hash,
            url: entry.url.clone(),
            url_range: entry.url_range,
            chunks: entry.range,
        };
        segments.push(Segment::Fetch {
            unit,
            pieces: vec![piece],
        });
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;
    use git_xet_core::reconstruction::{FetchInfo, ReconstructionTerm};

    fn h(s: &str) -> MerkleHash {
        chunk_hash(s.as_bytes())
    }

    fn term(x: &str, s: u32, e: u32) -> ReconstructionTerm {
        ReconstructionTerm {
            hash: h(x),
            unpacked_length: (e - s) * 100,
            range: ChunkRange::new(s, e),
        }
    }

    fn fetch(s: u32, e: u32, url: &str) -> FetchInfo {
        FetchInfo {
            range: ChunkRange::new(s, e),
            url: url.into(),
            url_range: HttpRange {
                start: u64::from(s) * 110,
                end: u64::from(e) * 110 - 1,
            },
        }
    }

    fn recon(terms: Vec<ReconstructionTerm>, fetch: Vec<(&str, Vec<FetchInfo>)>) -> Reconstruction {
        Reconstruction {
            offset_into_first_range: 0,
            terms,
            fetch_info: fetch.into_iter().map(|(x, f)| (h(x), f)).collect(),
        }
    }

    fn units(segments: &[Segment]) -> Vec<(u32, u32, u64, u64, usize)> {
        segments
            .iter()
            .filter_map(|s| match s {
                Segment::Fetch { unit, pieces } => Some((
                    unit.chunks.start,
                    unit.chunks.end,
                    unit.url_range.start,
                    unit.url_range.end,
                    pieces.len(),
                )),
                Segment::Local { .. } => None,
            })
            .collect()
    }

    #[test]
    fn adjacent_and_overlapping_entries_of_consecutive_terms_merge() {
        let r = recon(
            vec![
                term("a", 0, 3),
                term("a", 3, 5),
                term("a", 4, 8),
                term("b", 0, 2),
                term("a", 0, 2),
            ],
            vec![
                (
                    "a",
                    vec![fetch(0, 3, "u"), fetch(3, 5, "u"), fetch(4, 8, "u")],
                ),
                ("b", vec![fetch(0, 2, "v")]),
            ],
        );
        let segments = plan(&r, &LocalMap::new()).unwrap();
        // a[0..3)+a[3..5) merge (adjacent); a[4..8) overlaps but goes backwards: new unit.
        assert_eq!(
            units(&segments),
            vec![
                (0, 5, 0, 549, 2),
                (4, 8, 440, 879, 1),
                (0, 2, 0, 219, 1),
                (0, 3, 0, 329, 1)
            ]
        );
    }

    #[test]
    fn overlapping_entries_extend_a_unit() {
        let r = recon(
            vec![term("a", 0, 3), term("a", 3, 6)],
            vec![("a", vec![fetch(0, 4, "u"), fetch(2, 6, "u")])],
        );
        assert_eq!(
            units(&plan(&r, &LocalMap::new()).unwrap()),
            vec![(0, 6, 0, 659, 2)]
        );
    }

    #[test]
    fn different_urls_are_not_merged() {
        let r = recon(
            vec![term("a", 0, 3), term("a", 3, 5)],
            vec![("a", vec![fetch(0, 3, "u1"), fetch(3, 5, "u2")])],
        );
        assert_eq!(units(&plan(&r, &LocalMap::new()).unwrap()).len(), 2);
    }

    #[test]
    fn terms_with_every_chunk_local_are_read_locally() {
        let r = recon(
            vec![term("a", 0, 2), term("b", 0, 1), term("a", 2, 4)],
            vec![("a", vec![fetch(0, 4, "u")]), ("b", vec![fetch(0, 1, "v")])],
        );
        let mut local = LocalMap::new();
        for i in 0..3 {
            local.insert(
                (h("a"), i),
                LocalChunk {
                    source: 0,
                    offset: u64::from(i) * 100,
                    len: 100,
                    hash: h("c"),
                },
            );
        }
        let segments = plan(&r, &local).unwrap();
        assert!(matches!(&segments[0], Segment::Local { pieces } if pieces.len() == 1));
        // a[2..4) is only half local: fetched.
        assert_eq!(units(&segments), vec![(0, 1, 0, 109, 1), (0, 4, 0, 439, 1)]);
    }

    #[test]
    fn malformed_reconstructions_are_rejected() {
        let missing_fetch = recon(vec![term("a", 0, 2)], vec![]);
        assert!(plan(&missing_fetch, &LocalMap::new()).is_err());
        assert!(plan(&recon(vec![], vec![]), &LocalMap::new()).is_err());
        let mut empty_range = recon(vec![term("a", 0, 2)], vec![("a", vec![fetch(0, 2, "u")])]);
        empty_range.terms[0].range = ChunkRange::new(2, 2);
        assert!(plan(&empty_range, &LocalMap::new()).is_err());
        let mut too_long = recon(vec![term("a", 0, 2)], vec![("a", vec![fetch(0, 2, "u")])]);
        too_long.terms[0].unpacked_length = 3 * MAX_CHUNK_SIZE as u32;
        assert!(plan(&too_long, &LocalMap::new()).is_err());
    }
}
