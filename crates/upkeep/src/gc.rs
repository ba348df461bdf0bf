//! `git xet server gc`: frees what no repository can reach any more.
//!
//! 1. Files no repository sees (after `repo delete`) are unregistered.
//! 2. Xorbs no registered file references, older than the grace period, are condemned (a
//!    transaction that re-checks every registered file), then deleted from the store, then
//!    forgotten by the index. Stored xorbs the index never learned of (an upload cut short
//!    between storing and indexing) go the same way. The invariant that makes this safe while
//!    uploads run is stated in `crates/index/src/gc.rs`; the grace period spares the xorbs of
//!    uploads in progress (stored before the shard that references them).
//! 3. Shards none of whose files is registered, older than the grace period, are deleted.
//!    Stored shards are a record of what was registered; the server never reads them back,
//!    so no xorb is kept for a shard's sake beyond its registered files.
//!
//! Written against the `ObjectStore` and `Index` traits only: it runs on every backend, from
//! an admin process beside the running servers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::TryStreamExt;

use git_xet_core::MerkleHash;
use git_xet_index::{Index, IndexError};
use git_xet_storage::{ObjectInfo, ObjectKey, ObjectKind, ObjectStore};

/// What went wrong in an upkeep command (gc, check, repo delete).
#[derive(Debug, thiserror::Error)]
pub enum UpkeepError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("object store: {context}: {source}")]
    Store {
        context: String,
        source: std::io::Error,
    },
    #[error("blocking task failed: {0}")]
    Task(String),
}

pub(crate) fn store_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> UpkeepError {
    let context = context.into();
    move |source| UpkeepError::Store { context, source }
}

/// Runs an index call on a blocking thread.
pub(crate) async fn on_index<T: Send + 'static>(
    index: &Arc<dyn Index>,
    f: impl FnOnce(&dyn Index) -> Result<T, IndexError> + Send + 'static,
) -> Result<T, UpkeepError> {
    let index = index.clone();
    tokio::task::spawn_blocking(move || f(&*index))
        .await
        .map_err(|e| UpkeepError::Task(e.to_string()))?
        .map_err(UpkeepError::from)
}

/// Every stored object of `kind`, by hash.
pub(crate) async fn listing(
    store: &dyn ObjectStore,
    kind: ObjectKind,
) -> Result<HashMap<MerkleHash, ObjectInfo>, UpkeepError> {
    store
        .list(kind)
        .map_ok(|info| (info.key.hash, info))
        .try_collect()
        .await
        .map_err(store_err(format!("listing {kind:?} objects")))
}

#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Objects younger than this are kept, referenced or not.
    pub grace: Duration,
    /// Count what would be freed; change nothing.
    pub dry_run: bool,
}

/// What gc freed (or, in a dry run, would free).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    pub files_unregistered: u64,
    pub xorbs: u64,
    pub xorb_bytes: u64,
    pub shards: u64,
    pub shard_bytes: u64,
    /// Referenced, or younger than the grace period.
    pub xorbs_kept: u64,
}

/// Test hook (with the `test-hooks` feature): with `GIT_XET_GC_TEST_PAUSE` naming a
/// directory, gc creates `<step>.reached` there and waits (up to two minutes) for
/// `<step>.go`, so that a test can run an upload at exactly that point.
#[cfg(feature = "test-hooks")]
async fn pause(step: &str) {
    if let Some(dir) = std::env::var_os("GIT_XET_GC_TEST_PAUSE") {
        git_xet_io::test_pause::reached(std::path::Path::new(&dir), step, "gc pause").await;
    }
}

/// Without the `test-hooks` feature gc never pauses.
#[cfg(not(feature = "test-hooks"))]
async fn pause(_: &str) {}

fn older_than(t: SystemTime, cutoff: SystemTime) -> bool {
    t <= cutoff
}

