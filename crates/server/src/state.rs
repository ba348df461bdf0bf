//! What every handler shares: settings, storage, index, keys and counters.

use std::sync::Arc;

use axum::http::HeaderMap;

use crate::config::ServerConfig;
use crate::error::{ServerError, ServerResult};
use crate::metrics::Metrics;
use git_xet_identity::auth::{self, Accepts, Access, Scope};
use git_xet_identity::keys::Keys;
use git_xet_identity::revocation::RevocationCache;
use git_xet_identity::AuthError;
use git_xet_index::Index;
use git_xet_index::RepoName;
use git_xet_storage::ObjectStore;

pub type SharedState = Arc<AppState>;

pub struct AppState {
    pub config: ServerConfig,
    pub store: Arc<dyn ObjectStore>,
    pub index: Arc<dyn Index>,
    pub keys: Keys,
    pub metrics: Metrics,
    /// Xorb and shard uploads received and validated at once; others wait.
    pub upload_slots: tokio::sync::Semaphore,
    /// Basic uploads converted at once (each builds a xorb in memory for as long as its
    /// client takes to send it); kept apart so slow basic clients cannot starve xorb uploads.
    pub conversion_slots: tokio::sync::Semaphore,
    /// Shards waiting for the xorbs their client is still sending (cas/xorb_waits.rs).
    pub xorb_waits: crate::cas::xorb_waits::XorbWaits,
    /// Recent upload Batch API answers' objects, for clients reading ahead
    /// (cas/upload_batches.rs).
    pub upload_batches: crate::cas::upload_batches::UploadBatches,
    /// Plain-HTTP base URL on loopback for the server's own helpers (hooks): the listener's,
    /// or with TLS a second, loopback-only listener's (the certificate need not name
    /// 127.0.0.1, nor the hook trust its CA).
    pub internal_url: String,
    /// Base URL of the bound listener on loopback (https when serving TLS).
    pub listen_url: String,
    /// The data directory's lock, held while the server runs (none for import-lfs).
    pub data_lock: Option<std::fs::File>,
    /// Revoked token ids, as recently read from the index.
    pub revocations: RevocationCache,
    /// The last `/readyz` answer (health.rs).
    pub readiness: crate::health::Readiness,
}

impl AppState {
    /// The base URL clients should use in URLs we hand out: `--public-url`, else the scheme
    /// and host a trusted proxy forwarded (proxy.rs), else the request's own (https when
    /// serving TLS) and `Host`, else the listener's address.
    pub fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.config.public_url {
            return url.clone();
        }
        let (forwarded_scheme, forwarded_host) = crate::proxy::forwarded_origin(headers);
        let own_scheme = if self.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let scheme = forwarded_scheme.unwrap_or(own_scheme);
        forwarded_host
            .or_else(|| {
                headers
                    .get(axum::http::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
                    .map(str::to_string)
            })
            .map(|h| format!("{scheme}://{h}"))
            .unwrap_or_else(|| self.listen_url.clone())
    }

    /// Authorizes a request on a named repository with a user's token (git, the Batch API,
    /// token refresh): the server's transfer tokens are refused.
    pub fn authorize_repo(
        &self,
        headers: &HeaderMap,
        repo: &RepoName,
        need: Scope,
    ) -> ServerResult<Access> {
        self.authorize_named(headers, repo, need, Accepts::UserTokens)
    }

    /// Authorizes a basic object transfer or verify on a named repository: a user's token
    /// or a transfer token from a Batch answer.
    pub fn authorize_transfer(
        &self,
        headers: &HeaderMap,
        repo: &RepoName,
        need: Scope,
    ) -> ServerResult<Access> {
        self.authorize_named(headers, repo, need, Accepts::TransferTokens)
    }

    /// The one path of [`Self::authorize_repo`] and [`Self::authorize_transfer`]: anonymous
    /// reads as the repository allows, then the credential as `accepts` says.
    fn authorize_named(
        &self,
        headers: &HeaderMap,
        repo: &RepoName,
        need: Scope,
        accepts: Accepts,
    ) -> ServerResult<Access> {
        let anonymous = self.anonymous_read(headers, repo)?;
        self.authorize(headers, Some(repo), need, anonymous, accepts)
    }

    /// Checks the request's credential (verified as `accepts` says) against `repo`, or the
    /// credential's one repository when `None` (CAS), and refuses revoked tokens.
    fn authorize(
        &self,
        headers: &HeaderMap,
        repo: Option<&RepoName>,
        need: Scope,
        anonymous: bool,
        accepts: Accepts,
    ) -> ServerResult<Access> {
        let verify = |t: &str| self.verify_auth(t, accepts);
        let access = auth::authorize_with(headers, repo, need, anonymous, &verify)?;
        self.not_revoked(access)
    }

