//! Cutting blocks into chunks, with the second half of each block cut ahead on a thread of
//! its own.
//!
//! The chunker is the longest step of hashing a file (about half of its CPU time), and each
//! boundary depends on the one before. But a chunker started anywhere agrees with one that
//! read the input from its start from the first boundary both find on
//! ([`git_xet_core::chunker::chunk_ends`]). So while the chunker thread cuts a block's first
//! half, a helper cuts its second half from a fresh start; when the chunker, past the middle,
//! reaches a boundary the helper also found, the helper's later boundaries are taken as
//! they are. The two usually meet at the first or second chunk past the middle. Where they
//! never meet (an input with no content-defined boundaries, cut only at the maximum size),
//! the chunker cuts the rest itself: the result is the same, only slower.

use std::sync::mpsc;
use std::thread;

use bytes::Bytes;

use super::blocks::BlockSource;
use git_xet_core::chunker::{chunk_ends, Chunker};

/// Blocks from this size on have their second half cut ahead. Well above the maximum chunk
/// size, so that the chunk a block starts with (which may continue the last block's) ends
/// before the middle.
const SPLIT_MIN_BLOCK: usize = 1 << 20;

/// Forces the split chunking on (`1`) or off (`0`) whatever the number of cores.
pub const SPLIT_CHUNKING_ENV: &str = "GIT_XET_SPLIT_CHUNKING";

/// Whether a helper can shorten the pipeline: with two cores its reader, chunker and hasher
/// already keep both busy, and a helper only adds its hand-overs (about 5% more CPU time,
/// for the same wall time). From three on, it cuts the chunker's time (the longest step) in
/// two. [`SPLIT_CHUNKING_ENV`] set to `1` or `0` decides instead (to compare both on one
/// machine).
pub(super) fn helper_pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| match std::env::var(SPLIT_CHUNKING_ENV).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => thread::available_parallelism().is_ok_and(|n| n.get() >= 3),
    })
}

/// A helper thread cutting second halves of blocks from a fresh start.
pub(super) struct HalfCutter {
    halves: mpsc::SyncSender<Bytes>,
    cuts: mpsc::Receiver<(Vec<usize>, Chunker)>,
}

impl HalfCutter {
    pub(super) fn start<'scope>(scope: &'scope thread::Scope<'scope, '_>) -> HalfCutter {
        let (halves, rx) = mpsc::sync_channel::<Bytes>(1);
        let (tx, cuts) = mpsc::sync_channel(1);
        scope.spawn(move || {
            for half in rx {
                if tx.send(chunk_ends(&half)).is_err() {
                    break;
                }
            }
        });
        HalfCutter { halves, cuts }
    }
}

/// Where the helper's cut of the current block stands.
enum Ahead {
    /// No help with this block (small, no helper, or given up).
    Alone,
    /// Its second half, from `mid`, went to the helper.
    Sent { mid: usize },
    /// The helper's chunk ends (relative to `mid`) and its state after the last one.
    Cut {
        mid: usize,
        ends: Vec<usize>,
        tail: Chunker,
    },
}

