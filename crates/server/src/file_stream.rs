//! Streaming a registered file (or a byte range of it) as plain bytes: the git-lfs `basic`
//! download. Xorb ranges are read a few MiB at a time, decoded, and every chunk is checked
//! against its hash before it is sent, so memory stays bounded and corruption on disk is
//! never served as data (the stream fails instead).

use axum::body::Body;
use bytes::Bytes;
use sha2::Digest;
use tokio::sync::mpsc;

use crate::metrics::add;
use crate::reconstruct::Plan;
use crate::state::SharedState;
use git_xet_core::hash::chunk_hash;
use git_xet_core::xorb::ChunkRecords;
use git_xet_index::RepoName;
use git_xet_storage::ObjectKey;

/// Serialized bytes read from a xorb at once.
const READ_GROUP: usize = 4 * 1024 * 1024;
/// Reads in flight ahead of the one being decoded.
const READ_AHEAD: usize = 3;

/// A repository's unverified sha256 claim for a whole file being streamed: the stream hashes
/// what it sends and holds back its last piece until the hash is known. On a match the
/// content's sha256 is recorded; otherwise the claim is dropped (the object becomes absent
/// in that repository) and the stream fails, so the client never sees a complete body.
#[derive(Debug, Clone)]
pub struct ClaimCheck {
    pub repo: RepoName,
    pub file_hash: git_xet_core::MerkleHash,
    pub sha256: [u8; 32],
}

/// Sends pieces, hashing them and holding the last one back while a claim is checked.
struct Outlet<'a> {
    tx: &'a mpsc::Sender<std::io::Result<Bytes>>,
    /// The client went away: the content was not all hashed.
    gone: bool,
    check: Option<(sha2::Sha256, Option<Bytes>)>,
}

impl Outlet<'_> {
    /// Returns `false` when the client went away.
    fn send(&mut self, bytes: Bytes) -> bool {
        let bytes = match &mut self.check {
            Some((hasher, held)) => {
                hasher.update(&bytes);
                match held.replace(bytes) {
                    Some(previous) => previous,
                    None => return true,
                }
            }
            None => bytes,
        };
        self.gone = self.tx.blocking_send(Ok(bytes)).is_err();
        !self.gone
    }
}

/// A body that yields `len` bytes of the file starting `plan.offset_into_first_range` bytes
/// into its first term (the whole file when `claim` is given).
pub fn stream_plan(state: SharedState, plan: Plan, len: u64, claim: Option<ClaimCheck>) -> Body {
    let (tx, mut rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut sender = Outlet {
            tx: &tx,
            gone: false,
            check: claim.as_ref().map(|_| (sha2::Sha256::new(), None)),
        };
        let result = produce(&state, &handle, &plan, len, &mut sender)
            .and_then(|()| settle_claim(&state, claim, &mut sender));
        if let Err(e) = result {
            tracing::error!("streaming a file failed: {e}");
            let _ = tx.blocking_send(Err(e));
        }
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Body::from_stream(stream)
}

/// One read of a term's chunk records `start..end` (at most [`READ_GROUP`] bytes).
struct GroupRead<'a> {
    term: &'a crate::reconstruct::PlannedTerm,
    start: usize,
    end: usize,
}

