//! Routes under a repository path (`/{repo}.git/...` or `/{repo}/...`): the git-lfs Batch
//! API and its object routes, git smart HTTP, the hook's object check, and the web pages
//! (web/: a browser's GET of the repository path, its files and history). Repository names
//! contain a `/`, so these are matched here rather than by the router.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};

use crate::error::ServerError;
use crate::git::{self, GitRoute};
use crate::lfs;
use crate::state::SharedState;

use git_xet_core::api::routes::{
    HOOK_LOCKED_PATHS as LOCK_CHECK, HOOK_MISSING_OBJECTS as HOOK_CHECK, LFS_MARKER,
};

pub async fn dispatch(State(state): State<SharedState>, request: Request) -> Response {
    // The web pages first: their paths (`/{repo}/tree/...`) end in no git or LFS route,
    // while a file path shown there may (`.../tree/main/info/refs`).
    let request = match crate::web::dispatch(&state, request).await {
        Ok(page) => return page,
        Err(request) => request,
    };
    let path = request.uri().path().to_string();
    // The last marker: what follows it never contains another one.
    if let Some(i) = path.rfind(LFS_MARKER) {
        let repo = &path[1.min(i)..i];
        let rest = &path[i + LFS_MARKER.len()..];
        return lfs::handle(state, repo, rest, request).await;
    }
    if let Some((repo, route)) = GitRoute::split(&path) {
        if state.config.no_git {
            return ServerError::not_found(
                "this server hosts no git repositories (--no-git): it serves git-lfs and XET \
                 only; keep the repository on your git host and point lfs.url here",
            )
            .into_response();
        }
        return git::handle(state, repo, route, request).await;
    }
    if let (Some(repo), &axum::http::Method::POST) =
        (path.strip_suffix(HOOK_CHECK), request.method())
    {
        let (parts, body) = request.into_parts();
        return git::missing_objects(state, repo, &parts.headers, body)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    if let (Some(repo), &axum::http::Method::POST) =
        (path.strip_suffix(LOCK_CHECK), request.method())
    {
        let (parts, body) = request.into_parts();
        return git::locked_paths(state, repo, &parts.headers, body)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    ServerError::not_found(format!("no route for {} {}", request.method(), path)).into_response()
}
