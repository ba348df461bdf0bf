//! The git-lfs server side: the Batch API (offering `xet`, else `basic`), `basic` object
//! upload and download, `verify`, the file locking API, and the token
//! refresh route of the `xet` handshake. Mounted at `<repo>/info/lfs/`, git-lfs's default
//! endpoint for a remote, so no client configuration is needed.

mod batch;
mod locks;
mod misc;
pub(crate) mod objects;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Response};

use crate::error::ServerError;
use crate::state::SharedState;
use git_xet_core::api::routes;
use git_xet_index::RepoName;

pub use batch::parse_request as parse_batch_request;

pub const LFS_MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// An error answered the way git-lfs expects (its media type, a `message` field).
pub struct LfsError(pub ServerError);

impl From<ServerError> for LfsError {
    fn from(e: ServerError) -> Self {
        LfsError(e)
    }
}

impl From<git_xet_index::IndexError> for LfsError {
    fn from(e: git_xet_index::IndexError) -> Self {
        LfsError(e.into())
    }
}

impl From<git_xet_identity::AuthError> for LfsError {
    fn from(e: git_xet_identity::AuthError) -> Self {
        LfsError(e.into())
    }
}

impl IntoResponse for LfsError {
    fn into_response(self) -> Response {
        self.0.into_response_as(LFS_MEDIA_TYPE)
    }
}

pub type LfsResult<T> = Result<T, LfsError>;

/// A JSON answer with git-lfs's media type.
pub fn lfs_json(value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).expect("serializable");
    let mut response = Body::from(body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(LFS_MEDIA_TYPE),
    );
    response
}

/// Routes `rest` (the path after `/info/lfs/`) for repository `repo`.
pub async fn handle(state: SharedState, repo: &str, rest: &str, request: Request) -> Response {
    let result = route(state, repo, rest, request).await;
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn route(
    state: SharedState,
    repo: &str,
    rest: &str,
    request: Request,
) -> LfsResult<Response> {
    let repo = RepoName::parse(repo).map_err(ServerError::from)?;
    let method = request.method().clone();
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    if rest == routes::LFS_LOCKS || rest.starts_with(&format!("{}/", routes::LFS_LOCKS)) {
        return locks_route(&state, &repo, method, rest, &parts.uri, &headers, body).await;
    }
    match (method, rest) {
        (Method::POST, routes::LFS_BATCH) => batch::batch(&state, &repo, &headers, body).await,
        (Method::POST, routes::LFS_VERIFY) => misc::verify(&state, &repo, &headers, body).await,
        (Method::GET, routes::LFS_XET_READ_TOKEN) => {
            misc::xet_token(&state, &repo, &headers, false)
        }
        (Method::GET, routes::LFS_XET_WRITE_TOKEN) => {
            misc::xet_token(&state, &repo, &headers, true)
        }
        (Method::PUT, r) if r.starts_with(routes::LFS_OBJECTS) => {
            let oid = &r[routes::LFS_OBJECTS.len()..];
            objects::upload(&state, &repo, oid, parts.uri.query(), &headers, body).await
        }
        (Method::GET, r) if r.starts_with(routes::LFS_OBJECTS) => {
            let oid = &r[routes::LFS_OBJECTS.len()..];
            objects::download(&state, &repo, oid, &headers).await
        }
        (method, rest) => {
            Err(ServerError::not_found(format!("no git-lfs route for {method} {rest}")).into())
        }
    }
}

/// The file locking routes: `locks`, `locks/verify`, `locks/<id>/unlock`.
async fn locks_route(
    state: &SharedState,
    repo: &RepoName,
    method: Method,
    rest: &str,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    match (method, rest) {
        (Method::GET, routes::LFS_LOCKS) => locks::list(state, repo, headers, uri).await,
        (Method::POST, routes::LFS_LOCKS) => locks::create(state, repo, headers, body).await,
        (Method::POST, routes::LFS_LOCKS_VERIFY) => locks::verify(state, repo, headers, body).await,
        (Method::POST, r) => match routes::unlock_id(r) {
            Some(id) => locks::unlock(state, repo, id, headers, body).await,
            None => Err(ServerError::not_found(format!("no git-lfs route for POST {r}")).into()),
        },
        (method, r) => {
            Err(ServerError::MethodNotAllowed(format!("{method} is not allowed on {r}")).into())
        }
    }
}

/// Parses an LFS object id: a sha256 as 64 lowercase hex digits.
pub fn parse_oid(oid: &str) -> Result<[u8; 32], ServerError> {
    git_xet_core::lfs::parse_oid(oid).map_err(|_| {
        ServerError::bad_request(format!(
            "invalid object id {:?}: expected a sha256 of 64 lowercase hex digits",
            oid.chars().take(80).collect::<String>()
        ))
    })
}

/// `{base}/{repo}.git/info/lfs`.
pub fn lfs_base(base: &str, repo: &RepoName) -> String {
    format!("{base}/{repo}.git{}", routes::LFS_ENDPOINT)
}
