//! The object service: LFS objects moved through XET with the client engine, behind a typed
//! API that the transfer agent (`lfs/xet_backend.rs`, an adapter from git-lfs's messages),
//! the filter and migrate all call.
//!
//! Upload: one upload session per object (chunk, dedup, pack, upload xorbs, then the shard),
//! done only once the shard is registered. Download: reconstruct into git-lfs's temp
//! directory, verified against the XET hash and the oid, reusing chunks of recent local
//! objects the client knows the reconstruction of.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::action::XetAction;
use crate::batch::BatchResponse;
use crate::pointer::Oid;
use crate::protocol::{Action, Operation};
use crate::store::LfsStore;
use crate::tokens::Tokens;
use crate::LfsError;
use git_xet_client::store::{ChunkStore, Rebuilt};
use git_xet_client::transport::{Authenticator, HttpFactory};
use git_xet_client::{
    CasClient, ClientConfig, ContentTap, DownloadOptions, LocalSource, ProgressFn, RefreshFn, Token,
};
use git_xet_core::api::cas::AnnouncedObject;

/// Recent local objects offered to the client as sources of chunks on download.
const MAX_LOCAL_SOURCES: usize = 16;

/// What the service needs from the repository it works in, provided by the git layer.
#[derive(Clone)]
pub struct AgentEnv {
    /// git-lfs's object store: downloads land in its temp directory, and its objects are
    /// local data to reuse on download.
    pub store: LfsStore,
    /// git-xet's per-repository directory (`.git/xet`): shard cache and reconstruction
    /// records of the client engine.
    pub xet_dir: PathBuf,
    /// Credentials for the token-refresh URL (git's, as git-lfs uses them).
    pub auth: Arc<Authenticator>,
    /// Where HTTP clients come from (git's TLS, proxy and header settings).
    pub http: HttpFactory,
    /// Whether to use the per-user chunk cache.
    pub chunk_cache: bool,
    /// The per-user chunk store (root, bound on its chunks' bytes): what downloads fetch is
    /// kept there, and objects it holds are rebuilt from it with no transfer.
    pub chunk_store: Option<(PathBuf, u64)>,
    /// For a push's agents: works out which objects the push may contain, the only ones its
    /// coordinator reads ahead of git-lfs (see `coordinator::read_ahead`). `None` elsewhere,
    /// and then nothing is read ahead.
    pub outgoing: Option<OutgoingObjects>,
}

/// Works out what a push may contain, by the git layer's rule (the pointers in the commits
/// the remote has not seen); asked at most once per push.
pub type OutgoingObjects = Arc<dyn Fn() -> Result<Box<dyn PushContents>, LfsError> + Send + Sync>;

/// What a push may contain, as [`OutgoingObjects`] worked it out.
pub trait PushContents: Send {
    /// Whether the push may contain the LFS object `oid` of `size` bytes.
    fn may_contain(&self, oid: &Oid, size: u64) -> bool;
}

/// A list of the objects (oid, size) themselves.
impl PushContents for HashSet<(Oid, u64)> {
    fn may_contain(&self, oid: &Oid, size: u64) -> bool {
        self.contains(&(*oid, size))
    }
}

/// One object to download: what it is, and how to reach it (the `xet` action's CAS URL,
/// token, expiry, refresh URL and the object's XET hash).
#[derive(Clone, Debug)]
pub struct ObjectDownload {
    pub oid: Oid,
    pub size: u64,
    pub access: XetAction,
}

impl ObjectDownload {
    /// The download of `oid` that a Batch API answer from `endpoint` offers, or why it
    /// offers none (refused, no action, an action that is not `xet`'s).
    pub fn from_batch(
        answer: &BatchResponse,
        endpoint: &str,
        oid: Oid,
        size: u64,
    ) -> Result<ObjectDownload, LfsError> {
        let entry = answer.objects.iter().find(|o| o.oid == oid);
        if let Some(err) = entry.and_then(|e| e.error.as_ref()) {
            return Err(LfsError::object_refused(
                endpoint.to_string(),
                oid,
                err.code,
                err.message.clone(),
            ));
        }
        let action = entry
            .and_then(|e| e.action.as_ref())
            .ok_or_else(|| LfsError::NoDownload {
                endpoint: endpoint.to_string(),
                oid,
            })?;
        Ok(ObjectDownload {
            oid,
            size,
            access: XetAction::from_action(Some(action), Operation::Download)?,
        })
    }
}

