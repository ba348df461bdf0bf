//! What each version of a file cost the server: of the chunks its reconstruction uses, the
//! bytes that earlier versions already used (shared, stored once) and the rest (new). A file
//! is a list of terms, each a range of chunks in one xorb; two versions share exactly the
//! (xorb, chunk) pairs both use, so the comparison is an intersection of chunk ranges per
//! xorb. Pure: the server hands in the terms and the chunk sizes it read from its index.

use std::collections::{BTreeMap, HashMap};

/// A xorb's hash.
pub type XorbId = [u8; 32];

/// One term of a file's reconstruction: chunks `start..end` of `xorb`, `bytes` long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub xorb: XorbId,
    pub start: u32,
    pub end: u32,
    pub bytes: u64,
}

/// A version's bytes split into new and shared with earlier versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    pub new: u64,
    pub shared: u64,
}

impl Cost {
    pub fn total(&self) -> u64 {
        self.new + self.shared
    }
}

/// Chunk sizes by xorb: `sizes[xorb][i]` is chunk `i`'s uncompressed length. A xorb missing
/// here (not indexed any more, or past the caller's cap) is counted in proportion to its
/// chunk counts instead.
pub type ChunkSizes = HashMap<XorbId, Vec<u32>>;

/// Disjoint, non-touching chunk ranges of one xorb: start -> end.
type Ranges = BTreeMap<u32, u32>;

/// The costs of `versions`, given oldest first: each compared with the union of every
/// version before it. Within one version a chunk used twice counts twice, as the file's
/// bytes do.
pub fn version_costs(versions: &[Vec<Term>], sizes: &ChunkSizes) -> Vec<Cost> {
    let mut seen: HashMap<XorbId, Ranges> = HashMap::new();
    let mut costs = Vec::with_capacity(versions.len());
    for terms in versions {
        let mut cost = Cost::default();
        for term in terms {
            let shared_chunks = overlaps(seen.get(&term.xorb), term.start, term.end);
            let shared = bytes_of(term, &shared_chunks, sizes.get(&term.xorb));
            cost.shared += shared;
            cost.new += term.bytes.saturating_sub(shared);
        }
        for term in terms {
            insert(seen.entry(term.xorb).or_default(), term.start, term.end);
        }
        costs.push(cost);
    }
    costs
}

/// The parts of `start..end` that `ranges` cover.
fn overlaps(ranges: Option<&Ranges>, start: u32, end: u32) -> Vec<(u32, u32)> {
    let Some(ranges) = ranges.filter(|_| start < end) else {
        return Vec::new();
    };
    // The range starting at or before `start`, then every one starting inside.
    let first = ranges.range(..=start).next_back();
    let inside = ranges.range(start.saturating_add(1)..end);
    first
        .into_iter()
        .chain(inside)
        .filter_map(|(&s, &e)| {
            let (s, e) = (s.max(start), e.min(end));
            (s < e).then_some((s, e))
        })
        .collect()
}

/// Bytes of the chunk ranges `parts` of `term`: exact from `sizes`, else in proportion.
fn bytes_of(term: &Term, parts: &[(u32, u32)], sizes: Option<&Vec<u32>>) -> u64 {
    let exact = sizes.and_then(|sizes| {
        parts.iter().try_fold(0u64, |sum, &(s, e)| {
            let chunks = sizes.get(s as usize..e as usize)?;
            Some(sum + chunks.iter().map(|&n| u64::from(n)).sum::<u64>())
        })
    });
    if let Some(bytes) = exact {
        return bytes.min(term.bytes);
    }
    let span = u64::from(term.end.saturating_sub(term.start));
    if span == 0 {
        return 0;
    }
    let chunks: u64 = parts.iter().map(|&(s, e)| u64::from(e - s)).sum();
    (u128::from(term.bytes) * u128::from(chunks) / u128::from(span)) as u64
}

