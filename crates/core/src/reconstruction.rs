//! File reconstructions as the CAS API returns them (docs/formats.md, "File
//! reconstruction"): ordered terms, and where to fetch each xorb's bytes.
//!
//! Chunk ranges are end-exclusive; `url_range` is an HTTP byte range and end-inclusive.

use std::collections::HashMap;

use crate::hash::MerkleHash;

/// Chunks `start..end` of a xorb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ChunkRange {
    pub start: u32,
    pub end: u32,
}

impl ChunkRange {
    pub fn new(start: u32, end: u32) -> Self {
        ChunkRange { start, end }
    }

    pub fn len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    pub fn contains_range(&self, other: &ChunkRange) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// Bytes `start..=end` (both inclusive, like an HTTP `Range` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct HttpRange {
    pub start: u64,
    pub end: u64,
}

impl HttpRange {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `Range` header value for this range.
    pub fn header_value(&self) -> String {
        format!("bytes={}-{}", self.start, self.end)
    }
}

/// One term: chunks of a xorb and their uncompressed length.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReconstructionTerm {
    pub hash: MerkleHash,
    pub unpacked_length: u32,
    pub range: ChunkRange,
}

/// Where to fetch a chunk range of a xorb: a URL and the byte range to request from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FetchInfo {
    pub range: ChunkRange,
    pub url: String,
    pub url_range: HttpRange,
}

/// The reconstruction API's answer for a file or a byte range of it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Reconstruction {
    /// Bytes of the first term to skip (range queries start inside a chunk).
    pub offset_into_first_range: u64,
    pub terms: Vec<ReconstructionTerm>,
    pub fetch_info: HashMap<MerkleHash, Vec<FetchInfo>>,
}

impl Reconstruction {
    /// Total uncompressed bytes of all terms (before skipping `offset_into_first_range`).
    pub fn terms_len(&self) -> u64 {
        self.terms
            .iter()
            .map(|t| u64::from(t.unpacked_length))
            .sum()
    }

    /// The fetch entry that covers a term, if any.
    pub fn fetch_for(&self, term: &ReconstructionTerm) -> Option<&FetchInfo> {
        self.fetch_info
            .get(&term.hash)?
            .iter()
            .find(|f| f.range.contains_range(&term.range))
    }
}

/// The v2 reconstruction answer (hf-xet 1.8 asks `GET /v2/reconstructions/{file}` first):
/// the same terms, with fetch URLs per xorb that may each cover several byte ranges.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ReconstructionV2 {
    pub offset_into_first_range: u64,
    pub terms: Vec<ReconstructionTerm>,
    pub xorbs: HashMap<MerkleHash, Vec<MultiRangeFetch>>,
}

/// One fetch URL of a v2 answer and the byte ranges of the xorb it covers; the client sends
/// exactly these ranges as its `Range` header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MultiRangeFetch {
    pub url: String,
    pub ranges: Vec<RangeDescriptor>,
}

/// A chunk range of a xorb and its bytes (inclusive end, as in `Range` headers).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RangeDescriptor {
    pub chunks: ChunkRange,
    pub bytes: HttpRange,
}

/// One URL per v1 fetch entry, each with its one range: a valid v2 answer that needs no
/// multi-range responses from the xorb data route.
impl From<Reconstruction> for ReconstructionV2 {
    fn from(v1: Reconstruction) -> Self {
        let xorbs = v1
            .fetch_info
            .into_iter()
            .map(|(hash, fetches)| {
                let fetches = fetches
                    .into_iter()
                    .map(|f| MultiRangeFetch {
                        url: f.url,
                        ranges: vec![RangeDescriptor {
                            chunks: f.range,
                            bytes: f.url_range,
                        }],
                    })
                    .collect();
                (hash, fetches)
            })
            .collect();
        ReconstructionV2 {
            offset_into_first_range: v1.offset_into_first_range,
            terms: v1.terms,
            xorbs,
        }
    }
}

/// The answer of the batch reconstruction query (`GET /v1/reconstructions?file_id=..&..`,
/// the reference server's shape): each found file's terms, and the fetch entries of all
/// their xorbs in one map. Files the server does not have (or does not show this token)
/// are left out.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct BatchReconstruction {
    pub files: HashMap<MerkleHash, Vec<ReconstructionTerm>>,
    pub fetch_info: HashMap<MerkleHash, Vec<FetchInfo>>,
}

impl BatchReconstruction {
    /// The whole-file reconstruction of `file`: its terms and the fetch entries that cover
    /// them (only those, so a download fetches no other file's bytes).
    pub fn file(&self, file: &MerkleHash) -> Option<Reconstruction> {
        let terms = self.files.get(file)?.clone();
        let mut fetch_info: HashMap<MerkleHash, Vec<FetchInfo>> = HashMap::new();
        for term in &terms {
            let Some(info) = self
                .fetch_info
                .get(&term.hash)
                .and_then(|infos| infos.iter().find(|f| f.range.contains_range(&term.range)))
            else {
                continue; // the download reports the term without a fetch entry
            };
            let entries = fetch_info.entry(term.hash).or_default();
            if !entries.contains(info) {
                entries.push(info.clone());
            }
        }
        Some(Reconstruction {
            offset_into_first_range: 0,
            terms,
            fetch_info,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(start: u32, end: u32) -> FetchInfo {
        FetchInfo {
            range: ChunkRange::new(start, end),
            url: format!("u{start}-{end}"),
            url_range: HttpRange {
                start: u64::from(start) * 10,
                end: u64::from(end) * 10 - 1,
            },
        }
    }

    /// A file of a batch answer gets the entries covering its terms, and none of another
    /// file's, even in a xorb they share.
    #[test]
    fn a_batch_answer_splits_into_whole_file_reconstructions() {
        let (x, y) = (
            MerkleHash::from_bytes([1; 32]),
            MerkleHash::from_bytes([2; 32]),
        );
        let (f, g) = (
            MerkleHash::from_bytes([8; 32]),
            MerkleHash::from_bytes([9; 32]),
        );
        let term = |hash, s, e| ReconstructionTerm {
            hash,
            unpacked_length: 5,
            range: ChunkRange::new(s, e),
        };
        let batch = BatchReconstruction {
            files: HashMap::from([
                (f, vec![term(x, 0, 2), term(y, 0, 1)]),
                (g, vec![term(x, 4, 6)]),
            ]),
            fetch_info: HashMap::from([(x, vec![info(0, 2), info(4, 6)]), (y, vec![info(0, 1)])]),
        };
        let one = batch.file(&f).unwrap();
        assert_eq!(one.terms.len(), 2);
        assert_eq!(one.fetch_info[&x], vec![info(0, 2)]);
        assert_eq!(one.fetch_info[&y], vec![info(0, 1)]);
        assert_eq!(one.terms_len(), 10);
        let other = batch.file(&g).unwrap();
        assert_eq!(other.fetch_info.len(), 1);
        assert_eq!(other.fetch_info[&x], vec![info(4, 6)]);
        assert!(batch.file(&MerkleHash::from_bytes([3; 32])).is_none());
        // The reference server's JSON field names.
        let json = serde_json::to_value(&batch).unwrap();
        assert!(json.get("files").is_some() && json.get("fetch_info").is_some());
    }
}
