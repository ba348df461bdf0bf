//! The Hugging Face Hub HTTP API over the hosted git repositories, so that
//! `huggingface_hub` (`HF_ENDPOINT` = this server, `HF_TOKEN` = a git-xet token) downloads
//! and uploads them: repository info and listings, `resolve` downloads (LFS files through
//! XET), xet tokens, and commits. The model `ns/name` is the hosted repository `ns/name`,
//! the dataset `ns/name` the hosted repository `datasets/ns/name` (repo_name.rs): the Hub's
//! own URLs, `/api/datasets/ns/name/...` and `/datasets/ns/name/resolve/...`.
//!
//! Access is the git side's: a token names one repository. A repository the caller may not
//! read is answered exactly as a missing one, so that no caller learns which private
//! repositories exist: `RepoNotFound` in `X-Error-Code`, 401 without a credential (as the
//! Hub answers; the client then offers to log in) and 404 with a token that does not reach
//! it.

mod access;
mod blob_lookup;
mod blobs;
mod commit;
mod commit_body;
mod error;
pub(crate) mod gitread;
mod gitwrite;
mod info;
mod locks;
mod manage;
mod ndjson;
mod pointers;
mod push_check;
mod quarantine;
mod ref_update;
mod refs;
mod resolve;
mod tree_page;
mod upload;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::Router;

use crate::state::SharedState;
pub use error::{HubError, HubResult};
use git_xet_index::RepoName;

/// The Hub's routes; merged into the server's router (http.rs).
pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/api/whoami-v2", get(access::whoami))
        .route("/api/validate-yaml", post(validate_yaml))
        .route("/api/repos/create", post(upload::create_repo))
        .route("/api/repos/delete", delete(manage::delete_repo))
        .route("/api/models/{*rest}", any(api_models))
        .route("/api/datasets/{*rest}", any(api_datasets))
        .route("/{ns}/{name}/resolve/{*rest}", any(resolve::resolve_model))
        .route(
            "/datasets/{ns}/{name}/resolve/{*rest}",
            any(resolve::resolve_dataset),
        )
}

/// What the dataset routes put before the namespace segment they hand on (see
/// [`access::open`]): `datasets/`.
pub const DATASET_PREFIX: &str = "datasets/";

/// The repository's id as the Hub names it: `ns/name` (without `datasets/`).
pub fn hub_id(repo: &RepoName) -> &str {
    repo.dataset_id().unwrap_or(repo.as_str())
}

/// The repository's API URL: `{base}/api/models/ns/name` or `{base}/api/datasets/ns/name`.
pub fn api_url(base: &str, repo: &RepoName) -> String {
    match repo.dataset_id() {
        Some(id) => format!("{base}/api/datasets/{id}"),
        None => format!("{base}/api/models/{repo}"),
    }
}

/// `POST /api/validate-yaml`: the client checks a README's metadata before committing it;
/// any JSON answer without errors lets it go on (the metadata is not checked here).
async fn validate_yaml() -> Response {
    axum::Json(serde_json::json!({ "errors": [], "warnings": [] })).into_response()
}

/// `/api/models/{ns}/{name}[/{operation}/...]`.
async fn api_models(State(state): State<SharedState>, request: Request) -> Response {
    api(state, request, "/api/models/", "").await
}

/// `/api/datasets/{ns}/{name}[/{operation}/...]`.
async fn api_datasets(State(state): State<SharedState>, request: Request) -> Response {
    api(state, request, "/api/datasets/", DATASET_PREFIX).await
}

