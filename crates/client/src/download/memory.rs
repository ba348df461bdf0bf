//! Ranges read into memory from a reconstruction asked earlier (for a lazy mount): no
//! query per read and no temporary file. The reconstruction is cut down to the terms that
//! overlap the range, so only their xorb ranges are fetched (or read from the chunk cache).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fetch::{Context, Counters, DecodedChunk};
use super::plan::{self, LocalMap};
use super::DownloadOutcome;
use crate::error::{ClientError, Result};
use crate::CasClient;
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::MerkleHash;

/// The terms of `recon` that hold bytes `start..=end` of the file, with the offset into the
/// first of them; `recon_start` is where `recon`'s output begins in the file (after its
/// `offset_into_first_range`). None when `recon` does not cover the whole range.
pub fn slice_reconstruction(
    recon: &Reconstruction,
    recon_start: u64,
    start: u64,
    end: u64,
) -> Option<Reconstruction> {
    if end < start || start < recon_start {
        return None;
    }
    let mut pos = recon_start.checked_sub(recon.offset_into_first_range)?;
    let mut out = Reconstruction::default();
    for term in &recon.terms {
        let len = u64::from(term.unpacked_length);
        if pos + len > start && pos <= end {
            if out.terms.is_empty() {
                out.offset_into_first_range = start - pos;
            }
            out.terms.push(term.clone());
            if let (std::collections::hash_map::Entry::Vacant(slot), Some(f)) = (
                out.fetch_info.entry(term.hash),
                recon.fetch_info.get(&term.hash),
            ) {
                slot.insert(f.clone());
            }
        }
        pos += len;
        if pos > end {
            break;
        }
    }
    (pos > end && !out.terms.is_empty()).then_some(out)
}

/// The first and last chunk a ranged read decoded, whole, with the length of their records
/// in the xorb (header included): a later read of the bytes next to the range can take them
/// instead of fetching them again. None for a chunk read from a local file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeEdges {
    pub first: Option<(Vec<u8>, u32)>,
    pub last: Option<(Vec<u8>, u32)>,
}

/// Where a streaming ranged read puts its bytes: `(offset into the range, bytes)`, in
/// order. A read that is retried starts again at offset 0.
pub type RangeSink = Box<dyn FnMut(u64, &[u8]) + Send>;

/// Given the first chunk a streaming ranged read decodes (whole, with the length of its
/// record) as soon as it is decoded, once: a read of the bytes before the range waits for
/// that chunk, not for the whole range.
pub type FirstChunk = Box<dyn FnOnce(&[u8], u32) + Send>;

impl CasClient {
    /// Bytes `range.0..=range.1` of `file_hash` into memory, through `recon`: the answer to a
    /// reconstruction query for `asked` (None: the whole file). A fetch URL that expired is
    /// asked again with the same query. Chunks come from the chunk cache when it has them
    /// and are added to it when fetched.
    pub async fn read_range(
        &self,
        file_hash: &MerkleHash,
        recon: &Reconstruction,
        asked: Option<(u64, u64)>,
        range: (u64, u64),
    ) -> Result<(Vec<u8>, DownloadOutcome)> {
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let into = out.clone();
        let sink: RangeSink = Box::new(move |at, data| {
            let mut out = into.lock().expect("range buffer");
            out.truncate(at as usize);
            out.extend_from_slice(data);
        });
        let (outcome, _) = self
            .read_range_streaming(file_hash, recon, asked, range, sink, None)
            .await?;
        let data = std::mem::take(&mut *out.lock().expect("range buffer"));
        Ok((data, outcome))
    }

    /// As [`read_range`](Self::read_range), handing the bytes to `sink` as they are
    /// decoded (a reader waits for the start of a range, not its end); also returns the
    /// range's edge chunks, the first of them also to `first` as soon as it is decoded.
    pub async fn read_range_streaming(
        &self,
        file_hash: &MerkleHash,
        recon: &Reconstruction,
        asked: Option<(u64, u64)>,
        range: (u64, u64),
        sink: RangeSink,
        first: Option<FirstChunk>,
    ) -> Result<(DownloadOutcome, RangeEdges)> {
        let first = Arc::new(std::sync::Mutex::new(first));
        let recon_start = asked.map_or(0, |a| a.0);
        let sliced =
            slice_reconstruction(recon, recon_start, range.0, range.1).ok_or_else(|| {
                ClientError::InvalidArgument(format!(
                    "bytes {}-{} are not in the reconstruction of {file_hash} given",
                    range.0, range.1
                ))
            })?;
        match self
            .read_attempt(file_hash, &sliced, asked, range, true, sink, &first)
            .await
        {
            Err((ClientError::Corrupt { what, reason }, sink)) if self.chunk_cache.is_some() => {
                tracing::warn!("{what}: {reason}; retrying with data from the server only");
                self.read_attempt(file_hash, &sliced, asked, range, false, sink, &first)
                    .await
                    .map_err(|(e, _)| e)
            }
            other => other.map_err(|(e, _)| e),
        }
    }