/// Cuts everything `source` yields into chunks: `raw` sees each block as read, `chunk` each
/// chunk in order; either returning false stops the reading early. With `helper`, large
/// blocks have their second half cut ahead by it. Returns in how many blocks the helper's
/// cut was joined.
pub(super) fn read_and_chunk(
    mut source: impl BlockSource,
    helper: Option<&HalfCutter>,
    mut raw: impl FnMut(&Bytes) -> bool,
    mut chunk: impl FnMut(Bytes) -> bool,
) -> std::io::Result<usize> {
    let mut joined = 0;
    let mut chunker = Chunker::new();
    let mut carry: Vec<u8> = Vec::new();
    while let Some(block) = source.next_block()? {
        if !raw(&block) {
            return Ok(joined);
        }
        let mut ahead = Ahead::Alone;
        if let Some(helper) = helper.filter(|_| block.len() >= SPLIT_MIN_BLOCK) {
            let mid = block.len() / 2;
            if helper.halves.send(block.slice(mid..)).is_ok() {
                ahead = Ahead::Sent { mid };
            }
        }
        let mut start = 0;
        while let Some(len) = chunker.next_boundary(&block[start..]) {
            let end = start + len;
            let data = if carry.is_empty() {
                block.slice(start..end)
            } else {
                carry.extend_from_slice(&block[start..end]);
                Bytes::from(std::mem::take(&mut carry))
            };
            if !chunk(data) {
                return Ok(joined); // the consumer stopped; it reports why
            }
            start = end;
            if let (Ahead::Sent { mid }, Some(helper)) = (&ahead, helper) {
                if end < *mid {
                    continue;
                }
                ahead = match helper.cuts.recv() {
                    Ok((ends, tail)) => Ahead::Cut {
                        mid: *mid,
                        ends,
                        tail,
                    },
                    Err(_) => Ahead::Alone, // the helper is gone: cut on alone
                };
            }
            let Ahead::Cut { mid, ends, tail } = std::mem::replace(&mut ahead, Ahead::Alone) else {
                continue;
            };
            // The first of the helper's boundaries at or after this one.
            let next = ends.partition_point(|&e| mid + e < end);
            if next == ends.len() {
                continue; // past all of them: they never met, and the chunker cuts on alone
            }
            if mid + ends[next] != end {
                ahead = Ahead::Cut { mid, ends, tail };
                continue; // not met yet
            }
            // Met: the helper's later boundaries are the chunker's.
            for &e in &ends[next + 1..] {
                if !chunk(block.slice(start..mid + e)) {
                    return Ok(joined);
                }
                start = mid + e;
            }
            chunker = tail;
            joined += 1;
            break;
        }
        if let (Ahead::Sent { .. }, Some(helper)) = (&ahead, helper) {
            // Never reached the middle (cannot happen with SPLIT_MIN_BLOCK above the maximum
            // chunk size); the answer must not be taken for the next block's.
            let _ = helper.cuts.recv();
        }
        carry.extend_from_slice(&block[start..]);
    }
    if chunker.finish().is_some() {
        chunk(Bytes::from(carry));
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::chunker::chunk_lengths;
    use proptest::prelude::*;

    /// Blocks of the given sizes (the last one takes the rest).
    struct Blocks(std::vec::IntoIter<Bytes>);

    impl Blocks {
        fn of(data: &[u8], sizes: &[usize]) -> Blocks {
            let mut blocks = Vec::new();
            let mut rest = Bytes::copy_from_slice(data);
            for &size in sizes {
                if rest.is_empty() {
                    break;
                }
                blocks.push(rest.split_to(size.min(rest.len())));
            }
            if !rest.is_empty() {
                blocks.push(rest);
            }
            Blocks(blocks.into_iter())
        }
    }

    impl BlockSource for Blocks {
        fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
            Ok(self.0.next())
        }
    }

    /// Chunk lengths and joined blocks, cut with a helper.
    fn cut(data: &[u8], sizes: &[usize]) -> (Vec<usize>, usize) {
        thread::scope(|scope| {
            let helper = HalfCutter::start(scope);
            let mut lengths = Vec::new();
            let joined = read_and_chunk(
                Blocks::of(data, sizes),
                Some(&helper),
                |_| true,
                |c| {
                    lengths.push(c.len());
                    true
                },
            )
            .unwrap();
            (lengths, joined)
        })
    }

    fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn random_data_is_cut_as_by_one_chunker_and_the_halves_meet() {
        let data = random(20 << 20, 7);
        let (lengths, joined) = cut(&data, &[4 << 20; 5]);
        assert_eq!(lengths, chunk_lengths(&data));
        assert!(
            joined >= 4,
            "the helper's cut was used in {joined} of 5 blocks"
        );
    }

    #[test]
    fn data_without_content_defined_boundaries_is_cut_right_alone() {
        // Zeros: the rolling hash settles on a value that is never a boundary, so every
        // chunk ends at the maximum size; a helper starting at the middle is out of step.
        let zeros = vec![0u8; 9 << 20];
        let (lengths, _) = cut(&zeros, &[(3 << 20) + 12_345; 3]);
        assert_eq!(lengths, chunk_lengths(&zeros));
        // A short repeated pattern: boundaries at the same few places of every period.
        let pattern: Vec<u8> = (0..(9 << 20))
            .map(|i| (i % 4099) as u8 ^ (i % 7) as u8)
            .collect();
        let (lengths, _) = cut(&pattern, &[(2 << 20) + 1, 3 << 20, 1 << 20]);
        assert_eq!(lengths, chunk_lengths(&pattern));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Random data, runs of zeros and repeats mixed, in blocks of any size.
        #[test]
        fn any_input_in_any_blocks_is_cut_as_by_one_chunker(
            parts in prop::collection::vec((0u8..3, 1usize..(3 << 20), any::<u64>()), 1..5),
            sizes in prop::collection::vec(1usize..(5 << 20), 1..8),
        ) {
            let mut data = Vec::new();
            for (kind, len, seed) in parts {
                match kind {
                    0 => data.extend(random(len, seed)),
                    1 => data.resize(data.len() + len, 0),
                    _ => {
                        let start = data.len().saturating_sub(len);
                        let again = data[start..].to_vec();
                        data.extend(again);
                    }
                }
            }
            let (lengths, _) = cut(&data, &sizes);
            prop_assert_eq!(lengths, chunk_lengths(&data));
        }
    }
}
