//! The transfer backend that moves LFS objects through XET with the client engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::lfs::action::{RefreshedToken, XetAction};
use crate::lfs::agent::TransferBackend;
use crate::lfs::progress::Progress;
use crate::lfs::protocol::{InitRequest, Operation, TransferRequest};
use crate::lfs::LfsError;

/// Produces the `Authorization` header value for a URL (the git credentials git-lfs used).
pub type AuthorizationFn = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// What the agent needs from the repository it runs in, provided by the git layer.
#[derive(Clone)]
pub struct AgentEnv {
    /// git-lfs's temp directory (downloads are renamed from here into its store).
    pub lfs_tmp_dir: PathBuf,
    /// git-lfs's object store (`.git/lfs/objects`): local data to reuse on download.
    pub lfs_objects_dir: PathBuf,
    /// The per-repository shard cache (`.git/xet/shards`).
    pub shard_cache_dir: PathBuf,
    /// Credentials for the token-refresh URL.
    pub authorization: AuthorizationFn,
}

/// Builds the environment at `init` (so a failure is answered with code 32).
pub type EnvFactory = Box<dyn FnMut(&InitRequest) -> Result<AgentEnv, LfsError>>;

pub struct XetBackend {
    factory: EnvFactory,
    env: Option<AgentEnv>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl XetBackend {
    pub fn new(factory: EnvFactory) -> XetBackend {
        XetBackend {
            factory,
            env: None,
            runtime: None,
        }
    }

    fn env(&self) -> Result<&AgentEnv, LfsError> {
        self.env
            .as_ref()
            .ok_or_else(|| LfsError::Internal("transfer before a successful init".into()))
    }
}

impl TransferBackend for XetBackend {
    fn init(&mut self, init: &InitRequest) -> Result<(), LfsError> {
        let env = (self.factory)(init)?;
        if init.operation == Operation::Download {
            std::fs::create_dir_all(&env.lfs_tmp_dir).map_err(|e| {
                LfsError::Transfer(format!("cannot create {}: {e}", env.lfs_tmp_dir.display()))
            })?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("git-xet-agent")
            .build()
            .map_err(|e| LfsError::Internal(format!("cannot start the async runtime: {e}")))?;
        self.runtime = Some(runtime);
        self.env = Some(env);
        Ok(())
    }

    fn upload(&mut self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError> {
        let _env = self.env()?;
        let action = XetAction::from_action(req.action.as_ref(), Operation::Upload)?;
        let path = req
            .path
            .as_deref()
            .ok_or_else(|| LfsError::Protocol("upload without a path".into()))?;
        check_upload_file(path, req.size)?;
        let _ = (action, progress);
        Err(LfsError::Transfer(
            "the XET client engine is not wired yet".into(),
        ))
    }

    fn download(
        &mut self,
        req: &TransferRequest,
        progress: &Progress,
    ) -> Result<PathBuf, LfsError> {
        let _env = self.env()?;
        let action = XetAction::from_action(req.action.as_ref(), Operation::Download)?;
        let _ = (action, progress);
        Err(LfsError::Transfer(
            "the XET client engine is not wired yet".into(),
        ))
    }

    fn terminate(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

/// The file git-lfs asked us to upload must exist with the size it announced.
fn check_upload_file(path: &Path, size: u64) -> Result<(), LfsError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| LfsError::Transfer(format!("cannot read {}: {e}", path.display())))?;
    if meta.len() != size {
        return Err(LfsError::Transfer(format!(
            "{} is {} bytes but git-lfs announced {size}; was it modified during the push?",
            path.display(),
            meta.len()
        )));
    }
    Ok(())
}

/// Fetches a fresh CAS token from the action's `href` with the LFS credentials.
pub async fn refresh_token(
    url: &str,
    authorization: Option<String>,
) -> Result<RefreshedToken, LfsError> {
    let client = reqwest::Client::new();
    let mut request = client.get(url).header("Accept", "application/json");
    if let Some(auth) = authorization {
        request = request.header("Authorization", auth);
    }
    let response = request
        .send()
        .await
        .map_err(|e| LfsError::Transfer(format!("token refresh at {url} failed: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let hint = if status.as_u16() == 401 || status.as_u16() == 403 {
            " (check the credentials git uses for this remote)"
        } else {
            ""
        };
        return Err(LfsError::Transfer(format!(
            "token refresh at {url}: HTTP {status}: {}{hint}",
            body.chars().take(200).collect::<String>()
        )));
    }
    response
        .json::<RefreshedToken>()
        .await
        .map_err(|e| LfsError::Transfer(format!("token refresh at {url}: unexpected answer: {e}")))
}