/// One object to upload, with the batch API action git-lfs gave for it.
#[derive(Clone, Debug)]
pub struct UploadJob {
    pub oid: Oid,
    pub size: u64,
    pub path: PathBuf,
    pub access: XetAction,
    /// The action as git-lfs sent it (what is handed to another agent).
    pub action: Action,
}

/// Moves LFS objects of one repository through XET servers. One client per CAS URL for
/// the service's life (connections and caches are reused).
pub struct ObjectService {
    env: AgentEnv,
    clients: HashMap<String, (CasClient, Arc<Tokens>)>,
    /// A chunk cache of its own (directory, size bound), for clients created from now on
    /// (`git xet mount --cache-size`).
    chunk_cache: Option<(PathBuf, u64)>,
    /// The chunk store, opened on first use (`None` inside: none configured or unusable).
    store: Option<Option<ChunkStore>>,
}

impl ObjectService {
    pub fn new(env: AgentEnv) -> ObjectService {
        ObjectService {
            env,
            clients: HashMap::new(),
            chunk_cache: None,
            store: None,
        }
    }

    /// The per-user chunk store, if one is configured and opens.
    pub fn chunk_store(&mut self) -> Option<&ChunkStore> {
        let env = &self.env;
        self.store
            .get_or_insert_with(|| {
                let (root, max) = env.chunk_store.as_ref()?;
                ChunkStore::open(root, *max)
                    .map_err(|e| tracing::warn!("working without the chunk store: {e}"))
                    .ok()
            })
            .as_ref()
    }

    /// Rebuilds `oid` from the chunk store into a new file of git-lfs's temp directory, if
    /// the store holds all of it (verified: see [`ChunkStore::rebuild`]).
    pub fn rebuild_local(&mut self, oid: &Oid, size: u64) -> Option<PathBuf> {
        let output = self.env.store.temp_path("rebuild");
        let tmp_dir = output.parent().map(Path::to_path_buf);
        let store = self.chunk_store()?;
        if let Some(dir) = tmp_dir {
            let _ = std::fs::create_dir_all(dir);
        }
        match store.rebuild(&oid.0, size, &output) {
            Ok(Rebuilt::Done) => {
                tracing::info!(oid = %oid, "rebuilt from the chunk store");
                Some(output)
            }
            Ok(Rebuilt::Missing) => None,
            Ok(Rebuilt::Damaged(why)) => {
                tracing::warn!(oid = %oid, "{why}; downloading instead");
                None
            }
            Err(e) => {
                tracing::warn!(oid = %oid, "rebuilding from the chunk store: {e}");
                None
            }
        }
    }

    pub fn env(&self) -> &AgentEnv {
        &self.env
    }

    /// Clients created from now on keep a chunk cache in `dir` of at most `max_bytes`.
    pub fn set_chunk_cache(&mut self, dir: PathBuf, max_bytes: u64) {
        self.chunk_cache = Some((dir, max_bytes));
    }

    /// The client of the CAS server `access` names (the one the agent and the filter use:
    /// same credentials, token refresh and HTTP settings), for callers that read ranges.
    pub fn client(&mut self, access: &XetAction) -> Result<CasClient, LfsError> {
        self.client_for(access)
    }

    /// The objects the Batch API answer of `access` (its session id) gave upload actions,
    /// where its server keeps that list (a git-xet extension; `None` elsewhere).
    pub fn announced_uploads(
        &mut self,
        access: &XetAction,
    ) -> Result<Option<Vec<AnnouncedObject>>, LfsError> {
        let Some(session) = access.session_id.clone() else {
            return Ok(None);
        };
        let client = self.client_for(access)?;
        let runtime = self.runtime()?;
        let announced =
            runtime.block_on(async move { client.api().announced_uploads(&session).await });
        Ok(announced?)
    }

