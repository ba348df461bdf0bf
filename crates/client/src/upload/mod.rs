//! Upload sessions: add any number of files, then `finish` to upload the new xorbs (already
//! streaming while files are added) and register everything with one shard.
//!
//! Data flow per file: reader thread (chunking) -> hashing thread (chunk hashes, dedup
//! planning) -> packer thread (parallel compression into staged xorb files) -> uploader
//! task (parallel xorb POSTs). Memory is a few buffers per stage whatever the file size.

mod body;
mod input;
mod packer;
mod planner;
mod queries;
mod uploader;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::cas::CasApi;
use crate::chunk_lists::ChunkList;
use crate::error::{ClientError, Result};
use crate::progress::ProgressFn;
use crate::records::ChunkLog;
use crate::shard_cache::{self, ShardIndex};
use crate::stats::{DedupStats, SessionStats};
use crate::CasClient;
use git_xet_core::hash::sha256_as_merkle;
use git_xet_core::shard::{FileInfo, FileTerm, FooterOptions, Shard, XorbBlock};
use git_xet_core::MerkleHash;
use git_xet_io::platform::mmap::Mapper;

use input::{open_for_upload, plan_chunked, plan_stream, Input, Size, Stream};
pub use packer::compress_parallel;
use packer::Packer;
use planner::{PlannedFile, SessionPlanner};
pub use planner::{MIN_RUN_BYTES, MIN_RUN_CHUNKS};
use queries::{GlobalQueries, BACKGROUND_MAX_BYTES, FINISH_WAIT};
use uploader::ShardUpload;

/// One file of a session, once chunked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileUpload {
    /// The name the caller gave (a path, usually).
    pub name: String,
    pub file_hash: MerkleHash,
    #[serde(serialize_with = "serialize_sha")]
    pub sha256: [u8; 32],
    pub size: u64,
    pub stats: DedupStats,
}

fn serialize_sha<S: serde::Serializer>(
    sha: &[u8; 32],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&git_xet_core::hash::sha256_hex(sha))
}

/// What a finished session did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UploadSummary {
    pub files: Vec<FileUpload>,
    pub stats: SessionStats,
}

/// An upload in progress. Dropping it without `finish` abandons it: xorbs already sent stay
/// on the server unreferenced, nothing is registered.
pub struct UploadSession {
    api: CasApi,
    planner: Option<SessionPlanner>,
    queries: Option<GlobalQueries>,
    uploader: Option<tokio::task::JoinHandle<Result<uploader::Totals>>>,
    planned: Vec<(FileUpload, PlannedFile)>,
    /// This server's shard cache (see [`ClientConfig::shard_cache_dir`]).
    shard_dir: Option<PathBuf>,
    client: CasClient,
}

impl CasClient {
    /// Starts an upload session: loads the shard cache and starts the packer and uploader.
    pub async fn start_upload(&self) -> Result<UploadSession> {
        let shard_dir = self.config.shard_cache_dir();
        let dir = shard_dir.clone();
        let cached = self.shard_index.lock().expect("shard index lock").take();
        let shards = match cached {
            Some(index) => index,
            None => {
                let metadata_dir = self.config.metadata_dir.clone();
                tokio::task::spawn_blocking(move || {
                    if let Some(metadata_dir) = metadata_dir {
                        shard_cache::drop_unkeyed_cache(&metadata_dir);
                    }
                    dir.as_deref()
                        .map_or_else(ShardIndex::empty, ShardIndex::load)
                })
            }
            .await
            .map_err(|e| ClientError::Aborted(format!("loading the shard cache failed: {e}")))?,
        };
        tracing::debug!("shard cache: {} chunks indexed", shards.num_chunks());
        let staging = self
            .config
            .staging_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let (tx, rx) = mpsc::channel(1);
        let packer = Packer::start(staging, tx);
        let keep = match self.config.store_uploads {
            true => self.chunk_cache.clone(),
            false => None,
        };
        let uploader = tokio::spawn(uploader::run(
            self.api.clone(),
            rx,
            self.config.upload_concurrency,
            shard_dir.clone(),
            keep,
        ));
        let planner = SessionPlanner::new(
            shards,
            Box::new(packer),
            self.config.global_dedup,
            self.config.metadata_dir.is_some(),
            self.config.shard_flush_chunks,
        );
        Ok(UploadSession {
            api: self.api.clone(),
            planner: Some(planner),
            queries: Some(GlobalQueries::new(
                self.api.clone(),
                tokio::runtime::Handle::current(),
            )),
            uploader: Some(uploader),
            planned: Vec::new(),
            shard_dir,
            client: self.clone(),
        })
    }
}

