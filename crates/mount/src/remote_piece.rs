//! One piece of a range read through a reconstruction, with the chunks at its edges that
//! adjacent reads fetch taken out of it (`crate::edges`).

use std::sync::Arc;

use super::{Asked, Shared, XetRemote};
use crate::blocks::Sink;
use crate::edges::{edge_keys, trim, Edge, Pending, FIRST, LAST};
use git_xet_client::{slice_reconstruction, CasClient, ClientError};
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::MerkleHash;

/// A piece's outcome: what was fetched (its reconstruction, whole chunks), or an error
/// (None: the deadline passed).
type PieceResult = Result<Option<Asked>, Option<ClientError>>;

impl XetRemote {
    /// Bytes `s..=e` through a reconstruction asked for `asked`, into `sink` at `s - base`;
    /// the chunks at its edges that an adjacent read decoded (or is fetching) are taken out
    /// of its fetch, and those this read decodes are kept. Returns what was fetched: its
    /// reconstruction and the bytes it gives, whole chunks (adjacent reads' tile the file
    /// at chunk boundaries, as the chunk cache's entries do).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_piece(
        &self,
        client: &CasClient,
        hash: &MerkleHash,
        (asked, recon): ((u64, u64), &Reconstruction),
        (s, e): (u64, u64),
        base: u64,
        deadline: tokio::time::Instant,
        sink: &Shared,
    ) -> PieceResult {
        let sliced = slice_reconstruction(recon, asked.0, s, e).ok_or_else(|| {
            Some(ClientError::InvalidArgument(format!(
                "bytes {s}-{e} are not in the reconstruction of {hash} kept"
            )))
        })?;
        let keys = edge_keys(&sliced);
        let claimed = self
            .edges
            .claim(keys, ends_of(&sliced, s), deadline.into_std());
        // The first chunk is another read's last (or the last another's first), in flight:
        // left out of this fetch now, its bytes taken once that read kept it (for a first
        // chunk, the sink gets them after the rest of the piece).
        let placeholder = [FIRST, LAST].map(|i| match (&claimed.kept[i], claimed.pending[i]) {
            (None, Some(p)) => placeholder_edge(&sliced, s, i, p),
            _ => None,
        });
        let first = claimed.kept[0].as_ref().or(placeholder[0].as_ref());
        let last = claimed.kept[1].as_ref().or(placeholder[1].as_ref());
        let mut plan = trim(&sliced, (s, e), first, last);
        let waits = placeholder[0].is_some() && !plan.prefix.is_empty();
        if !waits {
            (sink.lock().expect("sink"))(s - base, &plan.prefix);
        }
        let mut decoded = Vec::new();
        let mut result = Ok(None);
        if let Some((middle, s2, e2)) = &plan.middle {
            // Into the sink as it comes, a prefix that waits included: the sink holds the
            // gap and takes the prefix later.
            let piece: Sink = {
                let (to, offset) = (sink.clone(), s2 - base);
                Box::new(move |a, d| (to.lock().expect("sink"))(offset + a, d))
            };
            // This read fetches its first chunk for a read in flight that ends in it: that
            // read gets the chunk as soon as it is decoded.
            let first = keys[0]
                .filter(|k| claimed.marked.contains(k) && edge_keys(middle)[0] == Some(*k))
                .map(|k| {
                    let edges = self.edges.clone();
                    Box::new(move |data: &[u8], stored: u32| {
                        edges.keep(k, (Arc::new(data.to_vec()), stored))
                    }) as git_xet_client::FirstChunk
                });
            // On the runtime's workers rather than this thread: each decoded chunk then
            // passes to the task that hands it to the sink without waking another thread.
            let (client2, hash2, middle2, range) =
                (client.clone(), *hash, middle.clone(), (*s2, *e2));
            let read = self.runtime.spawn(async move {
                let read = client2.read_range_streaming(
                    &hash2,
                    &middle2,
                    Some(range),
                    range,
                    piece,
                    first,
                );
                tokio::time::timeout_at(deadline, read).await
            });
            result = match self.runtime.block_on(read) {
                Err(e) => Err(Some(ClientError::Aborted(format!(
                    "the range read failed: {e}"
                )))),
                Ok(Err(_)) => Err(None),
                Ok(Ok(Err(e))) => Err(Some(e)),
                Ok(Ok(Ok((done, edges)))) => {
                    tracing::debug!(
                        %hash, s2, e2, network = done.network_bytes, cache = done.cache_bytes,
                        "range read"
                    );
                    for (key, edge) in edge_keys(middle).iter().zip([edges.first, edges.last]) {
                        if let (Some(k), Some((data, stored))) = (key, edge) {
                            decoded.push((*k, (Arc::new(data), stored)));
                        }
                    }
                    let first = s2 - middle.offset_into_first_range;
                    let mut whole = middle.clone();
                    whole.offset_into_first_range = 0;
                    Ok(Some((
                        (first, first + whole.terms_len() - 1),
                        Arc::new(whole),
                    )))
                }
            };
        }
        self.edges.release(&claimed.marked, decoded);
        let fetched = result?;
        if waits {
            let len = plan.prefix.len();
            let prefix = match keys[0].and_then(|k| self.edges.wait_kept(k, deadline.into_std())) {
                Some((data, _))
                    if Some(data.len()) == placeholder[0].as_ref().map(|p| p.0.len()) =>
                {
                    let o = sliced.offset_into_first_range as usize;
                    data[o..o + len].to_vec()
                }
                // The other read failed: these bytes alone, through this piece's query.
                _ => {
                    self.read_alone(client, hash, &sliced, s, (s, s + len as u64 - 1), deadline)?
                }
            };
            (sink.lock().expect("sink"))(s - base, &prefix);
        }
        let after = plan
            .middle
            .as_ref()
            .map_or(s + plan.prefix.len() as u64, |m| m.2 + 1);
        if let (Some(p), Some(held), false) =
            (claimed.pending[1], &placeholder[1], plan.suffix.is_empty())
        {
            // The suffix is the last chunk's bytes from `after` on (the chunk begins at p.file).
            let o = (after - p.file) as usize;
            let len = plan.suffix.len();
            plan.suffix = match keys[1].and_then(|k| self.edges.wait_kept(k, deadline.into_std())) {
                Some((data, _)) if data.len() == held.0.len() => data[o..o + len].to_vec(),
                // The other read failed: these bytes alone, through this piece's query.
                _ => self.read_alone(client, hash, &sliced, s, (after, e), deadline)?,
            };
        }
        (sink.lock().expect("sink"))(after - base, &plan.suffix);
        Ok(fetched)
    }

    /// Bytes `range` through `sliced` (which begins at `from`), read on their own.
    fn read_alone(
        &self,
        client: &CasClient,
        hash: &MerkleHash,
        sliced: &Reconstruction,
        from: u64,
        range: (u64, u64),
        deadline: tokio::time::Instant,
    ) -> Result<Vec<u8>, Option<ClientError>> {
        let read = client.read_range(hash, sliced, Some((from, range.1)), range);
        match self
            .runtime
            .block_on(async { tokio::time::timeout_at(deadline, read).await })
        {
            Err(_) => Err(None),
            Ok(r) => r.map(|(data, _)| data).map_err(Some),
        }
    }
}