/// Adds `start..end` to `ranges`, merging what it overlaps or touches.
fn insert(ranges: &mut Ranges, mut start: u32, mut end: u32) {
    if start >= end {
        return;
    }
    if let Some((&s, &e)) = ranges.range(..=start).next_back() {
        if e >= start {
            start = s;
            end = end.max(e);
            ranges.remove(&s);
        }
    }
    let absorbed: Vec<(u32, u32)> = ranges.range(start..=end).map(|(&s, &e)| (s, e)).collect();
    for (s, e) in absorbed {
        end = end.max(e);
        ranges.remove(&s);
    }
    ranges.insert(start, end);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: XorbId = [1; 32];
    const B: XorbId = [2; 32];

    fn term(xorb: XorbId, start: u32, end: u32, sizes: &ChunkSizes) -> Term {
        let bytes = sizes[&xorb][start as usize..end as usize]
            .iter()
            .map(|&n| u64::from(n))
            .sum();
        Term {
            xorb,
            start,
            end,
            bytes,
        }
    }

    #[test]
    fn a_second_checkpoint_shares_what_it_did_not_change() {
        let sizes: ChunkSizes = [(A, vec![100; 10]), (B, vec![7, 9, 11])].into();
        let v1 = vec![term(A, 0, 10, &sizes)];
        // v2: chunks 0..4 and 6..10 as before, 4..6 rewritten into B.
        let v2 = vec![
            term(A, 0, 4, &sizes),
            term(B, 0, 3, &sizes),
            term(A, 6, 10, &sizes),
        ];
        // v3: v1 again, and B's first chunk.
        let v3 = vec![term(A, 0, 10, &sizes), term(B, 0, 1, &sizes)];
        let costs = version_costs(&[v1, v2, v3], &sizes);
        assert_eq!(
            costs[0],
            Cost {
                new: 1000,
                shared: 0
            }
        );
        assert_eq!(
            costs[1],
            Cost {
                new: 27,
                shared: 800
            }
        );
        assert_eq!(
            costs[2],
            Cost {
                new: 0,
                shared: 1007
            }
        );
    }

    #[test]
    fn missing_chunk_sizes_count_in_proportion() {
        let t = Term {
            xorb: A,
            start: 0,
            end: 4,
            bytes: 400,
        };
        let half = Term {
            xorb: A,
            start: 2,
            end: 6,
            bytes: 1000,
        };
        let costs = version_costs(&[vec![t], vec![half]], &ChunkSizes::new());
        assert_eq!(
            costs[1],
            Cost {
                new: 500,
                shared: 500
            }
        );
    }

    #[test]
    fn ranges_merge() {
        let mut r = Ranges::new();
        insert(&mut r, 5, 8);
        insert(&mut r, 0, 2);
        insert(&mut r, 2, 5);
        insert(&mut r, 10, 12);
        insert(&mut r, 9, 9);
        assert_eq!(r.into_iter().collect::<Vec<_>>(), [(0, 8), (10, 12)]);
    }

    proptest! {
        /// Against a chunk-by-chunk set: shared bytes are exactly the chunks seen before.
        #[test]
        fn costs_match_a_plain_set(
            versions in proptest::collection::vec(
                proptest::collection::vec((0u8..3, 0u32..40, 0u32..12), 0..6), 1..6),
        ) {
            let xorb = |i: u8| [i; 32];
            let sizes: ChunkSizes = (0..3u8)
                .map(|i| (xorb(i), (0..60u32).map(|c| c * 3 + u32::from(i) + 1).collect()))
                .collect();
            let versions: Vec<Vec<Term>> = versions
                .iter()
                .map(|v| v.iter().map(|&(x, s, n)| term(xorb(x), s, s + n, &sizes)).collect())
                .collect();
            let mut seen = std::collections::HashSet::new();
            for (terms, cost) in versions.iter().zip(version_costs(&versions, &sizes)) {
                let mut shared = 0u64;
                for t in terms {
                    for c in t.start..t.end {
                        if seen.contains(&(t.xorb, c)) {
                            shared += u64::from(sizes[&t.xorb][c as usize]);
                        }
                    }
                }
                let total: u64 = terms.iter().map(|t| t.bytes).sum();
                prop_assert_eq!(cost, Cost { new: total - shared, shared });
                for t in terms {
                    for c in t.start..t.end {
                        seen.insert((t.xorb, c));
                    }
                }
            }
        }
    }
}
