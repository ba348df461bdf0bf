//! Routes under a repository path (`/{repo}.git/...` or `/{repo}/...`): the git-lfs Batch
//! API and its object routes, git smart HTTP, and the hook's object check. Repository names
//! contain a `/`, so these are matched here rather than by the router.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};

use crate::server::error::ServerError;
use crate::server::state::SharedState;

pub async fn dispatch(State(_state): State<SharedState>, request: Request) -> Response {
    ServerError::not_found(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
    .into_response()
}