    /// One attempt; on failure the sink is handed back for the next.
    #[allow(clippy::too_many_arguments)]
    async fn read_attempt(
        &self,
        file_hash: &MerkleHash,
        sliced: &Reconstruction,
        asked: Option<(u64, u64)>,
        range: (u64, u64),
        use_cache: bool,
        mut sink: RangeSink,
        first: &Arc<std::sync::Mutex<Option<FirstChunk>>>,
    ) -> std::result::Result<(DownloadOutcome, RangeEdges), (ClientError, RangeSink)> {
        let segments = match plan::plan(sliced, &LocalMap::new()) {
            Ok(s) => s,
            Err(e) => return Err((e, sink)),
        };
        let len = range.1 - range.0 + 1;
        let ctx = Arc::new(Context {
            api: self.api.clone(),
            file: *file_hash,
            range: asked,
            cache: self.chunk_cache.clone(),
            read_cache: use_cache,
            sources: Vec::new(),
            shared: None,
            counters: Counters::default(),
            hash_chunks: false,
        });
        let mut skip = sliced.offset_into_first_range;
        let (mut done, mut edges) = (0u64, RangeEdges::default());
        let mut last: Option<DecodedChunk> = None;
        let produced = self
            .produce_each(ctx.clone(), segments, |chunk| {
                let dropped = skip.min(chunk.data.len() as u64) as usize;
                skip -= dropped as u64;
                let take = (chunk.data.len() - dropped).min((len - done) as usize);
                sink(done, &chunk.data[dropped..dropped + take]);
                done += take as u64;
                if chunk.stored_len > 0 {
                    if edges.first.is_none() && last.is_none() {
                        if let Some(tell) = first.lock().expect("first chunk").take() {
                            tell(&chunk.data, chunk.stored_len);
                        }
                        edges.first = Some((chunk.data.to_vec(), chunk.stored_len));
                    }
                    last = Some(chunk);
                }
                std::future::ready(Ok(()))
            })
            .await;
        edges.last = last.map(|c| (c.data.to_vec(), c.stored_len));
        if let (Err(ClientError::Corrupt { .. }), Some(cache)) = (&produced, &self.chunk_cache) {
            for path in ctx.counters.cache_paths.lock().expect("cache paths").iter() {
                cache.remove(path);
            }
        }
        if let Err(e) = produced {
            return Err((e, sink));
        }
        if done != len {
            let e = ClientError::corrupt(
                format!("reading bytes {}-{} of {file_hash}", range.0, range.1),
                format!("got {done} bytes, expected {len}"),
            );
            return Err((e, sink));
        }
        let c = &ctx.counters;
        let outcome = DownloadOutcome {
            bytes_written: len,
            network_bytes: c.network_bytes.load(Ordering::Relaxed),
            cache_bytes: c.cache_bytes.load(Ordering::Relaxed),
            ..Default::default()
        };
        Ok((outcome, edges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;
    use git_xet_core::reconstruction::{ChunkRange, ReconstructionTerm};

    fn recon(offset: u64, lens: &[u32]) -> Reconstruction {
        Reconstruction {
            offset_into_first_range: offset,
            terms: lens
                .iter()
                .enumerate()
                .map(|(i, &l)| ReconstructionTerm {
                    hash: chunk_hash(&[i as u8]),
                    unpacked_length: l,
                    range: ChunkRange::new(0, 1),
                })
                .collect(),
            fetch_info: Default::default(),
        }
    }

    #[test]
    fn slices_keep_only_the_overlapping_terms() {
        // Terms at 90..190, 190..290, 290..390 of the file; the query began at 100.
        let r = recon(10, &[100, 100, 100]);
        let s = slice_reconstruction(&r, 100, 195, 200).unwrap();
        assert_eq!((s.offset_into_first_range, s.terms.len()), (5, 1));
        assert_eq!(s.terms[0], r.terms[1]);
        let s = slice_reconstruction(&r, 100, 150, 290).unwrap();
        assert_eq!((s.offset_into_first_range, s.terms.len()), (60, 3));
        let s = slice_reconstruction(&r, 100, 100, 389).unwrap();
        assert_eq!((s.offset_into_first_range, s.terms.len()), (10, 3));
        // Not covered: before the query's start, past the terms, backwards.
        assert!(slice_reconstruction(&r, 100, 95, 120).is_none());
        assert!(slice_reconstruction(&r, 100, 300, 390).is_none());
        assert!(slice_reconstruction(&r, 100, 200, 199).is_none());
        assert!(slice_reconstruction(&recon(0, &[]), 0, 0, 0).is_none());
    }
}
