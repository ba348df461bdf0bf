//! `git xet server storage migrate --to LOCATION`: copies every object of the deployment's
//! store to another (directory or S3 bucket/prefix) while servers run, verifying each: a xorb
//! is validated (records, chunk hashes, xorb hash) before it is copied, a shard parsed, and
//! every copy read back and compared with what was read. Incremental: an object the
//! destination already holds is passed over, so a re-run copies only what landed since (the
//! switch-over in docs/server-operations.md, "Moving the object store", relies on that). The source is
//! never changed.
//!
//! A destination object of the same key but another size is left as it is: one xorb has
//! several valid layouts, and a server already writing to the destination indexed the one
//! it wrote.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::gc::{store_err, UpkeepError};
use git_xet_core::shard::read_shard;
use git_xet_core::xorb::validate_xorb;
use git_xet_storage::{ObjectInfo, ObjectKey, ObjectKind, ObjectStore};

/// Objects copied at once (xorbs are up to 64 MiB each, held in memory while copied).
const PARALLEL: usize = 4;

#[derive(Debug, Clone, Default)]
pub struct MigrateReport {
    pub objects: u64,
    pub copied: u64,
    pub bytes_copied: u64,
    /// Already in the destination (an earlier run, or a server writing there).
    pub present: u64,
    /// In the destination under another layout (left as it is).
    pub other_layout: u64,
    /// Listed in the source, gone when read (garbage-collected meanwhile).
    pub vanished: u64,
    /// Objects that failed verification, and why: not copied.
    pub problems: Vec<String>,
}

enum Outcome {
    Copied(u64),
    Vanished,
    Bad(String),
}

/// Copies what `to` lacks of `from`, shards after xorbs (a shard is only useful once its
/// xorbs are there).
pub async fn migrate(
    from: &dyn ObjectStore,
    to: &dyn ObjectStore,
    progress: bool,
) -> Result<MigrateReport, UpkeepError> {
    let mut report = MigrateReport::default();
    let started = Instant::now();
    let mut last = Instant::now();
    for kind in [ObjectKind::Xorb, ObjectKind::Shard] {
        let what = match kind {
            ObjectKind::Xorb => "xorbs",
            ObjectKind::Shard => "shards",
        };
        let source: Vec<ObjectInfo> = from
            .list(kind)
            .try_collect()
            .await
            .map_err(store_err(format!("listing the source's {what}")))?;
        let present: std::collections::HashMap<_, u64> = to
            .list(kind)
            .map_ok(|info| (info.key.hash, info.len))
            .try_collect()
            .await
            .map_err(store_err(format!("listing the destination's {what}")))?;
        let mut todo = Vec::new();
        for info in source {
            report.objects += 1;
            match present.get(&info.key.hash) {
                Some(&len) if len == info.len => report.present += 1,
                Some(_) => report.other_layout += 1,
                None => todo.push(info),
            }
        }
        let total = todo.len();
        let mut copies = futures::stream::iter(todo.into_iter().map(|info| copy(from, to, info)))
            .buffer_unordered(PARALLEL);
        let mut done = 0;
        while let Some(outcome) = copies.next().await {
            done += 1;
            match outcome? {
                Outcome::Copied(bytes) => {
                    report.copied += 1;
                    report.bytes_copied += bytes;
                }
                Outcome::Vanished => report.vanished += 1,
                Outcome::Bad(why) => report.problems.push(why),
            }
            if progress && last.elapsed() >= Duration::from_secs(2) {
                last = Instant::now();
                let secs = started.elapsed().as_secs_f64().max(0.001);
                eprintln!(
                    "{what}: {done} of {total} to copy, {} MB copied ({:.1} MB/s)",
                    report.bytes_copied / 1_000_000,
                    report.bytes_copied as f64 / 1e6 / secs
                );
            }
        }
        if progress {
            eprintln!("{what}: {total} copied or checked");
        }
    }
    Ok(report)
}

/// Reads, verifies, writes and reads back one object.
async fn copy(
    from: &dyn ObjectStore,
    to: &dyn ObjectStore,
    info: ObjectInfo,
) -> Result<Outcome, UpkeepError> {
    let key = info.key;
    let name = name(&key);
    let bytes = match from.read_range(key, 0..info.len).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Outcome::Vanished),
        Err(e) => return Err(store_err(format!("reading {name} from the source"))(e)),
    };
    let checked = bytes.clone();
    let verdict = tokio::task::spawn_blocking(move || verify(key, &checked))
        .await
        .map_err(|e| UpkeepError::Task(e.to_string()))?;
    if let Err(why) = verdict {
        return Ok(Outcome::Bad(format!("{name}: {why} (not copied)")));
    }
    to.put(key, bytes.clone())
        .await
        .map_err(store_err(format!("writing {name} to the destination")))?;
    let back = to
        .read_range(key, 0..info.len)
        .await
        .map_err(store_err(format!(
            "reading {name} back from the destination"
        )))?;
    if back != bytes {
        // Another writer's layout of the same xorb may have won; it is whole if it validates.
        let again = back.clone();
        let verdict = tokio::task::spawn_blocking(move || verify(key, &again))
            .await
            .map_err(|e| UpkeepError::Task(e.to_string()))?;
        if let Err(why) = verdict {
            return Ok(Outcome::Bad(format!(
                "{name}: the destination holds other bytes than were copied: {why}"
            )));
        }
    }
    Ok(Outcome::Copied(info.len))
}

/// A xorb must validate and be the xorb its key names; a shard must parse.
fn verify(key: ObjectKey, bytes: &Bytes) -> Result<(), String> {
    match key.kind {
        ObjectKind::Xorb => {
            let footer = validate_xorb(bytes).map_err(|e| e.to_string())?;
            if footer.hash != key.hash {
                return Err(format!("its content is xorb {}", footer.hash));
            }
        }
        ObjectKind::Shard => {
            read_shard(&mut &bytes[..]).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn name(key: &ObjectKey) -> String {
    match key.kind {
        ObjectKind::Xorb => format!("xorb {}", key.hash),
        ObjectKind::Shard => format!("shard {}", key.hash),
    }
}