pub async fn gc(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    opts: &GcOptions,
) -> Result<GcReport, UpkeepError> {
    let mut report = GcReport::default();
    let dry_run = opts.dry_run;
    let cutoff = SystemTime::now()
        .checked_sub(opts.grace)
        .unwrap_or(UNIX_EPOCH);
    let cutoff_secs = cutoff
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);

    report.files_unregistered =
        on_index(index, move |i| i.unregister_unreachable_files(dry_run)).await?;

    // Xorbs: decide outside any transaction, then condemn (which re-checks), then delete.
    let stored = listing(store, ObjectKind::Xorb).await?;
    let indexed = on_index(index, |i| i.indexed_xorbs()).await?;
    let referenced = on_index(index, |i| i.referenced_xorbs()).await?;
    let mut sizes: HashMap<MerkleHash, u64> = HashMap::new();
    let mut candidates = Vec::new();
    for x in &indexed {
        let old_enough = x.created_at <= cutoff_secs
            && stored
                .get(&x.hash)
                .is_none_or(|info| older_than(info.modified, cutoff));
        if old_enough && !referenced.contains(&x.hash) {
            candidates.push(x.hash);
            sizes.insert(x.hash, x.stored_len);
        } else {
            report.xorbs_kept += 1;
        }
    }
    let indexed_set: HashSet<MerkleHash> = indexed.iter().map(|x| x.hash).collect();
    for (hash, info) in &stored {
        if !indexed_set.contains(hash) && older_than(info.modified, cutoff) {
            candidates.push(*hash);
            sizes.insert(*hash, info.len);
        }
    }
    for (hash, info) in &stored {
        sizes.entry(*hash).or_insert(info.len);
    }
    pause("decided").await;
    if dry_run {
        report.xorbs = candidates.len() as u64;
        report.xorb_bytes = candidates.iter().map(|h| sizes[h]).sum();
    } else {
        on_index(index, move |i| i.condemn_xorbs(&candidates)).await?;
        pause("condemned").await;
        // This run's and any interrupted run's.
        let condemned = on_index(index, |i| i.condemned_xorbs()).await?;
        for hash in condemned {
            store
                .delete(ObjectKey::xorb(hash))
                .await
                .map_err(store_err(format!("deleting xorb {hash}")))?;
            on_index(index, move |i| i.forget_xorb(&hash)).await?;
            report.xorbs += 1;
            report.xorb_bytes += sizes.get(&hash).copied().unwrap_or(0);
        }
    }

    collect_shards(store, index, cutoff, cutoff_secs, dry_run, &mut report).await?;
    Ok(report)
}

/// Deletes shards none of whose files is registered, and stored shards never indexed.
async fn collect_shards(
    store: &dyn ObjectStore,
    index: &Arc<dyn Index>,
    cutoff: SystemTime,
    cutoff_secs: u64,
    dry_run: bool,
    report: &mut GcReport,
) -> Result<(), UpkeepError> {
    let stored = listing(store, ObjectKind::Shard).await?;
    let indexed = on_index(index, |i| i.indexed_shards()).await?;
    let indexed_set: HashSet<MerkleHash> = indexed.iter().map(|s| s.hash).collect();
    let mut doomed: Vec<(MerkleHash, u64, bool)> = Vec::new();
    for shard in indexed.iter().filter(|s| s.created_at <= cutoff_secs) {
        let Some(info) = stored.get(&shard.hash) else {
            // Its object is gone already: only the row remains.
            doomed.push((shard.hash, 0, true));
            continue;
        };
        let key = ObjectKey::shard(shard.hash);
        let bytes = store
            .read_range(key, 0..info.len)
            .await
            .map_err(store_err(format!("reading shard {}", shard.hash)))?;
        let files: Vec<MerkleHash> = match git_xet_core::shard::parse_shard(&bytes) {
            Ok(parsed) => parsed.shard.files.iter().map(|f| f.file_hash).collect(),
            Err(e) => {
                tracing::warn!(shard = %shard.hash, "stored shard does not parse ({e}); kept");
                continue;
            }
        };
        if !on_index(index, move |i| i.any_file_registered(&files)).await? {
            doomed.push((shard.hash, info.len, true));
        }
    }
    for (hash, info) in &stored {
        if !indexed_set.contains(hash) && older_than(info.modified, cutoff) {
            doomed.push((*hash, info.len, false));
        }
    }
    for (hash, len, indexed) in doomed {
        if !dry_run {
            store
                .delete(ObjectKey::shard(hash))
                .await
                .map_err(store_err(format!("deleting shard {hash}")))?;
            if indexed {
                on_index(index, move |i| i.forget_shard(&hash)).await?;
            }
        }
        report.shards += u64::from(len > 0 || indexed);
        report.shard_bytes += len;
    }
    Ok(())
}