    /// The process's runtime, started by the first transfer (git-lfs starts agents that
    /// never get an object).
    fn runtime(&self) -> Result<tokio::runtime::Handle, LfsError> {
        git_xet_io::runtime::handle().map_err(|e| LfsError::Runtime(Arc::new(e)))
    }

    /// The client for the CAS server `access` names, created on first use; a newer token
    /// for it is kept for its next refresh.
    fn client_for(&mut self, access: &XetAction) -> Result<CasClient, LfsError> {
        self.client_with(access, true, 0)
    }

    /// The client of the coordinator's batches of `lane` (no global dedup queries: see
    /// [`start_batch`](Self::start_batch)).
    fn batch_client(&mut self, access: &XetAction, lane: usize) -> Result<CasClient, LfsError> {
        self.client_with(access, false, lane)
    }

    /// [`client_for`](Self::client_for), with or without global dedup queries (a client
    /// of each kind and lane per CAS URL).
    fn client_with(
        &mut self,
        access: &XetAction,
        global_dedup: bool,
        lane: usize,
    ) -> Result<CasClient, LfsError> {
        let key = if global_dedup {
            access.cas_url.clone()
        } else {
            format!("{}\0no-global-dedup\0{lane}", access.cas_url)
        };
        if let Some((client, tokens)) = self.clients.get(&key) {
            tokens.offer(access);
            return Ok(client.clone());
        }
        let env = &self.env;
        let tokens = Arc::new(Tokens::new(access, env.auth.clone(), env.http.clone()));
        let for_refresh = tokens.clone();
        let refresh: RefreshFn = Arc::new(move || Box::pin(for_refresh.clone().refresh()));
        let mut config = ClientConfig::new(access.cas_url.clone());
        config.token = Some(Token::with_unix_expiry(
            access.access_token.clone(),
            access.token_expiration,
        ));
        config.refresh = Some(refresh);
        config.metadata_dir = Some(env.xet_dir.clone());
        config.http = env.http.clone();
        if env.chunk_cache {
            config = config.with_user_caches();
        }
        if let Some((root, max)) = &env.chunk_store {
            config = config.with_store(root, *max);
        }
        if let Some(cache) = &self.chunk_cache {
            config.chunk_cache = Some(cache.clone());
        }
        config.global_dedup = global_dedup;
        let client = CasClient::new(config)?;
        if let Some(limit) = access.await_xorbs_limit {
            client.api().assume_await_limit(limit);
        }
        self.clients.insert(key, (client.clone(), tokens));
        Ok(client)
    }

    /// Downloads one object into a new file of the store's temp directory (the caller
    /// moves it into place), reporting the bytes written so far to `progress`.
    pub fn download(
        &mut self,
        want: &ObjectDownload,
        progress: Option<ProgressFn>,
    ) -> Result<PathBuf, LfsError> {
        self.download_to(want, None, progress)
    }

    /// [`download`](Self::download), handing the object's bytes to `tap` as they are
    /// written (before the object is verified: see [`ContentTap`]).
    pub fn download_tapped(
        &mut self,
        want: &ObjectDownload,
        tap: ContentTap,
        progress: Option<ProgressFn>,
    ) -> Result<PathBuf, LfsError> {
        self.download_to(want, Some(tap), progress)
    }

    fn download_to(
        &mut self,
        want: &ObjectDownload,
        tap: Option<ContentTap>,
        progress: Option<ProgressFn>,
    ) -> Result<PathBuf, LfsError> {
        if tap.is_none() {
            if let Some(path) = self.rebuild_local(&want.oid, want.size) {
                return Ok(path);
            }
        }
        let local = self.env.store.newest_objects();
        let mut job = self.prepare_download(want, &local)?;
        job.options.tap = tap;
        job.options.progress = progress;
        self.runtime()?.block_on(job.run())
    }

