//! Git over smart HTTP for repositories hosted under the data directory (`git upload-pack`
//! and `git receive-pack` in stateless-RPC mode), and the object check the pre-receive hook
//! calls.

pub(crate) mod cat_file;
mod hook_check;
pub(crate) mod ls_tree;
mod service;

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Response};

use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_core::api::routes;
use git_xet_deployment::{repos, writers};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;
pub use hook_check::{locked_paths, missing_objects};
use service::Service;

/// Lifetime of the read token a push hands its pre-receive hook.
const HOOK_TOKEN_TTL: u64 = 15 * 60;

/// The smart HTTP routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitRoute {
    InfoRefs,
    UploadPack,
    ReceivePack,
}

impl GitRoute {
    /// Recognises a route from the end of a path; returns it and the repository part.
    pub fn split(path: &str) -> Option<(&str, GitRoute)> {
        [
            (routes::GIT_INFO_REFS, GitRoute::InfoRefs),
            (routes::GIT_UPLOAD_PACK, GitRoute::UploadPack),
            (routes::GIT_RECEIVE_PACK, GitRoute::ReceivePack),
        ]
        .into_iter()
        .find_map(|(suffix, route)| path.strip_suffix(suffix).map(|repo| (repo, route)))
    }
}

pub async fn handle(state: SharedState, repo: &str, route: GitRoute, request: Request) -> Response {
    serve(state, repo, route, request)
        .await
        .unwrap_or_else(refusal)
}

/// An error as git shows it: git prints a smart-HTTP error's body (as `remote: ...` lines)
/// only when it is `text/plain`, so a JSON body left the user with the bare status code.
/// Status and challenge headers stay as every other route sends them.
fn refusal(error: ServerError) -> Response {
    let message = match crate::request_id::current() {
        Some(id) => format!("{error}\n(request id {id})\n"),
        None => format!("{error}\n"),
    };
    let mut response = error.into_response();
    *response.body_mut() = axum::body::Body::from(message);
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn serve(
    state: SharedState,
    repo: &str,
    route: GitRoute,
    request: Request,
) -> ServerResult<Response> {
    let repo = RepoName::parse(repo.strip_prefix('/').unwrap_or(repo))?;
    let query = request.uri().query().unwrap_or("");
    let method = request.method().clone();
    let (service, advertisement) = match (route, &method) {
        (GitRoute::InfoRefs, &Method::GET) => {
            match service_param(query).and_then(Service::from_name) {
                Some(service) => (service, true),
                None => {
                    return Err(ServerError::Forbidden(
                        "only git's smart HTTP protocol is served".into(),
                    ))
                }
            }
        }
        (GitRoute::UploadPack, &Method::POST) => (Service::UploadPack, false),
        (GitRoute::ReceivePack, &Method::POST) => (Service::ReceivePack, false),
        _ => {
            return Err(ServerError::MethodNotAllowed(format!(
                "{method} is not allowed here"
            )))
        }
    };
    let push = service == Service::ReceivePack;
    let access = state.authorize_repo(
        request.headers(),
        &repo,
        if push { Scope::Write } else { Scope::Read },
    )?;
    let root = state.config.repos_dir();
    let dir = repo.bare_dir(&root);
    let mut serve_dir = dir.clone();
    if push && advertisement && !dir.exists() {
        // Discovery creates nothing (a write token's `info/refs` used to leave an empty
        // repository behind): an empty repository's advertisement, until the push itself.
        serve_dir = repos::empty_repo(&state.config.tmp_dir()).await?;
    } else if push {
        let hook = repos::hook_script(state.config.hook_program.as_deref());
        repos::ensure_repo(&root, &repo, &hook, false).await?;
        repos::install_hook(&dir, &hook).await?;
    } else if !dir.exists() {
        return Err(ServerError::not_found(format!(
            "repository {repo} does not exist"
        )));
    }
    // Only receive-pack runs hooks: only it gets the pre-receive hook's settings.
    let hook_env = match (&access.holder, push && !advertisement) {
        (Some(holder), true) => {
            // The hook acts as the pusher (same id, so revoking the pusher's token revokes
            // it too), which is how it tells the pusher's locks from other users'.
            let (token, _) = git_xet_identity::auth::issue_for(
                &state.keys,
                &repo,
                Scope::Read,
                HOOK_TOKEN_TTL,
                holder,
            );
            vec![
                ("GIT_XET_SERVER_URL".into(), state.internal_url.clone()),
                ("GIT_XET_REPO".into(), repo.to_string()),
                ("GIT_XET_TOKEN".into(), token),
                ("GIT_XET_USER".into(), holder.user.clone()),
                ("GIT_XET_CHECK_LOCKS".into(), "1".into()),
            ]
        }
        (None, true) => {
            return Err(ServerError::Unauthorized(
                "pushing needs an access token that names its user".into(),
            ))
        }
        _ => Vec::new(),
    };
    // A push writes: it holds the repository's writer lock, recovering what a crashed
    // writer left (git_xet_deployment::writers).
    let writer = if push && !advertisement {
        let dir = dir.clone();
        Some(
            tokio::task::spawn_blocking(move || writers::WriterLock::acquire(&dir))
                .await
                .map_err(ServerError::from)??,
        )
    } else {
        None
    };
    let (parts, body) = request.into_parts();
    let run = service::ServiceRequest {
        repo_dir: &serve_dir,
        service,
        advertisement,
        headers: parts.headers,
        body,
        max_body: state.config.max_push_size,
        // The reflog's committer, which the status page's "Recent pushes" shows.
        user: access.user().map(reflog_name),
        env: hook_env,
        home: &state.config.data_dir,
        writer,
    };
    let fix_head_of = (push && !advertisement).then(|| dir.clone());
    let started = std::time::SystemTime::now();
    let after = async move {
        if let Some(dir) = fix_head_of {
            repos::fix_head(&dir).await;
            let synced = dir.clone();
            match tokio::task::spawn_blocking(move || repos::sync_names(&synced, started)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!("fsyncing the directories of {}: {e}", dir.display()),
                Err(e) => tracing::warn!("fsyncing the directories of {}: {e}", dir.display()),
            }
        }
    };
    service::run(run, after).await
}

/// A holder's name as a reflog identity: git drops `<`, `>` and newlines from names, and a
/// name of such characters only would leave git without one.
fn reflog_name(user: &str) -> String {
    let name: String = user
        .chars()
        .map(|c| match c {
            '<' | '>' | '\n' => '_',
            c => c,
        })
        .collect();
    match name.trim().is_empty() {
        true => "git-xet".into(),
        false => name,
    }
}

fn service_param(query: &str) -> Option<&str> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("service="))
}