async fn api(state: SharedState, request: Request, route_prefix: &str, kind: &str) -> Response {
    let path = request.uri().path().to_string();
    let rest = path.strip_prefix(route_prefix).unwrap_or("");
    let segments: Vec<&str> = rest.split('/').collect();
    let result = match segments.as_slice() {
        [ns, name, op @ ..] => {
            let ns = format!("{kind}{ns}");
            route(&state, &ns, name, op, request).await
        }
        _ => Err(HubError::RepoNotFound(rest.to_string())),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn route(
    state: &SharedState,
    ns: &str,
    name: &str,
    op: &[&str],
    request: Request,
) -> HubResult<Response> {
    let method = request.method().clone();
    let query = request.uri().query().unwrap_or("").to_string();
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    match (&method, op) {
        (&Method::GET, []) => {
            let blobs = query_flag(&query, "blobs");
            info::repo_info(state, headers, (ns, name), None, blobs).await
        }
        (&Method::GET, ["revision", rev]) => {
            let blobs = query_flag(&query, "blobs");
            info::repo_info(state, headers, (ns, name), Some(&decode(rev)?), blobs).await
        }
        (&Method::GET, ["tree", rev, path @ ..]) => {
            let path = path
                .iter()
                .map(|s| decode(s))
                .collect::<HubResult<Vec<_>>>()?;
            let recursive = query_flag(&query, "recursive");
            let tree = info::TreeQuery {
                rev: decode(rev)?,
                path: path.join("/"),
                recursive,
                cursor: query_value(&query, "cursor").map(str::to_string),
            };
            info::tree(state, headers, ns, name, tree).await
        }
        (&Method::GET, ["commits", rev]) => {
            manage::commits(state, headers, ns, name, &decode(rev)?, &query).await
        }
        (&Method::GET, ["refs"]) => info::refs(state, headers, ns, name).await,
        (&Method::GET, ["xet-read-token", rev]) => {
            resolve::xet_read_token(state, headers, ns, name, &decode(rev)?).await
        }
        (&Method::GET, ["xet-write-token", _rev]) => {
            upload::xet_write_token(state, headers, ns, name).await
        }
        (&Method::POST, ["preupload", rev]) => {
            upload::preupload(state, headers, ns, name, &decode(rev)?, body).await
        }
        (&Method::POST, ["commit", rev]) => {
            commit::commit(state, headers, ns, name, &decode(rev)?, &query, body).await
        }
        (&Method::POST, ["paths-info", rev]) => {
            info::paths_info(state, headers, ns, name, &decode(rev)?, body).await
        }
        (&Method::POST, ["branch", branch]) => {
            refs::create_branch(state, headers, (ns, name), &decode(branch)?, body).await
        }
        (&Method::DELETE, ["branch", branch]) => {
            refs::delete_branch(state, headers, (ns, name), &decode(branch)?).await
        }
        (&Method::POST, ["tag", rev]) => {
            refs::create_tag(state, headers, (ns, name), &decode(rev)?, body).await
        }
        (&Method::PUT, ["settings"]) => {
            manage::update_settings(state, headers, ns, name, body).await
        }
        (&Method::DELETE, ["tag", tag]) => {
            refs::delete_tag(state, headers, (ns, name), &decode(tag)?).await
        }
        _ => Err(crate::error::ServerError::not_found(format!(
            "the Hub API of this server has no route for {method} {}",
            op.join("/")
        ))
        .into()),
    }
}

/// Whether `key=true` (or `1`) is in the query string.
fn query_flag(query: &str, key: &str) -> bool {
    query.split('&').any(|pair| match pair.split_once('=') {
        Some((k, v)) => k == key && matches!(v, "true" | "True" | "1"),
        None => false,
    })
}

/// The value of `key` in the query string, as it is there (not decoded).
fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|pair| pair.split_once('=').filter(|(k, _)| *k == key))
        .map(|(_, v)| v)
}

/// Percent-decodes one URL segment (`%2F` included: the client escapes the slashes of
/// revisions). Invalid escapes or UTF-8 are a 400.
pub fn decode(segment: &str) -> HubResult<String> {
    // The decoder leaves a stray `%` as it is; a Hub path with one is refused instead.
    let bytes = segment.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err(bad_escape(segment));
    }
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| bad_escape(segment))
}

fn bad_escape(segment: &str) -> HubError {
    crate::error::ServerError::bad_request(format!(
        "invalid percent-encoding in URL segment {:?}",
        segment.chars().take(100).collect::<String>()
    ))
    .into()
}

/// Checks a path in a repository: `/`-separated, no empty, `.` or `..` segment, no `.git`
/// directory, no control characters.
pub fn valid_repo_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 4096
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && s != ".git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_and_bad_escapes_are_refused() {
        assert_eq!(decode("feat%2Fx").unwrap(), "feat/x");
        assert_eq!(decode("a%20b%C3%BC").unwrap(), "a bü");
        for bad in ["%", "%2", "%zz", "%ff", "%+a", "a%-1"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
        assert!(query_flag("recursive=true&expand=false", "recursive"));
        assert!(!query_flag("recursive=false", "recursive"));
        assert_eq!(
            query_value("recursive=true&cursor=YQ", "cursor"),
            Some("YQ")
        );
        assert_eq!(query_value("recursive=true", "cursor"), None);
        assert!(valid_repo_path("a/b c.txt"));
        for bad in ["", "/a", "a//b", "../x", "a/./b", ".git/config", "a\nb"] {
            assert!(!valid_repo_path(bad), "{bad:?}");
        }
    }
}
