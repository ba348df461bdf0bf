//! The transfer backend that moves LFS objects through XET with the client engine.
//!
//! Upload: one upload session per object (chunk, dedup, pack, upload xorbs, then the shard),
//! answered only after the shard is registered, because git-lfs kills the agent about 30 s
//! after `terminate`. Download: reconstruct into `.git/lfs/tmp`, verified against the XET
//! hash and the oid, reusing chunks of recent local objects the client knows the
//! reconstruction of.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::client::chunk_lists::ChunkListStore;
use crate::client::transport::{Authenticator, HttpFactory};
use crate::client::{
    CasClient, ClientConfig, ClientError, ContentTap, DownloadOptions, LocalSource, ProgressFn,
    RefreshFn, SessionStats, Token,
};
use crate::lfs::action::{RefreshedToken, XetAction};
use crate::lfs::agent::TransferBackend;
use crate::lfs::pointer::Oid;
use crate::lfs::progress::Progress;
use crate::lfs::protocol::{InitRequest, Operation, TransferRequest};
use crate::lfs::LfsError;

/// Recent local objects offered to the client as sources of chunks on download.
const MAX_LOCAL_SOURCES: usize = 16;

/// What the agent needs from the repository it runs in, provided by the git layer.
#[derive(Clone)]
pub struct AgentEnv {
    /// git-lfs's temp directory (downloads are renamed from here into its store).
    pub lfs_tmp_dir: PathBuf,
    /// git-lfs's object store (`.git/lfs/objects`): local data to reuse on download.
    pub lfs_objects_dir: PathBuf,
    /// git-xet's per-repository directory (`.git/xet`): shard cache and reconstruction
    /// records of the client engine.
    pub xet_dir: PathBuf,
    /// Credentials for the token-refresh URL (git's, as git-lfs uses them).
    pub auth: Arc<Authenticator>,
    /// Where HTTP clients come from (git's TLS, proxy and header settings).
    pub http: HttpFactory,
    /// Whether to use the per-user chunk cache.
    pub chunk_cache: bool,
}

/// Works out the environment when a transfer first needs it.
pub type EnvLookup = Box<dyn FnOnce() -> Result<AgentEnv, LfsError> + Send>;

/// The environment as `init` leaves it.
pub enum EnvStart {
    Ready(AgentEnv),
    /// Asked of git by the first transfer; its failure fails each of them. git-lfs starts
    /// all its agents (eight by default) one after another, each waiting for the previous
    /// one's `init` answer, and most get no object in a small push: neither the answer nor
    /// the idle agents should start git.
    Later(EnvLookup),
}

/// Starts the environment at `init` (an error is answered with code 32).
pub type EnvFactory = Box<dyn FnMut(&InitRequest) -> Result<EnvStart, LfsError>>;

/// Where the session's environment stands.
enum EnvState {
    /// No successful `init` yet.
    None,
    Pending(EnvLookup),
    Ready(AgentEnv),
    /// Why it could not be set up, for every transfer that needs it.
    Failed(Arc<dyn std::error::Error + Send + Sync>),
}

pub struct XetBackend {
    factory: EnvFactory,
    operation: Option<Operation>,
    env: EnvState,
    /// Started by the first transfer: git-lfs starts every agent and waits for each one's
    /// `init` answer in turn, and most agents of a small push never get an object.
    runtime: std::sync::OnceLock<tokio::runtime::Runtime>,
    /// One client per CAS URL for the session (connections and caches are reused).
    clients: HashMap<String, (CasClient, Arc<Tokens>)>,
    last_upload: Option<SessionStats>,
}

/// The newest token the LFS server handed out, for the client's refresh callback.
struct Tokens {
    refresh_url: String,
    action_authorization: Option<String>,
    auth: Arc<Authenticator>,
    http: HttpFactory,
    /// A token from a later action that the client has not used yet.
    pending: Mutex<Option<Token>>,
    last_seen: Mutex<String>,
}

impl Tokens {
    fn offer(&self, action: &XetAction) {
        let mut last = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
        if *last != action.access_token {
            *last = action.access_token.clone();
            *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(
                Token::with_unix_expiry(action.access_token.clone(), action.token_expiration),
            );
        }
    }