    /// Whether a request without a credential may read `repo`: with `--anonymous-read`, a
    /// repository this server hosts unless it was created private (`create_repo(private=True)`,
    /// index/repos.rs). A missing repository is refused like a private one, so that a caller
    /// without a credential cannot tell which private repositories exist. The index is read
    /// (one primary-key row) only for credential-less requests on such a server, for a
    /// missing repository too (the answer then takes as long as a private one's).
    pub fn anonymous_read(&self, headers: &HeaderMap, repo: &RepoName) -> ServerResult<bool> {
        if !self.config.anonymous_read || auth::credential(headers).is_some() {
            return Ok(self.config.anonymous_read);
        }
        let private = self.index.repo_private(repo)?;
        Ok(self.hosts(repo) && !private)
    }

    /// Whether `repo` exists here: its git repository, or any name on a server that hosts
    /// no git (`--no-git`: the git-lfs store of a repository kept elsewhere).
    pub fn hosts(&self, repo: &RepoName) -> bool {
        self.config.no_git
            || repo
                .bare_dir(&self.config.repos_dir())
                .join("HEAD")
                .is_file()
    }

    /// Authorizes a CAS request: the token's repository is the one acted on.
    pub fn authorize_cas(&self, headers: &HeaderMap, need: Scope) -> ServerResult<Access> {
        self.authorize(headers, None, need, false, Accepts::TransferTokens)
    }

    /// Verifies a user's credential without naming a repository (the status page lists
    /// what its rules cover).
    pub fn authorize_user(&self, headers: &HeaderMap) -> ServerResult<auth::Verified> {
        let token = auth::credential(headers).ok_or_else(|| ServerError::from(auth::required()))?;
        let verified = self.verify_credential(&token, Accepts::UserTokens)?;
        if let Some(holder) = &verified.holder {
            self.not_revoked_id(&holder.id)?;
        }
        Ok(verified)
    }

    /// Verifies a credential: a JWT of the OIDC issuer when the server accepts them (its
    /// rules from the policy file), else one of the server's own tokens.
    pub fn verify_credential(&self, token: &str, accepts: Accepts) -> ServerResult<auth::Verified> {
        Ok(self.verify_auth(token, accepts)?)
    }

    fn verify_auth(&self, token: &str, accepts: Accepts) -> Result<auth::Verified, AuthError> {
        match &self.config.oidc {
            Some(oidc) if git_xet_identity::oidc::looks_like_jwt(token) => oidc.verify(token),
            _ => auth::verify_token(&self.keys, token, accepts),
        }
    }

    /// Refuses a credential whose token (or, for a transfer token, whose parent) was revoked.
    /// A cache hit most of the time; otherwise one primary-key read of the index, small
    /// enough to run on the async worker. 403, not 401: git-lfs 3.3 answers a 401 by asking
    /// its credential helper again, and a helper that keeps the revoked token made it retry
    /// thousands of times a second; a 403 stops git and git-lfs at once.
    fn not_revoked(&self, access: Access) -> ServerResult<Access> {
        if let Some(holder) = &access.holder {
            self.not_revoked_id(&holder.id)?;
        }
        Ok(access)
    }

    /// Refuses what was handed out to the token `id` (a fetch URL, a transfer token) once
    /// that token is revoked.
    pub fn not_revoked_id(&self, id: &str) -> ServerResult<()> {
        if self.revocations.is_revoked(self.index.as_ref(), id)? {
            return Err(ServerError::Forbidden(format!(
                "access token {id} was revoked; ask the server's admin for a new one (`git xet server token create`)"
            )));
        }
        Ok(())
    }

    /// The repositories whose xorbs a request on `repo` may dedup against (`--dedup-scope`).
    pub fn dedup_domain(&self, repo: &RepoName) -> git_xet_index::DedupDomain {
        self.config.dedup_scope.domain(repo)
    }

    /// The CAS base URL handed to clients of `repo` (`casUrl`): the base URL, under the
    /// dedup scope's path on a scoped server (index/scope.rs, `cas_path`).
    pub fn cas_url(&self, headers: &HeaderMap, repo: &RepoName) -> String {
        format!(
            "{}{}",
            self.base_url(headers),
            self.dedup_domain(repo).cas_path()
        )
    }

    /// Waits for one of the upload slots that bound memory.
    pub async fn upload_slot(&self) -> ServerResult<tokio::sync::SemaphorePermit<'_>> {
        acquire(&self.upload_slots).await
    }

    /// A transfer token the server hands out (LFS actions, token refresh) to the holder of
    /// `parent`: it expires with `parent` at the latest.
    pub fn mint_token(&self, repo: &RepoName, scope: Scope, parent: &Access) -> (String, u64) {
        let ttl = self.config.cas_token_ttl.as_secs();
        let holder = parent.holder.as_ref();
        auth::issue_transfer(&self.keys, repo, scope, ttl, parent.exp, holder)
    }
}

async fn acquire(slots: &tokio::sync::Semaphore) -> ServerResult<tokio::sync::SemaphorePermit<'_>> {
    slots
        .acquire()
        .await
        .map_err(|_| ServerError::Unavailable("the server is shutting down".into()))
}

/// Runs blocking work (hashing, index queries, file I/O) off the async workers.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ServerResult<T> + Send + 'static,
) -> ServerResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ServerError::from)?
}
