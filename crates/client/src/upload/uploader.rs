//! Sending what the packer produces: xorbs in parallel (bounded), and intermediate shards —
//! each only after every xorb sent before it has been stored, so a shard never names a xorb
//! the server lacks. Uploaded shards are kept in the local shard cache.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::cas::CasApi;
use crate::chunk_cache::ChunkCache;
use crate::error::{ClientError, Result};
use crate::shard_cache::save_own_shard;
use crate::upload::body::StagedXorb;
use git_xet_core::MerkleHash;

/// A shard describing xorbs sent before it (no files): it registers them early so that a
/// huge session's metadata need not stay in memory until the end.
#[derive(Debug)]
pub struct ShardUpload {
    /// The upload form (no footer).
    pub upload: Bytes,
    /// The stored form, for the local shard cache.
    pub stored: Vec<u8>,
}

/// What goes to the uploader, in order.
#[derive(Debug)]
pub enum Upload {
    Xorb(StagedXorb),
    Shard(ShardUpload),
}

/// What the uploader sent.
#[derive(Debug, Default)]
pub struct Totals {
    pub xorb_bytes: u64,
    pub xorbs: u64,
    pub xorbs_already_present: u64,
    pub shards: u64,
    pub shard_bytes: u64,
    /// Shards saved to the local shard cache.
    pub saved_shards: Vec<PathBuf>,
}

type XorbResult = std::result::Result<Result<(u64, bool)>, tokio::task::JoinError>;

fn record(totals: &mut Totals, done: XorbResult) -> Result<()> {
    let (len, inserted) =
        done.map_err(|e| ClientError::Aborted(format!("xorb upload task failed: {e}")))??;
    totals.xorb_bytes += len;
    totals.xorbs += 1;
    totals.xorbs_already_present += u64::from(!inserted);
    Ok(())
}

/// Uploads a shard (after its xorbs, or naming those still on their way in `awaiting`) and
/// keeps it in the shard cache.
pub async fn upload_shard(
    api: &CasApi,
    shard: ShardUpload,
    shard_dir: Option<&PathBuf>,
    totals: &mut Totals,
    awaiting: &[MerkleHash],
) -> Result<()> {
    let len = shard.upload.len() as u64;
    api.upload_shard_awaiting(shard.upload, awaiting).await?;
    totals.shards += 1;
    totals.shard_bytes += len;
    keep_shard(shard_dir, &shard.stored, totals);
    Ok(())
}

/// Sends the session's shard once the xorb uploads succeeded, or (to a server that
/// honours it, and when `awaited` names few enough xorbs) while they are still running,
/// naming them so that the server waits for them: one round trip instead of two. Either
/// way it returns only once the xorbs and the shard succeeded; a shard sent early that
/// failed is sent again, the usual way, once the xorbs are in (a xorb may have been later
/// than the server waits).
pub async fn send_shard(
    api: &CasApi,
    uploader: tokio::task::JoinHandle<Result<Totals>>,
    shard: ShardUpload,
    awaited: &[MerkleHash],
    shard_dir: Option<&PathBuf>,
) -> Result<Totals> {
    let xorbs_done = |r: std::result::Result<Result<Totals>, tokio::task::JoinError>| {
        r.map_err(|e| ClientError::Aborted(format!("xorb uploads failed: {e}")))?
    };
    let limit = api.await_limit();
    let early = limit > 0 && !awaited.is_empty() && awaited.len() <= limit;
    if !early {
        let mut totals = xorbs_done(uploader.await)?;
        upload_shard(api, shard, shard_dir, &mut totals, &[]).await?;
        return Ok(totals);
    }
    let sent_early = api.upload_shard_awaiting(shard.upload.clone(), awaited);
    tokio::pin!(sent_early);
    tokio::pin!(uploader);
    let mut early_outcome = None;
    // A failed xorb upload ends the session at once (the early shard is dropped).
    let mut totals = loop {
        tokio::select! {
            done = &mut uploader => break xorbs_done(done)?,
            sent = &mut sent_early, if early_outcome.is_none() => {
                tracing::debug!(ok = sent.is_ok(), "the shard sent with its xorbs answered");
                early_outcome = Some(sent)
            }
        }
    };
    let early_outcome = match early_outcome {
        Some(outcome) => outcome,
        None => sent_early.await,
    };
    match early_outcome {
        Ok(_) => {
            totals.shards += 1;
            totals.shard_bytes += shard.upload.len() as u64;
            keep_shard(shard_dir, &shard.stored, &mut totals);
        }
        Err(e) => {
            tracing::debug!("the shard sent with its xorbs failed ({e}); sending it again");
            upload_shard(api, shard, shard_dir, &mut totals, &[]).await?;
        }
    }
    Ok(totals)
}

