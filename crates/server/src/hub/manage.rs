//! `list_repo_commits`, `delete_repo` and `update_repo_settings`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::body::read_limited;
use crate::error::ServerError;
use crate::hub::access::{authorize, open};
use crate::hub::info::commit_of;
use crate::hub::upload::visibility;
use crate::hub::{gitread, HubError, HubResult};
use crate::state::{blocking, SharedState};
use git_xet_identity::auth::Scope;

/// Commits per page of `list_repo_commits` (the client follows `Link: rel="next"`).
const PAGE: usize = 500;

/// `GET /api/models/{repo}/commits/{rev}?p=N`: newest first.
pub async fn commits(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    rev: &str,
    query: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    let commit = commit_of(&repo, rev).await?;
    let page: usize = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("p="))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let skip = format!("--skip={}", page.saturating_mul(PAGE));
    // One more than a page tells whether another follows.
    let count = format!("--max-count={}", PAGE + 1);
    let format = "--format=%H%x1f%an%x1f%ct%x1f%s%x1f%B";
    let args = ["log", "-z", format, &skip, &count, &commit, "--"];
    let out = gitread::run(&repo.dir, &args).await?;
    if !out.status.success() {
        return Err(ServerError::internal("git log failed").into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut items: Vec<serde_json::Value> = text
        .split('\0')
        .filter(|r| !r.is_empty())
        .filter_map(|record| {
            let f: Vec<&str> = record.splitn(5, '\x1f').collect();
            let [id, author, time, title, message] = f.as_slice() else {
                return None;
            };
            Some(serde_json::json!({
                "id": id.trim(),
                "authors": [{ "user": author }],
                "date": git_xet_io::time::rfc3339(time.parse().unwrap_or(0)),
                "title": title,
                "message": message.trim_end(),
            }))
        })
        .collect();
    let more = items.len() > PAGE;
    items.truncate(PAGE);
    let mut response = axum::Json(items).into_response();
    if more {
        let next = format!(
            "<{}/commits/{commit}?p={}>; rel=\"next\"",
            crate::hub::api_url(&state.base_url(headers), &repo.name),
            page + 1
        );
        if let Ok(v) = HeaderValue::from_str(&next) {
            response.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(response)
}

#[derive(Deserialize)]
struct DeleteRequest {
    name: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// `DELETE /api/repos/delete`: with an `admin` token of the repository, its git repository
/// and LFS object records go (as `git xet server repo delete`; `gc` frees the storage).
pub async fn delete_repo(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    delete(&state, &headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn delete(state: &SharedState, headers: &HeaderMap, body: Body) -> HubResult<Response> {
    let bytes = read_limited(body, headers, 64 * 1024, "delete request").await?;
    let request: DeleteRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed delete request: {e}")))?;
    let repo = crate::hub::upload::requested_repo(
        request.kind.as_deref(),
        request.organization.as_deref().unwrap_or_default(),
        &request.name,
    )
    .map_err(|_| HubError::RepoNotFound(request.name.clone()))?;
    authorize(state, headers, &repo, Scope::Admin)?;
    let dir = repo.bare_dir(&state.config.repos_dir());
    if !dir.join("HEAD").is_file() {
        return Err(HubError::RepoNotFound(repo.to_string()));
    }
    // Renamed away first, so that no request finds half a repository.
    let gone = dir.with_file_name(format!(".deleted-{:016x}", rand::random::<u64>()));
    tokio::fs::rename(&dir, &gone)
        .await
        .map_err(ServerError::from)?;
    tokio::fs::remove_dir_all(&gone)
        .await
        .map_err(ServerError::from)?;
    let (index, owned) = (state.index.clone(), repo.clone());
    let objects = blocking(move || Ok(index.delete_repo_files(&owned)?)).await?;
    tracing::info!(%repo, objects, "deleted repository through the Hub API");
    Ok(axum::Json(serde_json::json!({})).into_response())
}

#[derive(Deserialize)]
struct SettingsRequest {
    #[serde(default)]
    private: Option<bool>,
    #[serde(default)]
    visibility: Option<String>,
    #[serde(default)]
    gated: Option<serde_json::Value>,
}

/// `PUT /api/models/{repo}/settings` (`update_repo_settings`): with an `admin` token of the
/// repository, its visibility (`private`, or `visibility` public/private), which
/// `--anonymous-read` honours. Gating is not served: `gated` other than `false` is refused.
pub async fn update_settings(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    body: Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Admin).await?;
    let bytes = read_limited(body, headers, 64 * 1024, "settings request").await?;
    let request: SettingsRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed settings request: {e}")))?;
    match request.gated {
        None | Some(serde_json::Value::Bool(false)) => {}
        Some(other) => {
            return Err(ServerError::bad_request(format!(
                "gated repositories are not served by this server (gated={other}): \
                 readers are whoever its tokens name"
            ))
            .into())
        }
    }
    if let Some(private) = visibility(request.visibility.as_deref(), request.private)? {
        let (index, name) = (state.index.clone(), repo.name.clone());
        blocking(move || Ok(index.set_repo_private(&name, private)?)).await?;
        tracing::info!(repo = %repo.name, private, "repository settings changed through the Hub API");
    }
    Ok(axum::Json(serde_json::json!({})).into_response())
}
