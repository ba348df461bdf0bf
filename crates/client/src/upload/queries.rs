//! A session's global dedup queries.
//!
//! A small file does not wait for the answer about its first chunk: the query goes out in
//! the background and the chunk is packed as new data, so the file costs one round trip
//! less (query, xorb, shard become query alongside xorb, then shard). The answer is kept, as
//! any other, for the files after it. What a hit could have saved is at most the file
//! itself, [`BACKGROUND_MAX_BYTES`], about what one round trip costs on a 100 Mbit/s link
//! at 20 ms; uploads of many small files pay that round trip on every file.

use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::cas::CasApi;
use crate::error::Result;
use git_xet_core::MerkleHash;

/// Files up to this size do not wait for global dedup answers.
pub const BACKGROUND_MAX_BYTES: u64 = 256 * 1024;
/// How long `finish` waits for answers still out (sent before the xorb and the shard, they
/// are normally in by then).
pub const FINISH_WAIT: Duration = Duration::from_secs(1);

type Answer = Result<Option<Bytes>>;

/// Asks the server's global dedup, waiting for the answer or not. Used from blocking
/// threads (the planner's).
pub struct GlobalQueries {
    api: CasApi,
    handle: Handle,
    background: Vec<JoinHandle<Answer>>,
}

impl GlobalQueries {
    pub fn new(api: CasApi, handle: Handle) -> Self {
        GlobalQueries {
            api,
            handle,
            background: Vec::new(),
        }
    }

    /// The answer shard for `hash`, if any; in the `background`, always None now and the
    /// answer later from [`GlobalQueries::answers`].
    pub fn ask(&mut self, hash: &MerkleHash, background: bool) -> Answer {
        if !background {
            return self.handle.block_on(self.api.query_chunk(hash));
        }
        let api = self.api.clone();
        let hash = *hash;
        self.background.push(
            self.handle
                .spawn(async move { api.query_chunk(&hash).await }),
        );
        Ok(None)
    }

    /// The answer shards of background queries that have finished, after waiting up to
    /// `wait` for the others (an answer still out then is dropped: it would delay the
    /// upload for a dedup chance only). A failed query only costs its dedup.
    pub fn answers(&mut self, wait: Duration) -> Vec<Bytes> {
        let (done, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.background)
            .into_iter()
            .partition(|query| query.is_finished());
        let mut answers: Vec<_> = done.into_iter().map(|q| self.handle.block_on(q)).collect();
        if wait.is_zero() {
            self.background = pending;
        } else {
            let deadline = tokio::time::Instant::now() + wait;
            for query in pending {
                match self
                    .handle
                    .block_on(tokio::time::timeout_at(deadline, query))
                {
                    Ok(answer) => answers.push(answer),
                    Err(_) => tracing::debug!("not waiting longer for a global dedup answer"),
                }
            }
        }
        answers.into_iter().filter_map(answer_shard).collect()
    }
}

/// The shard a finished background query brought, if any.
fn answer_shard(answer: std::result::Result<Answer, tokio::task::JoinError>) -> Option<Bytes> {
    match answer {
        Ok(Ok(shard)) => shard,
        Ok(Err(e)) => {
            tracing::debug!("a background global dedup query failed: {e}");
            None
        }
        Err(e) => {
            tracing::debug!("a background global dedup query stopped: {e}");
            None
        }
    }
}