impl UploadSession {
    /// Chunks, deduplicates and packs a file. Its new xorbs start uploading at once; it is
    /// registered by [`UploadSession::finish`]. The file is read, never mapped (another
    /// program may truncate it meanwhile: the upload then fails).
    pub async fn add_file(
        &mut self,
        path: &Path,
        progress: Option<ProgressFn>,
    ) -> Result<FileUpload> {
        self.add_file_with(path, Mapper::reading(), progress).await
    }

    /// [`UploadSession::add_file`], mapping the file when `mapper` maps: only for files
    /// git-xet owns (see [`Mapper::new`]).
    pub async fn add_file_with(
        &mut self,
        path: &Path,
        mapper: Mapper,
        progress: Option<ProgressFn>,
    ) -> Result<FileUpload> {
        let (file, size) = open_for_upload(path)?;
        self.add_input(
            &path.display().to_string(),
            Input::Stream(Stream::File(Arc::new(file), mapper)),
            Size::Exact(size),
            progress,
        )
        .await
    }

    /// Like [`UploadSession::add_file`] for a file whose chunks are already known: only the
    /// chunks that must be packed are read (and each is checked against `list`; a mismatch
    /// is [`ClientError::Corrupt`] and ends the session). The file must not change meanwhile;
    /// it is mapped when `mapper` maps (only for files git-xet owns: see [`Mapper::new`]).
    pub async fn add_chunked_file(
        &mut self,
        path: &Path,
        list: ChunkList,
        mapper: Mapper,
        progress: Option<ProgressFn>,
    ) -> Result<FileUpload> {
        let (file, size) = open_for_upload(path)?;
        check_list_size(path, size, &list)?;
        self.add_input(
            &path.display().to_string(),
            Input::Chunked(Arc::new(file), list, mapper),
            Size::Exact(size),
            progress,
        )
        .await
    }

