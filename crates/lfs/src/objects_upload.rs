//! Uploads of the object service: one object per session, or small objects of one push
//! packed into one session as they come (the coordinator's batches).

use std::path::Path;
use std::sync::Arc;

use super::{pushed_marker, AgentEnv, ObjectService, UploadJob};
use crate::action::XetAction;
use crate::pointer::Oid;
use crate::LfsError;
use git_xet_client::chunk_lists::ChunkListStore;
use git_xet_client::{
    CasClient, ClientError, Mapper, ProgressFn, Registered, SessionStats, UploadSession,
};

/// Small objects being packed into one upload session (see
/// [`ObjectService::start_batch`]).
pub struct BatchUpload {
    runtime: tokio::runtime::Handle,
    /// `None` once an object failed: the session is gone, nothing is registered.
    session: Option<UploadSession>,
    lists: ChunkListStore,
    oids: Vec<Oid>,
    /// Which of the service's batch clients the session runs on (see
    /// [`ObjectService::start_batch`]).
    lane: usize,
    env: AgentEnv,
}

/// A batch the server has registered, its local bookkeeping still to do
/// ([`RegisteredBatch::settle`]).
pub struct RegisteredBatch {
    registered: Registered,
    lists: ChunkListStore,
    oids: Vec<Oid>,
    env: AgentEnv,
}

impl RegisteredBatch {
    /// What the batch sent.
    pub fn stats(&self) -> &SessionStats {
        self.registered.stats()
    }

    /// Records how the batch's files are stored, drops their chunk lists and marks them
    /// pushed, in that order (a mark says the chunks are kept). Blocking file writes, none
    /// of which an answer to git-lfs needs to wait for.
    pub fn settle(self) {
        let summary = self.registered.settle();
        for oid in &self.oids {
            self.lists.remove(&oid.0);
            mark_pushed(&self.env, oid);
        }
        tracing::debug!(
            "uploaded {} objects as one session: {}",
            self.oids.len(),
            summary.stats
        );
    }
}

impl BatchUpload {
    /// Objects packed so far.
    pub fn len(&self) -> usize {
        self.oids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.oids.is_empty()
    }

    /// Uploads what remains of the batch and registers it; done when the server has. What
    /// is left is local bookkeeping ([`RegisteredBatch::settle`]), for after the objects
    /// are answered. Needs nothing of the service, so it may run on a thread of its own
    /// while the service packs the next batch.
    pub fn register(self) -> Result<RegisteredBatch, LfsError> {
        let BatchUpload {
            runtime,
            session,
            lists,
            oids,
            env,
            ..
        } = self;
        let session = session.ok_or_else(|| {
            LfsError::Client(ClientError::Aborted("the batch failed earlier".into()))
        })?;
        let registered = runtime.block_on(session.register())?;
        Ok(RegisteredBatch {
            registered,
            lists,
            oids,
            env,
        })
    }
}

impl ObjectService {
    /// Uploads the file at `path` as the object `oid` of `size` bytes; done when the server
    /// has registered it. Returns what the upload sent. The file is mapped when it is `oid`'s
    /// object in the store, read otherwise.
    pub fn upload(
        &mut self,
        oid: Oid,
        size: u64,
        path: &Path,
        access: &XetAction,
        progress: Option<ProgressFn>,
    ) -> Result<SessionStats, LfsError> {
        check_upload_file(path, size)?;
        let client = self.client_for(access)?;
        let progress = progress.unwrap_or_else(|| Arc::new(|_, _| {}));
        let lists = ChunkListStore::new(&self.env.xet_dir);
        let mapper = self.mapper_for(path, &oid);
        let stats = self.runtime()?.block_on(async move {
            let upload = || upload_object(&client, path, oid, size, mapper, &lists, &progress);
            match upload().await {
                // The cache that misled the first attempt is gone: this one sends the data.
                Err(LfsError::Client(e @ ClientError::StaleDedup { .. })) => {
                    tracing::warn!("{e}");
                    upload().await
                }
                other => other,
            }
        })?;
        self.mark_pushed(&oid);
        Ok(stats)
    }

    fn mark_pushed(&self, oid: &Oid) {
        mark_pushed(&self.env, oid);
    }

    /// Starts a session for small objects of `first`'s CAS URL, to which the coordinator
    /// adds objects as they come ([`add_to_batch`](Self::add_to_batch)) and which one shard
    /// registers ([`BatchUpload::register`]). Without global dedup queries: for
    /// files this small the query was already not waited for (the client packs the file as
    /// new data meanwhile), so its answer could serve only a later file of the same session,
    /// and a miss costs at most the file's own bytes sent again; local dedup (the shard
    /// cache, chunk lists from the clean filter) still applies. Any error fails the whole
    /// batch and nothing of it is registered.
    ///
    /// `lane` picks one of several clients of the CAS URL, so that batches registering at
    /// the same time each have a client of their own: a client lends its shard index to
    /// one session at a time, and a second session would load the shard cache from disk.
    pub fn start_batch(&mut self, first: &UploadJob, lane: usize) -> Result<BatchUpload, LfsError> {
        let client = self.batch_client(&first.access, lane)?;
        let runtime = self.runtime()?;
        let session = runtime.block_on(client.start_upload())?;
        Ok(BatchUpload {
            runtime,
            session: Some(session),
            lists: ChunkListStore::new(&self.env.xet_dir),
            oids: Vec::new(),
            lane,
            env: self.env.clone(),
        })
    }

