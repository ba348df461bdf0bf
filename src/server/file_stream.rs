//! Streaming a registered file (or a byte range of it) as plain bytes: the git-lfs `basic`
//! download. Xorb ranges are read a few MiB at a time, decoded, and every chunk is checked
//! against its hash before it is sent, so memory stays bounded and corruption on disk is
//! never served as data (the stream fails instead).

use axum::body::Body;
use bytes::Bytes;
use sha2::Digest;
use tokio::sync::mpsc;

use crate::server::metrics::add;
use crate::server::reconstruct::Plan;
use crate::server::repo_name::RepoName;
use crate::server::state::SharedState;
use crate::server::storage::ObjectKey;
use crate::xet::hash::chunk_hash;
use crate::xet::xorb::ChunkRecords;

/// Serialized bytes read from a xorb at once.
const READ_GROUP: usize = 4 * 1024 * 1024;

/// A repository's unverified sha256 claim for a whole file being streamed: the stream hashes
/// what it sends and holds back its last piece until the hash is known. On a match the
/// content's sha256 is recorded; otherwise the claim is dropped (the object becomes absent
/// in that repository) and the stream fails, so the client never sees a complete body.
#[derive(Debug, Clone)]
pub struct ClaimCheck {
    pub repo: RepoName,
    pub file_hash: crate::xet::MerkleHash,
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

fn produce(
    state: &SharedState,
    handle: &tokio::runtime::Handle,
    plan: &Plan,
    len: u64,
    tx: &mut Outlet,
) -> std::io::Result<()> {
    let mut skip = plan.offset_into_first_range as usize;
    let mut remaining = len as usize;
    for term in &plan.terms {
        let footer = &term.xorb.footer;
        let key = ObjectKey::xorb(footer.hash);
        let mut start = term.start as usize;
        while start < term.end as usize && remaining > 0 {
            let mut end = start + 1;
            while end < term.end as usize
                && footer.records_range(start, end + 1).len() <= READ_GROUP
            {
                end += 1;
            }
            let range = footer.records_range(start, end);
            let records = handle.block_on(
                state
                    .store
                    .read_range(key, range.start as u64..range.end as u64),
            )?;
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
            start = end;
            let from = skip.min(out.len());
            skip -= from;
            let to = out.len().min(from + remaining);
            if to > from {
                remaining -= to - from;
                add(&state.metrics.lfs_basic_bytes_served, (to - from) as u64);
                let bytes = Bytes::from(out).slice(from..to);
                if !tx.send(bytes) {
                    return Ok(()); // the client went away
                }
            }
        }
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
        claimed = %crate::xet::hash::sha256_hex(&claim.sha256),
        actual = %crate::xet::hash::sha256_hex(&actual),
        "a shard's sha256 claim was false; the claim is dropped"
    );
    Err(std::io::Error::other(format!(
        "file {} does not have the sha256 {} claimed for it in {}; the claim is dropped",
        claim.file_hash,
        crate::xet::hash::sha256_hex(&claim.sha256),
        claim.repo
    )))
}