fn produce(
    state: &SharedState,
    handle: &tokio::runtime::Handle,
    plan: &Plan,
    len: u64,
    tx: &mut Outlet,
) -> std::io::Result<()> {
    let mut groups = Vec::new();
    for term in &plan.terms {
        let footer = &term.xorb.footer;
        let mut start = term.start as usize;
        while start < term.end as usize {
            let mut end = start + 1;
            while end < term.end as usize
                && footer.records_range(start, end + 1).len() <= READ_GROUP
            {
                end += 1;
            }
            groups.push(GroupRead { term, start, end });
            start = end;
        }
    }
    // Reads run READ_AHEAD groups ahead of decoding, so that a store with per-request
    // latency (S3) is not waited for one group at a time; memory stays READ_AHEAD groups.
    let mut pending = std::collections::VecDeque::new();
    let mut next = 0;
    let mut skip = plan.offset_into_first_range as usize;
    let mut remaining = len as usize;
    // Ok(true): the client went away.
    let result = (|| -> std::io::Result<bool> {
        for group in &groups {
            while next < groups.len() && pending.len() < READ_AHEAD {
                let g = &groups[next];
                let footer = &g.term.xorb.footer;
                let key = ObjectKey::xorb(footer.hash);
                let range = footer.records_range(g.start, g.end);
                let store = state.store.clone();
                pending.push_back(handle.spawn(async move {
                    store
                        .read_range(key, range.start as u64..range.end as u64)
                        .await
                }));
                next += 1;
            }
            if remaining == 0 {
                break;
            }
            let read = pending.pop_front().expect("a read per group");
            let records = handle.block_on(read).map_err(std::io::Error::other)??;
            let footer = &group.term.xorb.footer;
            let (start, end) = (group.start, group.end);
            let mut out = Vec::with_capacity(footer.unpacked_range_len(start, end) as usize);
            for (k, record) in ChunkRecords::new(&records).enumerate() {
                let i = start + k;
                let before = out.len();
                record
                    .and_then(|r| r.decode_into(&mut out))
                    .map_err(std::io::Error::other)?;
                if chunk_hash(&out[before..]) != footer.chunk_hashes[i] {
                    return Err(std::io::Error::other(format!(
                        "xorb {} chunk {i} is corrupt on disk",
                        footer.hash
                    )));
                }
            }
            let from = skip.min(out.len());
            skip -= from;
            let to = out.len().min(from + remaining);
            if to > from {
                remaining -= to - from;
                add(&state.metrics.lfs_basic_bytes_served, (to - from) as u64);
                let bytes = Bytes::from(out).slice(from..to);
                if !tx.send(bytes) {
                    return Ok(true); // the client went away
                }
            }
        }
        Ok(false)
    })();
    for read in pending {
        read.abort();
    }
    if result? {
        return Ok(());
    }
    if remaining > 0 {
        return Err(std::io::Error::other(format!(
            "reconstruction ended {remaining} bytes short"
        )));
    }
    Ok(())
}

/// After the whole file was hashed: records the verified sha256 and sends the held-back
/// piece, or drops the false claim and fails the stream.
fn settle_claim(
    state: &SharedState,
    claim: Option<ClaimCheck>,
    sender: &mut Outlet,
) -> std::io::Result<()> {
    let (Some(claim), Some((hasher, held))) = (claim, sender.check.take()) else {
        return Ok(());
    };
    if sender.gone {
        return Ok(()); // not all of it was hashed: nothing is known
    }
    let actual: [u8; 32] = hasher.finalize().into();
    let index = &state.index;
    // Every chunk was checked against its hash: this is the content's sha256 either way.
    index
        .record_verified_sha256(&claim.file_hash, &actual)
        .map_err(std::io::Error::other)?;
    if actual == claim.sha256 {
        if let Some(last) = held {
            let _ = sender.tx.blocking_send(Ok(last));
        }
        return Ok(());
    }
    index
        .drop_sha256_claim(&claim.repo, &claim.file_hash, &claim.sha256)
        .map_err(std::io::Error::other)?;
    tracing::error!(
        repo = %claim.repo,
        file = %claim.file_hash,
        claimed = %git_xet_core::hash::sha256_hex(&claim.sha256),
        actual = %git_xet_core::hash::sha256_hex(&actual),
        "a shard's sha256 claim was false; the claim is dropped"
    );
    Err(std::io::Error::other(format!(
        "file {} does not have the sha256 {} claimed for it in {}; the claim is dropped",
        claim.file_hash,
        git_xet_core::hash::sha256_hex(&claim.sha256),
        claim.repo
    )))
}