    /// Downloads many objects, up to `parallel` at a time (small files are dominated by
    /// round trips); one result per object, in order.
    pub fn download_many(
        &mut self,
        wants: &[ObjectDownload],
        parallel: usize,
    ) -> Vec<Result<PathBuf, LfsError>> {
        let mut results: Vec<Option<Result<PathBuf, LfsError>>> =
            wants.iter().map(|_| None).collect();
        self.download_each(wants, parallel, true, &mut |i, r| results[i] = Some(r));
        results
            .into_iter()
            .map(|r| r.expect("download_each answers every object"))
            .collect()
    }

    /// [`Self::download_many`], handing each object's result to `done` (with its index in
    /// `wants`) as soon as it is downloaded (the filter lists delayed files to git as they
    /// finish). With `local_sources`, local objects are offered as sources of chunks (a
    /// walk of `.git/lfs/objects`: worth it for large objects, whose previous version
    /// shares most chunks; an object of a few chunks shares next to none).
    pub fn download_each(
        &mut self,
        wants: &[ObjectDownload],
        parallel: usize,
        local_sources: bool,
        done: &mut dyn FnMut(usize, Result<PathBuf, LfsError>),
    ) {
        let local = if local_sources {
            self.env.store.newest_objects()
        } else {
            Vec::new()
        };
        let mut jobs = Vec::new();
        for (i, want) in wants.iter().enumerate() {
            // Objects the chunk store holds are rebuilt from it; the rest are downloaded.
            if let Some(path) = self.rebuild_local(&want.oid, want.size) {
                done(i, Ok(path));
                continue;
            }
            match self.prepare_download(want, &local) {
                Ok(job) => jobs.push((i, job)),
                Err(e) => done(i, Err(e)),
            }
        }
        if jobs.is_empty() {
            return;
        }
        let runtime = match self.runtime() {
            Ok(rt) => rt,
            Err(LfsError::Runtime(e)) => {
                for (i, _) in jobs {
                    done(i, Err(LfsError::Runtime(e.clone())));
                }
                return;
            }
            Err(e) => unreachable!("runtime() fails only with Runtime: {e}"),
        };
        use futures::StreamExt;
        runtime.block_on(async move {
            let jobs = with_reconstructions(jobs).await;
            let mut running = futures::stream::iter(jobs)
                .map(|(i, job)| async move { (i, job.run().await) })
                .buffer_unordered(parallel.max(1));
            while let Some((i, result)) = running.next().await {
                done(i, result);
            }
        });
    }

    fn prepare_download(
        &mut self,
        want: &ObjectDownload,
        local: &[(Oid, PathBuf)],
    ) -> Result<DownloadJob, LfsError> {
        let file_hash = want
            .access
            .file_hash
            .ok_or_else(|| LfsError::Action("download action without X-Xet-Hash".into()))?;
        let client = self.client_for(&want.access)?;
        self.env.store.create_tmp_dir()?;
        let options = DownloadOptions {
            expected_sha256: Some(want.oid.0),
            sources: sources_for(local, &client, &want.oid),
            ..Default::default()
        };
        Ok(DownloadJob {
            client,
            file_hash,
            oid: want.oid,
            size: want.size,
            output: self.env.store.temp_path("download"),
            options,
            recon: None,
        })
    }

    /// Ends the session: clients dropped (the process's runtime stops where the process
    /// ends: git_xet_io::runtime::shutdown).
    pub fn shutdown(&mut self) {
        self.clients.clear();
    }
}