    async fn refresh(self: Arc<Self>) -> Result<Token, ClientError> {
        let fresh = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(token) = fresh.filter(|t| !expires_within(t, 60)) {
            return Ok(token);
        }
        if self.refresh_url.is_empty() {
            return Err(ClientError::Auth(
                "the CAS token expired and the LFS server gave no refresh URL (retry the command)"
                    .into(),
            ));
        }
        let auth = match &self.action_authorization {
            Some(a) => Arc::new(Authenticator::with_header(a.clone())),
            None => self.auth.clone(),
        };
        let t: RefreshedToken = refresh_token(&self.http, &self.refresh_url, &auth)
            .await
            .map_err(|e| match e {
                LfsError::Http(t) => ClientError::Transport(*t),
                other => ClientError::Refresh(Box::new(other)),
            })?;
        Ok(Token::with_unix_expiry(t.access_token, t.exp))
    }
}

fn expires_within(token: &Token, secs: u64) -> bool {
    token
        .expires_at
        .is_some_and(|exp| exp <= SystemTime::now() + std::time::Duration::from_secs(secs))
}

impl XetBackend {
    pub fn new(factory: EnvFactory) -> XetBackend {
        XetBackend {
            factory,
            operation: None,
            env: EnvState::None,
            runtime: std::sync::OnceLock::new(),
            clients: HashMap::new(),
            last_upload: None,
        }
    }

    /// A backend for an environment already known (the filter, `migrate`).
    pub fn for_env(env: AgentEnv) -> XetBackend {
        XetBackend::new(Box::new(move |_: &InitRequest| {
            Ok(EnvStart::Ready(env.clone()))
        }))
    }

    /// The environment, once what `init` started is settled.
    fn env(&mut self) -> Result<&AgentEnv, LfsError> {
        if matches!(self.env, EnvState::Pending(_)) {
            let EnvState::Pending(lookup) = std::mem::replace(&mut self.env, EnvState::None) else {
                unreachable!("matched above")
            };
            if let Err(e) = lookup().and_then(|env| self.adopt(env)) {
                self.env = EnvState::Failed(match e {
                    LfsError::Setup(cause) => cause,
                    other => Arc::new(other),
                });
            }
        }
        match &self.env {
            EnvState::Ready(env) => Ok(env),
            EnvState::Failed(e) => Err(LfsError::Setup(e.clone())),
            EnvState::None | EnvState::Pending(_) => Err(LfsError::Internal(
                "transfer before a successful init".into(),
            )),
        }
    }

    fn adopt(&mut self, env: AgentEnv) -> Result<(), LfsError> {
        if self.operation == Some(Operation::Download) {
            std::fs::create_dir_all(&env.lfs_tmp_dir).map_err(|source| LfsError::LocalIo {
                context: "cannot create",
                path: env.lfs_tmp_dir.clone(),
                source,
            })?;
        }
        self.env = EnvState::Ready(env);
        Ok(())
    }

    fn runtime(&self) -> Result<&tokio::runtime::Runtime, LfsError> {
        if self.operation.is_none() {
            return Err(LfsError::Internal(
                "transfer before a successful init".into(),
            ));
        }
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("git-xet-agent")
            .build()
            .map_err(|e| LfsError::Internal(format!("cannot start the async runtime: {e}")))?;
        Ok(self.runtime.get_or_init(|| runtime))
    }

    /// What the last successful upload sent (for `migrate`'s report).
    pub fn last_upload_stats(&self) -> Option<&SessionStats> {
        self.last_upload.as_ref()
    }

    /// The session's client for the action's CAS server, created on first use.
    fn client_for(&mut self, action: &XetAction) -> Result<CasClient, LfsError> {
        if let Some((client, tokens)) = self.clients.get(&action.cas_url) {
            tokens.offer(action);
            return Ok(client.clone());
        }
        let env = self.env()?.clone();
        let tokens = Arc::new(Tokens {
            refresh_url: action.refresh_url.clone(),
            action_authorization: action.authorization.clone(),
            auth: env.auth.clone(),
            http: env.http.clone(),
            pending: Mutex::new(None),
            last_seen: Mutex::new(action.access_token.clone()),
        });
        let for_refresh = tokens.clone();
        let refresh: RefreshFn = Arc::new(move || Box::pin(for_refresh.clone().refresh()));
        let mut config = ClientConfig::new(action.cas_url.clone());
        config.token = Some(Token::with_unix_expiry(
            action.access_token.clone(),
            action.token_expiration,
        ));
        config.refresh = Some(refresh);
        config.metadata_dir = Some(env.xet_dir.clone());
        config.http = env.http.clone();
        if env.chunk_cache {
            config = config.with_user_caches();
        }
        let client = CasClient::new(config)?;
        self.clients
            .insert(action.cas_url.clone(), (client.clone(), tokens));
        Ok(client)
    }
}