    /// Like [`UploadSession::add_file`] for any reader; `size_hint` is for progress only.
    pub async fn add_reader<R: Read + Send + 'static>(
        &mut self,
        name: &str,
        reader: R,
        size_hint: u64,
        progress: Option<ProgressFn>,
    ) -> Result<FileUpload> {
        self.add_input(
            name,
            Input::Stream(Stream::Reader(Box::new(reader))),
            Size::Hint(size_hint),
            progress,
        )
        .await
    }

    /// [`UploadSession::add_file_with`], or with the file's chunk list
    /// [`UploadSession::add_chunked_file`], planned on the calling thread, which must not be
    /// one of `runtime`'s (the session's). For a caller packing many small files in a row:
    /// handing each file to a blocking thread and back costs two thread wake-ups, more than
    /// chunking a small file on a busy machine.
    pub fn add_file_here(
        &mut self,
        runtime: &tokio::runtime::Handle,
        path: &Path,
        list: Option<ChunkList>,
        mapper: Mapper,
    ) -> Result<FileUpload> {
        let (file, size) = open_for_upload(path)?;
        let input = match list {
            Some(list) => {
                check_list_size(path, size, &list)?;
                Input::Chunked(Arc::new(file), list, mapper)
            }
            None => Input::Stream(Stream::File(Arc::new(file), mapper)),
        };
        let (planner, queries) = self.take_planning()?;
        let name = path.display().to_string();
        let planned = plan_input(planner, queries, input, Size::Exact(size), None, name);
        match self.keep_planned(planned) {
            Err(e) => Err(runtime.block_on(self.explain(e))),
            ok => ok,
        }
    }

    async fn add_input(
        &mut self,
        name: &str,
        input: Input,
        size: Size,
        progress: Option<ProgressFn>,
    ) -> Result<FileUpload> {
        let (planner, queries) = self.take_planning()?;
        let name = name.to_string();
        let task = tokio::task::spawn_blocking({
            let name = name.clone();
            move || plan_input(planner, queries, input, size, progress, name)
        });
        let planned = task
            .await
            .map_err(|e| ClientError::Aborted(format!("chunking {name} failed: {e}")))?;
        match self.keep_planned(planned) {
            Err(e) => Err(self.explain(e).await),
            ok => ok,
        }
    }

    /// The planner and the dedup queries, lent to one file's planning at a time.
    fn take_planning(&mut self) -> Result<(SessionPlanner, GlobalQueries)> {
        match (self.planner.take(), self.queries.take()) {
            (Some(planner), Some(queries)) => Ok((planner, queries)),
            _ => Err(ClientError::Aborted("the session failed earlier".into())),
        }
    }

    /// Takes the planner back after a file's planning and keeps what was planned. After a
    /// failure the planner stays gone: the session is over.
    fn keep_planned(&mut self, (planner, queries, result): Planning) -> Result<FileUpload> {
        let (upload, planned) = result?;
        self.planner = Some(planner);
        self.queries = Some(queries);
        self.planned.push((upload.clone(), planned));
        Ok(upload)
    }

    /// A refused shard that reuses xorbs this session did not upload means the shard cache
    /// (or a kept global dedup answer) was wrong about the server: the cache is cleared and
    /// the error says so, so that the same upload again succeeds.
    fn stale_or(&self, e: ClientError) -> ClientError {
        let refused = matches!(e.status(), Some(400 | 404 | 409 | 422));
        let reused = self.planned.iter().any(|(_, planned)| {
            planned
                .terms
                .iter()
                .any(|t| matches!(t.xorb, planner::XorbRef::Known(_)))
        });
        match &self.shard_dir {
            Some(dir) if refused && reused => {
                tracing::warn!("{e}: clearing the shard cache of {}", self.api.base_url());
                shard_cache::discard(dir);
                ClientError::StaleDedup {
                    refusal: Box::new(e),
                }
            }
            _ => e,
        }
    }

    /// When the pipeline stopped because the uploader failed, its error is the real one.
    async fn explain(&mut self, e: ClientError) -> ClientError {
        if matches!(e, ClientError::Aborted(_)) {
            if let Some(uploader) = self.uploader.take() {
                if let Ok(Err(real)) = uploader.await {
                    return real;
                }
            }
        }
        e
    }

    /// Uploads what remains, then the shard; returns per-file results and session totals.
    /// Only after this returns Ok are the files registered on the server.
    pub async fn finish(self) -> Result<UploadSummary> {
        Ok(self.register().await?.settle())
    }

    /// [`UploadSession::finish`] up to the server's registration of the shard: once this
    /// returns Ok the files are registered; what is left ([`Registered::settle`]) is local
    /// bookkeeping, which a caller answering others may do after answering them.
    pub async fn register(mut self) -> Result<Registered> {
        let started = std::time::Instant::now();
        let mut planner = self
            .planner
            .take()
            .ok_or_else(|| ClientError::Aborted("the session failed earlier".into()))?;
        let flushed = tokio::task::spawn_blocking(move || {
            let r = planner
                .close_open()
                .and_then(|_| planner.sink_mut().finish());
            (planner, r)
        })
        .await
        .map_err(|e| ClientError::Aborted(format!("packing failed: {e}")))?;
        let (mut planner, flushed) = flushed;
        if let Err(e) = flushed {
            return Err(self.explain(e).await);
        }
        let flushed_at = std::time::Instant::now();
        let uploader = self.uploader.take().expect("uploader runs until finish");
        let shard = build_shard(&planner, &self.planned);
        let upload = (!shard.files.is_empty() || !shard.xorbs.is_empty()).then(|| ShardUpload {
            upload: Bytes::from(shard.to_upload_bytes()),
            stored: shard.to_stored_bytes(&FooterOptions::default()),
        });
        let awaited: Vec<MerkleHash> = shard.xorbs.iter().map(|x| x.xorb_hash).collect();
        drop(shard);
        let mut totals = match upload {
            Some(upload) => match uploader::send_shard(
                &self.api,
                uploader,
                upload,
                &awaited,
                self.shard_dir.as_ref(),
            )
            .await
            {
                Ok(totals) => totals,
                Err(e) => return Err(self.stale_or(e)),
            },
            None => uploader
                .await
                .map_err(|e| ClientError::Aborted(format!("xorb uploads failed: {e}")))??,
        };
        let mut stats = SessionStats {
            files: self.planned.len() as u64,
            xorb_bytes_sent: totals.xorb_bytes,
            xorbs_uploaded: totals.xorbs,
            xorbs_already_present: totals.xorbs_already_present,
            shards_uploaded: totals.shards,
            shard_bytes_sent: totals.shard_bytes,
            ..Default::default()
        };
        for (upload, _) in &self.planned {
            stats.dedup.merge(&upload.stats);
        }
        tracing::debug!(
            flush_ms = (flushed_at - started).as_secs_f64() * 1e3,
            send_ms = flushed_at.elapsed().as_secs_f64() * 1e3,
            "session registered"
        );
        if self.shard_dir.is_some() {
            // Hand the index (with this session's shards and dedup answers) to the next
            // session, which may start as soon as this returns.
            let saved = std::mem::take(&mut totals.saved_shards);
            let queries = self.queries.take();
            let index = tokio::task::spawn_blocking(move || {
                for answer in queries
                    .map(|mut q| q.answers(FINISH_WAIT))
                    .unwrap_or_default()
                {
                    planner.add_dedup_answer(&answer);
                }
                let mut index = std::mem::take(&mut planner.shards);
                for path in &saved {
                    index.add_own_shard_file(path);
                }
                index.unload();
                (planner, index)
            })
            .await;
            match index {
                Ok((back, index)) => {
                    planner = back;
                    *self.client.shard_index.lock().expect("shard index lock") = Some(index);
                }
                Err(e) => {
                    return Err(ClientError::Aborted(format!(
                        "indexing the session's shards failed: {e}"
                    )))
                }
            }
        }
        let terms = self
            .planned
            .into_iter()
            .map(|(upload, planned)| {
                let terms = planned
                    .terms
                    .iter()
                    .map(|t| (planner.resolve(t.xorb), t.start, t.end - t.start))
                    .collect();
                (upload, terms, planned.chunks)
            })
            .collect();
        Ok(Registered {
            stats,
            files: terms,
            client: self.client.clone(),
        })
    }
}