impl Drop for ObjectService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The jobs, each with its file's reconstruction when a batch query of its CAS server
/// answered it: many small files then cost one round trip each (the xorb bytes), not two,
/// and files side by side in a xorb share one (the runs of the answer).
async fn with_reconstructions(mut jobs: Vec<(usize, DownloadJob)>) -> Vec<(usize, DownloadJob)> {
    let mut by_server: HashMap<String, (CasClient, Vec<git_xet_core::MerkleHash>)> = HashMap::new();
    for (_, job) in &jobs {
        by_server
            .entry(job.client.api().base_url().to_string())
            .or_insert_with(|| (job.client.clone(), Vec::new()))
            .1
            .push(job.file_hash);
    }
    if by_server.values().all(|(_, files)| files.len() < 2) {
        return jobs; // one query either way
    }
    let answers = futures::future::join_all(by_server.into_iter().map(
        |(url, (client, mut files))| async move {
            // In the order asked (git's: by path), not sorted by hash: files stored side by
            // side (pushed together) then share a query, and their bytes a run.
            let mut seen = std::collections::HashSet::new();
            files.retain(|f| seen.insert(*f));
            (url, client.reconstructions(&files).await)
        },
    ))
    .await;
    let answers: HashMap<String, _> = answers.into_iter().collect();
    for (_, job) in &mut jobs {
        let url = job.client.api().base_url();
        if let Some((recon, shared)) = answers.get(url).and_then(|f| f.get(&job.file_hash)) {
            job.recon = Some(recon.clone());
            job.options.shared = shared.clone();
        }
    }
    jobs
}

/// One download, ready to run: everything that needs `&mut ObjectService` is done.
struct DownloadJob {
    client: CasClient,
    file_hash: git_xet_core::hash::MerkleHash,
    oid: Oid,
    size: u64,
    output: PathBuf,
    options: DownloadOptions,
    /// The file's reconstruction when a batch query brought it.
    recon: Option<git_xet_core::reconstruction::Reconstruction>,
}

impl DownloadJob {
    async fn run(self) -> Result<PathBuf, LfsError> {
        let outcome = download_object(
            &self.client,
            &self.file_hash,
            self.recon,
            &self.output,
            self.options,
            self.oid,
            self.size,
        )
        .await?;
        tracing::info!(
            oid = %self.oid,
            network = outcome.network_bytes,
            cache = outcome.cache_bytes,
            local = outcome.local_bytes,
            "downloaded"
        );
        Ok(self.output)
    }
}

/// Downloads object `oid` of `size` bytes into `output` (with its reconstruction when a
/// batch query brought it); a download of another size is removed and an error, whatever
/// the hashes said.
async fn download_object(
    client: &CasClient,
    file_hash: &git_xet_core::hash::MerkleHash,
    recon: Option<git_xet_core::reconstruction::Reconstruction>,
    output: &Path,
    options: DownloadOptions,
    oid: Oid,
    size: u64,
) -> Result<git_xet_client::DownloadOutcome, LfsError> {
    let outcome = match recon {
        Some(recon) => {
            client
                .download_reconstructed(file_hash, recon, output, options)
                .await?
        }
        None => client.download(file_hash, output, options).await?,
    };
    if outcome.bytes_written != size {
        let _ = std::fs::remove_file(output);
        return Err(LfsError::WrongSize {
            oid,
            got: outcome.bytes_written,
            expected: size,
        });
    }
    Ok(outcome)
}

/// The mark an object gets once this clone pushed it and the chunk store holds what rebuilds
/// it (`.git/xet/pushed/<oid>`): the filter drops such a whole copy like a fetched one.
pub fn pushed_marker(xet_dir: &Path, oid: &Oid) -> PathBuf {
    pushed_dir(xet_dir).join(oid.to_string())
}

/// The directory of the [`pushed_marker`]s, one file named by its oid per object.
pub fn pushed_dir(xet_dir: &Path) -> PathBuf {
    xet_dir.join("pushed")
}

/// The most recent local objects whose reconstruction the client knows: typically the
/// previous version of the file being downloaded.
fn sources_for(local: &[(Oid, PathBuf)], client: &CasClient, wanted: &Oid) -> Vec<LocalSource> {
    local
        .iter()
        .filter(|(oid, _)| oid != wanted)
        .filter_map(|(oid, path)| {
            let file_hash = client.known_file_hash(&oid.0)?;
            Some(LocalSource {
                path: path.clone(),
                file_hash: Some(file_hash),
                sha256: Some(oid.0),
            })
        })
        .take(MAX_LOCAL_SOURCES)
        .collect()
}

#[path = "objects_upload.rs"]
mod upload;
pub use upload::{BatchUpload, RegisteredBatch};

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