/// One download, ready to run: everything that needs `&mut XetBackend` is done.
struct DownloadJob {
    client: CasClient,
    file_hash: crate::xet::hash::MerkleHash,
    oid: Oid,
    size: u64,
    output: PathBuf,
    options: DownloadOptions,
}

impl DownloadJob {
    async fn run(self) -> Result<PathBuf, LfsError> {
        let outcome = self
            .client
            .download(&self.file_hash, &self.output, self.options)
            .await?;
        if outcome.bytes_written != self.size {
            let _ = std::fs::remove_file(&self.output);
            return Err(LfsError::WrongSize {
                oid: self.oid,
                got: outcome.bytes_written,
                expected: self.size,
            });
        }
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

impl XetBackend {
    fn prepare_download(
        &mut self,
        req: &TransferRequest,
        progress: Option<&Progress>,
        local: &LocalObjects,
    ) -> Result<DownloadJob, LfsError> {
        let action = XetAction::from_action(req.action.as_ref(), Operation::Download)?;
        let file_hash = action
            .file_hash
            .ok_or_else(|| LfsError::Action("download action without X-Xet-Hash".into()))?;
        let client = self.client_for(&action)?;
        let output = unique_tmp_path(&self.env()?.lfs_tmp_dir, &req.oid);
        let options = DownloadOptions {
            expected_sha256: Some(req.oid.0),
            sources: local.sources_for(&client, &req.oid),
            progress: progress.map(progress_callback),
            ..Default::default()
        };
        Ok(DownloadJob {
            client,
            file_hash,
            oid: req.oid,
            size: req.size,
            output,
            options,
        })
    }

    /// Downloads one object, handing its bytes to `tap` as they are written (before the
    /// object is verified: see [`ContentTap`]), and the bytes written so far to `progress`.
    pub fn download_tapped(
        &mut self,
        request: &TransferRequest,
        tap: ContentTap,
        progress: Option<ProgressFn>,
    ) -> Result<PathBuf, LfsError> {
        let local = LocalObjects::scan(self.env()?);
        let mut job = self.prepare_download(request, None, &local)?;
        job.options.tap = Some(tap);
        job.options.progress = progress;
        self.runtime()?.block_on(job.run())
    }

    /// Downloads many objects, up to `parallel` at a time (small files are dominated by
    /// round trips); one result per request, in order.
    pub fn download_many(
        &mut self,
        requests: &[TransferRequest],
        parallel: usize,
    ) -> Vec<Result<PathBuf, LfsError>> {
        let all_failed = |e: LfsError| -> Vec<Result<PathBuf, LfsError>> {
            let message = e.to_string();
            requests
                .iter()
                .map(|_| Err(LfsError::Internal(message.clone())))
                .collect()
        };
        let local = match self.env() {
            Ok(env) => LocalObjects::scan(env),
            Err(e) => return all_failed(e),
        };
        let jobs: Vec<Result<DownloadJob, LfsError>> = requests
            .iter()
            .map(|r| self.prepare_download(r, None, &local))
            .collect();
        let runtime = match self.runtime() {
            Ok(rt) => rt,
            Err(e) => return all_failed(e),
        };
        use futures::StreamExt;
        runtime.block_on(
            futures::stream::iter(jobs)
                .map(|job| async move { job?.run().await })
                .buffered(parallel.max(1))
                .collect(),
        )
    }
}

impl TransferBackend for XetBackend {
    fn init(&mut self, init: &InitRequest) -> Result<(), LfsError> {
        let start = (self.factory)(init)?;
        self.operation = Some(init.operation);
        match start {
            EnvStart::Ready(env) => self.adopt(env)?,
            EnvStart::Later(lookup) => self.env = EnvState::Pending(lookup),
        }
        Ok(())
    }

    fn upload(&mut self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError> {
        let action = XetAction::from_action(req.action.as_ref(), Operation::Upload)?;
        let path = req
            .path
            .clone()
            .ok_or_else(|| LfsError::Protocol("upload without a path".into()))?;
        check_upload_file(&path, req.size)?;
        let client = self.client_for(&action)?;
        let progress_fn = progress_callback(progress);
        let lists = ChunkListStore::new(&self.env()?.xet_dir);
        self.last_upload = None;
        let stats = self.runtime()?.block_on(async move {
            match upload_object(&client, &path, req, &lists, &progress_fn).await {
                // The cache that misled the first attempt is gone: this one sends the data.
                Err(LfsError::Client(e @ ClientError::StaleDedup { .. })) => {
                    tracing::warn!("{e}");
                    upload_object(&client, &path, req, &lists, &progress_fn).await
                }
                other => other,
            }
        })?;
        self.last_upload = Some(stats);
        Ok(())
    }

    fn download(
        &mut self,
        req: &TransferRequest,
        progress: &Progress,
    ) -> Result<PathBuf, LfsError> {
        let local = LocalObjects::scan(self.env()?);
        let job = self.prepare_download(req, Some(progress), &local)?;
        self.runtime()?.block_on(job.run())
    }

    fn terminate(&mut self) {
        self.clients.clear();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

fn progress_callback(progress: &Progress) -> ProgressFn {
    let progress = progress.clone();
    Arc::new(move |done, _total| progress.set(done))
}

/// A fresh path in git-lfs's temp directory for one download.
fn unique_tmp_path(dir: &Path, oid: &Oid) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    dir.join(format!("{oid}-xet-{}-{n}-{nanos}", std::process::id()))
}

/// The objects in git-lfs's store, newest first, listed once per batch of downloads.
struct LocalObjects(Vec<(Oid, PathBuf)>);

impl LocalObjects {
    fn scan(env: &AgentEnv) -> LocalObjects {
        let mut found: Vec<(SystemTime, Oid, PathBuf)> = Vec::new();
        let level1 = std::fs::read_dir(&env.lfs_objects_dir)
            .into_iter()
            .flatten()
            .flatten();
        for d1 in level1 {
            for d2 in std::fs::read_dir(d1.path()).into_iter().flatten().flatten() {
                for f in std::fs::read_dir(d2.path()).into_iter().flatten().flatten() {
                    let Some(oid) = f.file_name().to_str().and_then(|n| n.parse::<Oid>().ok())
                    else {
                        continue;
                    };
                    let modified = f
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(UNIX_EPOCH);
                    found.push((modified, oid, f.path()));
                }
            }
        }
        found.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        LocalObjects(
            found
                .into_iter()
                .map(|(_, oid, path)| (oid, path))
                .collect(),
        )
    }

    /// The most recent local objects whose reconstruction the client knows: typically the
    /// previous version of the file being downloaded.
    fn sources_for(&self, client: &CasClient, wanted: &Oid) -> Vec<LocalSource> {
        self.0
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
}

/// One upload session for one object: from the chunk list git-xet's clean filter recorded
/// when the file was added (then only the file's new chunks are read), else by chunking it.
async fn upload_object(
    client: &CasClient,
    path: &Path,
    req: &TransferRequest,
    lists: &ChunkListStore,
    progress_fn: &ProgressFn,
) -> Result<SessionStats, LfsError> {
    let oid = req.oid;
    if let Some(list) = lists.load(&oid.0, req.size) {
        let mut session = client.start_upload().await?;
        match session
            .add_chunked_file(path, list, Some(progress_fn.clone()))
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
    let file = session.add_file(path, Some(progress_fn.clone())).await?;
    if file.sha256 != oid.0 || file.size != req.size {
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

/// The file git-lfs asked us to upload must exist with the size it announced.
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

/// Fetches a fresh CAS token from the action's `href` with the LFS credentials.
pub async fn refresh_token(
    http: &HttpFactory,
    url: &str,
    auth: &Authenticator,
) -> Result<RefreshedToken, LfsError> {
    let response = auth
        .send(http, url, || {
            Ok(http
                .request(reqwest::Method::GET, url)?
                .header("Accept", "application/json"))
        })
        .await?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(LfsError::status(
            "token refresh",
            crate::client::transport::shown_url(url),
            status.as_u16(),
            body.chars().take(200).collect(),
        ));
    }
    response
        .json::<RefreshedToken>()
        .await
        .map_err(|e| LfsError::BadAnswer {
            url: crate::client::transport::shown_url(url),
            detail: format!("token refresh: {e}"),
        })
}