    /// Packs `job` into `batch` (its CAS URL must be the batch's): once this returns, its
    /// bytes are in the session, not yet on the server.
    pub fn add_to_batch(
        &mut self,
        batch: &mut BatchUpload,
        job: &UploadJob,
    ) -> Result<(), LfsError> {
        check_upload_file(&job.path, job.size)?;
        // The newest token is the last job's.
        self.batch_client(&job.access, batch.lane)?;
        let mapper = self.mapper_for(&job.path, &job.oid);
        let Some(mut session) = batch.session.take() else {
            return Err(LfsError::Client(ClientError::Aborted(
                "the batch failed earlier".into(),
            )));
        };
        // Planned here, not on a blocking thread: for small files the hand-over costs more
        // than the chunking.
        let list = batch.lists.load(&job.oid.0, job.size);
        let added = session
            .add_file_here(&batch.runtime, &job.path, list, mapper)
            .map_err(LfsError::from)
            .and_then(|file| {
                if file.sha256 != job.oid.0 || file.size != job.size {
                    return Err(LfsError::UploadChanged {
                        path: job.path.clone(),
                        now: Oid(file.sha256),
                    });
                }
                Ok(())
            });
        added?;
        batch.session = Some(session);
        batch.oids.push(job.oid);
        Ok(())
    }

    /// Maps `path` only if it is `oid`'s object in the store: written once under its oid and
    /// replaced only by rename, never truncated in place. Any other file is read.
    fn mapper_for(&self, path: &Path, oid: &Oid) -> Mapper {
        let stored = self.env.store.path(oid);
        // git-lfs names the store's own path: no need to resolve both (a readlink per
        // component, twice per object).
        if path == stored {
            // SAFETY: the store's object, as said above.
            return unsafe { Mapper::new() };
        }
        match (std::fs::canonicalize(path), std::fs::canonicalize(stored)) {
            // SAFETY: the store's object, as said above.
            (Ok(a), Ok(b)) if a == b => unsafe { Mapper::new() },
            _ => Mapper::reading(),
        }
    }
}

/// Notes that `oid` is registered on a server and its chunks went to the chunk store:
/// its whole copy in `.git/lfs/objects` may then leave like a fetched one's
/// ([`pushed_marker`]). Objects never pushed have no mark and stay whole.
fn mark_pushed(env: &AgentEnv, oid: &Oid) {
    if env.chunk_store.is_none() {
        return;
    }
    let marker = pushed_marker(&env.xet_dir, oid);
    if let Some(dir) = marker.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&marker, b"") {
        tracing::debug!("could not mark {oid} as pushed: {e}");
    }
}

/// One upload session for one object: from the chunk list git-xet's clean filter recorded
/// when the file was added (then only the file's new chunks are read), else by chunking it.
async fn upload_object(
    client: &CasClient,
    path: &Path,
    oid: Oid,
    size: u64,
    mapper: Mapper,
    lists: &ChunkListStore,
    progress_fn: &ProgressFn,
) -> Result<SessionStats, LfsError> {
    if let Some(list) = lists.load(&oid.0, size) {
        let mut session = client.start_upload().await?;
        match session
            .add_chunked_file(path, list, mapper, Some(progress_fn.clone()))
            .await
        {
            Ok(_) => {
                let summary = session.finish().await?;
                tracing::info!(oid = %oid, "uploaded from its chunk list: {}", summary.stats);
                // The server has the file now; the shard cache and the file's
                // reconstruction record serve dedup from here on.
                lists.remove(&oid.0);
                return Ok(summary.stats);
            }
            Err(ClientError::Corrupt { what, reason }) => {
                // Nothing was registered; the list is wrong, so chunk the file.
                tracing::warn!("{what}: {reason}; chunking the whole file instead");
                lists.remove(&oid.0);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut session = client.start_upload().await?;
    let file = session
        .add_file_with(path, mapper, Some(progress_fn.clone()))
        .await?;
    if file.sha256 != oid.0 || file.size != size {
        // Dropping the session registers nothing.
        return Err(LfsError::UploadChanged {
            path: path.to_path_buf(),
            now: Oid(file.sha256),
        });
    }
    let summary = session.finish().await?;
    tracing::info!(oid = %oid, "uploaded: {}", summary.stats);
    Ok(summary.stats)
}

/// The file to upload must exist with the size announced.
fn check_upload_file(path: &Path, size: u64) -> Result<(), LfsError> {
    let meta = std::fs::metadata(path).map_err(|source| LfsError::LocalIo {
        context: "cannot read",
        path: path.to_path_buf(),
        source,
    })?;
    if meta.len() != size {
        return Err(LfsError::UploadSizeMismatch {
            path: path.to_path_buf(),
            actual: meta.len(),
            announced: size,
        });
    }
    Ok(())
}