/// A registered file: its upload, its terms (xorb, first chunk, chunks) and its chunk log.
type RegisteredFile = (FileUpload, Vec<(MerkleHash, u32, u32)>, Option<ChunkLog>);

/// A session whose shard the server registered (see [`UploadSession::register`]).
pub struct Registered {
    stats: SessionStats,
    files: Vec<RegisteredFile>,
    client: CasClient,
}

impl Registered {
    /// What the session sent.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Writes how each file is stored (the reconstruction records): what a later session
    /// or download of this client reuses. Blocking file writes.
    pub fn settle(self) -> UploadSummary {
        let Registered {
            stats,
            files,
            client,
        } = self;
        let mut uploads = Vec::with_capacity(files.len());
        for (upload, terms, log) in files {
            if let (Some(store), Some(log)) = (&client.records, log) {
                let saved =
                    store.save_from_log(&upload.file_hash, Some(upload.sha256), &terms, log);
                if let Err(e) = saved {
                    tracing::warn!("could not record how {} is stored: {e}", upload.name);
                }
            }
            uploads.push(upload);
        }
        UploadSummary {
            files: uploads,
            stats,
        }
    }
}

/// One shard for the session: every non-empty file (with verification entries and its
/// sha256) and every new xorb.
fn build_shard(planner: &SessionPlanner, planned: &[(FileUpload, PlannedFile)]) -> Shard {
    let mut shard = Shard::new();
    for (upload, plan) in planned {
        if plan.terms.is_empty() {
            continue; // the empty file needs no registration: its hash is all zeros
        }
        let terms = plan
            .terms
            .iter()
            .map(|t| FileTerm {
                xorb_hash: planner.resolve(t.xorb),
                cas_flags: 0,
                unpacked_bytes: t.bytes,
                chunk_start: t.start,
                chunk_end: t.end,
            })
            .collect();
        shard.files.push(FileInfo {
            file_hash: upload.file_hash,
            terms,
            verification: Some(plan.terms.iter().map(|t| t.verification).collect()),
            sha256: Some(sha256_as_merkle(&upload.sha256)),
        });
    }
    for (hash, chunks) in planner.new_xorbs() {
        shard
            .xorbs
            .push(XorbBlock::from_chunks(hash, chunks.iter().copied(), 0));
    }
    shard
}

/// A planner and its queries back from one file's planning, with what it planned.
type Planning = (
    SessionPlanner,
    GlobalQueries,
    Result<(FileUpload, PlannedFile)>,
);

/// Plans one input into the session's xorbs (blocking: reads, chunks and hashes it).
fn plan_input(
    mut planner: SessionPlanner,
    mut queries: GlobalQueries,
    input: Input,
    size: Size,
    progress: Option<ProgressFn>,
    name: String,
) -> Planning {
    for answer in queries.answers(Duration::ZERO) {
        planner.add_dedup_answer(&answer);
    }
    let background = matches!(size, Size::Exact(n) if n <= BACKGROUND_MAX_BYTES);
    let size_hint = match size {
        Size::Exact(n) | Size::Hint(n) => n,
    };
    let mut query = |hash: &MerkleHash| queries.ask(hash, background);
    let result = match input {
        Input::Stream(stream) => {
            plan_stream(&mut planner, stream, size_hint, progress, &mut query, &name)
        }
        Input::Chunked(file, list, mapper) => plan_chunked(
            &mut planner,
            file,
            list,
            mapper,
            size_hint,
            progress,
            &mut query,
            &name,
        ),
    };
    (planner, queries, result)
}

/// A chunk list must describe a file of the file's size.
fn check_list_size(path: &Path, size: u64, list: &ChunkList) -> Result<()> {
    if size == list.size() {
        return Ok(());
    }
    Err(ClientError::corrupt(
        format!("uploading {}", path.display()),
        format!("it has {size} bytes, its chunk list {}", list.size()),
    ))
}
