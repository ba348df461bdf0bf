//! Who may see a repository through the Hub API, and `whoami-v2`.

use std::path::PathBuf;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use crate::error::ServerError;
use crate::hub::{decode, HubError, HubResult};
use crate::state::SharedState;
use git_xet_identity::auth::{self, Access, Scope};
use git_xet_index::RepoName;

/// A hosted repository the caller may act on.
pub struct Repo {
    pub name: RepoName,
    pub dir: PathBuf,
    pub access: Access,
}

/// The repository `ns/name` (raw URL segments; `ns` prefixed with `datasets/` by the
/// dataset routes) for a request needing `need`. A repository the caller's token does not
/// name, or that does not exist, is `RepoNotFound` alike.
pub async fn open(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    need: Scope,
) -> HubResult<Repo> {
    let repo = named(ns, name)?;
    let access = authorize(state, headers, &repo, need)?;
    if state.config.no_git {
        return Err(HubError::RepoNotFound(format!(
            "{repo} (this server hosts no git repositories: --no-git)"
        )));
    }
    let dir = repo.bare_dir(&state.config.repos_dir());
    if !dir.join("HEAD").is_file() {
        return Err(HubError::RepoNotFound(repo.to_string()));
    }
    Ok(Repo {
        name: repo,
        dir,
        access,
    })
}

/// The hosted repository of the Hub's `ns/name` (see [`open`]). Decoded segments holding a
/// `/`, and a model in the namespace `datasets` (its URLs would be a dataset's), name none.
pub fn named(ns: &str, name: &str) -> HubResult<RepoName> {
    let (kind, ns) = match ns.strip_prefix(crate::hub::DATASET_PREFIX) {
        Some(ns) => (crate::hub::DATASET_PREFIX, ns),
        None => ("", ns),
    };
    let (ns, name) = (decode(ns)?, decode(name)?);
    let shown = format!("{kind}{ns}/{name}");
    let clash = kind.is_empty() && ns == git_xet_index::repo_name::DATASETS;
    if ns.contains('/') || name.contains('/') || clash {
        return Err(HubError::RepoNotFound(shown));
    }
    RepoName::parse(&shown).map_err(|_| HubError::RepoNotFound(shown))
}

/// Authorizes `need` on `repo`: a token of another repository gets `RepoNotFound` (404),
/// no token where one is needed `NoCredential` (401, still `RepoNotFound`), for a private
/// and a missing repository alike (`AppState::anonymous_read`); too small a scope on the
/// right repository a 403.
pub fn authorize(
    state: &SharedState,
    headers: &HeaderMap,
    repo: &RepoName,
    need: Scope,
) -> HubResult<Access> {
    match auth::credential(headers) {
        None if need == Scope::Read && state.anonymous_read(headers, repo)? => {}
        None => return Err(HubError::NoCredential(repo.to_string())),
        Some(token) => {
            // A credential whose rules do not cover the repository (`org/*` covers it).
            let verified = state
                .verify_credential(&token, auth::Accepts::TransferTokens)
                .map_err(|e| HubError::InvalidCredentials(e.to_string()))?;
            if verified.rules.scope(repo).is_none() {
                return Err(HubError::RepoNotFound(repo.to_string()));
            }
        }
    }
    state
        .authorize_repo(headers, repo, need)
        .map_err(|e| match e {
            ServerError::Unauthorized(m) => HubError::InvalidCredentials(m),
            other => HubError::Server(other),
        })
}

/// `GET /api/whoami-v2`: the token's holder as the user; no organizations.
pub async fn whoami(State(state): State<SharedState>, headers: HeaderMap) -> Response {
    let result: HubResult<Response> = (|| {
        let token = auth::credential(&headers).ok_or_else(|| {
            HubError::InvalidCredentials("no token: set HF_TOKEN to a git-xet token".into())
        })?;
        let claims = auth::verify(&state.keys, &token, git_xet_io::time::now_secs())
            .map_err(|e| HubError::InvalidCredentials(e.to_string()))?;
        if claims.transfer {
            return Err(HubError::InvalidCredentials(
                "a transfer token is not a user's token".into(),
            ));
        }
        state.not_revoked_id(&claims.id)?;
        Ok(axum::Json(serde_json::json!({
            "type": "user",
            "id": claims.id,
            "name": claims.user,
            "fullname": claims.user,
            "orgs": [],
            "auth": { "accessToken": {
                "displayName": claims.id,
                "role": if claims.scope >= Scope::Write { "write" } else { "read" },
            }},
        }))
        .into_response())
    })();
    result.unwrap_or_else(IntoResponse::into_response)
}
