//! Storing a validated xorb so that the index describes the bytes the store holds.
//!
//! The xorb hash covers chunk hashes and sizes, not how each chunk is compressed, so one xorb
//! has several valid byte layouts, and the index records one layout's record offsets. Two
//! uploads of one xorb in different layouts can race, or an upload can stop between the store
//! write and the index write and be retried in another layout. The rule: what the index
//! records is read from the store (or is this request's own write, while the store still
//! holds it), never simply what this request sent.
//!
//! - Directory store: write-once (linked into place, never over an object). The first
//!   writer's bytes stay; a later writer reads the stored footer and records that. One round.
//! - S3: Garage ignores `If-None-Match`, so concurrent PUTs all succeed and one of them stays.
//!   Each writer loops: record layout `L` of version `V` (its own PUT's, or read back), then
//!   ask the store's current version; done if it is still `V`, else read the stored footer
//!   with its version and go round.
//!
//! Why the S3 loop converges on the stored layout: take the last index write for the hash,
//! by writer `W`, of a layout of version `V`. `W` then read the current version and stopped,
//! so it was `V` at that moment `t` (else `W` would have written again). A PUT finishing after
//! `t` belongs to a writer that writes the index after its PUT, so after `t`: impossible for
//! the last write. So the store keeps `V` from `t` on, and the index says `V`. Every writer
//! PUTs at most once, so once the last PUT has finished each loop ends within two rounds;
//! [`MAX_ROUNDS`] only guards against a store that keeps changing under us.

use crate::error::{ServerError, ServerResult};
use crate::state::{blocking, SharedState};
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;
use git_xet_index::XorbMeta;
use git_xet_storage::{ObjectKey, ObjectVersion, Staged};

/// Rounds of record-then-compare before giving up with 503 (the client retries).
const MAX_ROUNDS: usize = 8;

/// Stores a validated xorb from its staging file and indexes the layout the store holds;
/// counts it when new. Returns whether the index did not know it.
pub async fn store_and_index(
    state: &SharedState,
    meta: XorbMeta,
    staged: Staged,
) -> ServerResult<bool> {
    let hash = meta.hash();
    let key = ObjectKey::xorb(hash);
    let pause = TestPause::next();
    // A xorb already stored is not sent again (a re-upload of known content).
    let put = match state.store.version(key).await? {
        Some(_) => None,
        None => {
            pause.at("staged").await;
            state.store.put_staged_versioned(key, staged).await?
        }
    };
    pause.at("stored").await;
    // Indexed only once the bytes are durable: a crash in between leaves an unreferenced
    // object, never an index entry without its data.
    let (mut meta, mut version) = match put {
        Some(version) => (meta, version),
        None => stored_layout(state, hash).await?,
    };
    let mut new = false;
    for _ in 0..MAX_ROUNDS {
        let index = state.index.clone();
        let recorded = meta.clone();
        new |= blocking(move || Ok(index.register_xorb(&recorded)?)).await?;
        if state.store.version(key).await?.as_ref() == Some(&version) {
            if new {
                crate::metrics::add(&state.metrics.xorbs_stored, 1);
                tracing::debug!(xorb = %hash, bytes = meta.stored_len, "stored xorb");
            }
            return Ok(new);
        }
        tracing::info!(xorb = %hash, "stored xorb changed while it was indexed; indexing it again");
        (meta, version) = stored_layout(state, hash).await?;
    }
    Err(ServerError::Unavailable(format!(
        "xorb {hash} kept changing in the object store while it was indexed; upload it again"
    )))
}

/// The stored xorb's layout, read from its footer, and the version it was read from.
async fn stored_layout(
    state: &SharedState,
    hash: MerkleHash,
) -> ServerResult<(XorbMeta, ObjectVersion)> {
    let key = ObjectKey::xorb(hash);
    let tail = state
        .store
        .read_tail(key, XorbFooter::MAX_TAIL as u64)
        .await?;
    let (len, version) = (tail.len, tail.version);
    let footer = blocking(move || {
        XorbFooter::parse_tail(&tail.bytes, tail.len).map_err(|e| {
            ServerError::Internal(format!(
                "stored xorb {hash} has an unreadable footer ({e}); run `git xet server check`"
            ))
        })
    })
    .await?;
    if footer.hash != hash {
        return Err(ServerError::Internal(format!(
            "the object stored as xorb {hash} is xorb {}; run `git xet server check`",
            footer.hash
        )));
    }
    Ok((
        XorbMeta {
            footer,
            stored_len: len,
        },
        version,
    ))
}

/// Test hook (with the `test-hooks` feature): with `GIT_XET_XORB_TEST_PAUSE` naming an
/// existing directory, the n-th xorb stored by this process creates `<step>.<n>.reached` there
/// and waits (up to two minutes) for `<step>.<n>.go`, so that a test can interleave uploads at
/// exactly those points.
#[cfg(feature = "test-hooks")]
struct TestPause(Option<(std::path::PathBuf, u64)>);

#[cfg(feature = "test-hooks")]
impl TestPause {
    fn next() -> TestPause {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let Some(dir) = std::env::var_os("GIT_XET_XORB_TEST_PAUSE") else {
            return TestPause(None);
        };
        let dir = std::path::PathBuf::from(dir);
        if !dir.is_dir() {
            return TestPause(None);
        }
        TestPause(Some((dir, COUNT.fetch_add(1, Ordering::SeqCst) + 1)))
    }

    async fn at(&self, step: &str) {
        let Some((dir, n)) = &self.0 else { return };
        git_xet_io::test_pause::reached(dir, &format!("{step}.{n}"), "xorb pause").await;
    }
}

/// Without the `test-hooks` feature: never pauses, as if the variable were unset.
#[cfg(not(feature = "test-hooks"))]
struct TestPause;

#[cfg(not(feature = "test-hooks"))]
impl TestPause {
    fn next() -> TestPause {
        TestPause
    }

    async fn at(&self, _step: &str) {}
}