/// Where the first chunk of a read of bytes from `s` through `sliced` begins and where its
/// last ends, in the xorb and in the file, for the reads of the bytes next to it.
fn ends_of(sliced: &Reconstruction, s: u64) -> [Option<Pending>; 2] {
    let starts = s.checked_sub(sliced.offset_into_first_range);
    let first = sliced.terms.first().and_then(|t| {
        let entries = sliced.fetch_info.get(&t.hash)?;
        let entry = entries.iter().find(|f| f.range.start == t.range.start)?;
        Some(Pending {
            record: entry.url_range.start,
            file: starts?,
        })
    });
    let last = sliced.terms.last().and_then(|t| {
        let entries = sliced.fetch_info.get(&t.hash)?;
        let entry = entries.iter().find(|f| f.range.end == t.range.end)?;
        Some(Pending {
            record: entry.url_range.end + 1,
            file: starts? + sliced.terms_len(),
        })
    });
    [first, last]
}

/// The chunk at `end` of a read from `s` (its first or last), as another read in flight
/// describes it (`p`): its length and record length, with zeros for bytes until that read
/// keeps it.
fn placeholder_edge(sliced: &Reconstruction, s: u64, end: usize, p: Pending) -> Option<Edge> {
    let starts = s.checked_sub(sliced.offset_into_first_range)?;
    let (len, stored) = if end == FIRST {
        let t = sliced.terms.first()?;
        let entries = sliced.fetch_info.get(&t.hash)?;
        let entry = entries.iter().find(|f| f.range.start == t.range.start)?;
        (
            p.file.checked_sub(starts)?,
            p.record.checked_sub(entry.url_range.start)?,
        )
    } else {
        let t = sliced.terms.last()?;
        let entries = sliced.fetch_info.get(&t.hash)?;
        let entry = entries.iter().find(|f| f.range.end == t.range.end)?;
        (
            (starts + sliced.terms_len()).checked_sub(p.file)?,
            (entry.url_range.end + 1).checked_sub(p.record)?,
        )
    };
    let max = git_xet_core::constants::MAX_CHUNK_SIZE as u64;
    if len == 0 || len > max || stored == 0 || stored > max + 64 {
        return None;
    }
    Some((Arc::new(vec![0; len as usize]), stored as u32))
}