/// Keeps an uploaded shard (its stored form) in the shard cache, if there is one.
pub fn keep_shard(shard_dir: Option<&PathBuf>, stored: &[u8], totals: &mut Totals) {
    if let Some(dir) = shard_dir {
        match save_own_shard(dir, stored) {
            Ok(path) => totals.saved_shards.push(path),
            Err(e) => tracing::warn!("could not keep the shard in the local cache: {e}"),
        }
    }
}

/// Writes an uploaded xorb's chunk records into the chunk cache as the range of all its
/// chunks, the form a download of them takes. Best effort: without it, the whole object
/// simply stays where it is.
fn keep_xorb(cache: &ChunkCache, xorb: &StagedXorb) {
    if !cache.accepts(xorb.data_len) {
        return;
    }
    let range = git_xet_core::reconstruction::ChunkRange::new(0, xorb.num_chunks as u32);
    if cache.get(&xorb.hash, range).is_some() {
        return;
    }
    let kept = cache.writer(&xorb.hash, range).and_then(|mut w| {
        xorb.body
            .write_prefix(xorb.data_len, |b| w.write(b))
            .map_err(|e| ClientError::io("keeping an uploaded xorb", cache.dir(), e))?;
        Ok(w.commit(cache))
    });
    if let Err(e) = kept {
        tracing::debug!("could not keep xorb {} in the chunk store: {e}", xorb.hash);
    }
}

/// Runs until the channel closes; stops at the first failure.
pub async fn run(
    api: CasApi,
    mut rx: mpsc::Receiver<Upload>,
    concurrency: usize,
    shard_dir: Option<PathBuf>,
    keep: Option<Arc<ChunkCache>>,
) -> Result<Totals> {
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut running: JoinSet<Result<(u64, bool)>> = JoinSet::new();
    let mut totals = Totals::default();
    loop {
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        let Some(item) = rx.recv().await else { break };
        match item {
            Upload::Xorb(xorb) => {
                let api = api.clone();
                let keep = keep.clone();
                running.spawn(async move {
                    let len = xorb.body.len();
                    // Kept while it is sent, not after: the session's answer waits for
                    // this task.
                    let kept = keep.map(|cache| {
                        let copy = StagedXorb {
                            hash: xorb.hash,
                            body: xorb.body.clone(),
                            num_chunks: xorb.num_chunks,
                            data_len: xorb.data_len,
                        };
                        // Before the shard registers it: the file's record, written after
                        // that, is what makes the range count (ChunkStore::has).
                        tokio::task::spawn_blocking(move || keep_xorb(&cache, &copy))
                    });
                    let body = || reqwest::Body::wrap_stream(xorb.body.stream());
                    let inserted =
                        api.upload_xorb(&xorb.hash, len, body)
                            .await
                            .map_err(|e| match e {
                                // The bytes are re-read from the source files when sent.
                                ClientError::Http {
                                    what,
                                    status: 400,
                                    reason,
                                } if xorb.body.reads_files() => {
                                    let reason = format!(
                                        "{reason} (did a file change while it was being uploaded?)"
                                    );
                                    ClientError::Http {
                                        what,
                                        status: 400,
                                        reason,
                                    }
                                }
                                other => other,
                            })?;
                    tracing::debug!(
                        "uploaded xorb {} ({len} bytes, {} chunks)",
                        xorb.hash,
                        xorb.num_chunks
                    );
                    if let Some(kept) = kept {
                        let _ = kept.await;
                    }
                    drop(permit);
                    Ok((len, inserted)) // any staging file is deleted as `xorb` drops
                });
            }
            Upload::Shard(shard) => {
                drop(permit);
                while let Some(done) = running.join_next().await {
                    record(&mut totals, done)?;
                }
                upload_shard(&api, shard, shard_dir.as_ref(), &mut totals, &[]).await?;
            }
        }
        while let Some(done) = running.try_join_next() {
            record(&mut totals, done)?;
        }
    }
    while let Some(done) = running.join_next().await {
        record(&mut totals, done)?;
    }
    Ok(totals)
}
