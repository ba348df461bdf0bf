//! Streaming a registered file (or a byte range of it) as plain bytes: the git-lfs `basic`
//! download. Xorb ranges are read a few MiB at a time, decoded, and every chunk is checked
//! against its hash before it is sent, so memory stays bounded and corruption on disk is
//! never served as data (the stream fails instead).

use axum::body::Body;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::server::metrics::add;
use crate::server::reconstruct::Plan;
use crate::server::state::SharedState;
use crate::server::storage::ObjectKey;
use crate::xet::hash::chunk_hash;
use crate::xet::xorb::ChunkRecords;

/// Serialized bytes read from a xorb at once.
const READ_GROUP: usize = 4 * 1024 * 1024;

/// A body that yields `len` bytes of the file starting `plan.offset_into_first_range` bytes
/// into its first term.
pub fn stream_plan(state: SharedState, plan: Plan, len: u64) -> Body {
    let (tx, mut rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = produce(&state, &handle, &plan, len, &tx) {
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
    tx: &mpsc::Sender<std::io::Result<Bytes>>,
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
                if tx.blocking_send(Ok(bytes)).is_err() {
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
