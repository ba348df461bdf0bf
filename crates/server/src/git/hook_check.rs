//! What a pre-receive hook asks the server about a push.
//!
//! `POST <repo>/info/xet/missing-objects`: which LFS objects the repository lacks. The body
//! is one `<oid> <size>` per line; the answer lists, in the same form, those not stored for
//! the repository (or stored with another size). Plain text, so that a hook of any kind
//! (even curl in a shell script) can use it; `git xet pre-receive` does.
//!
//! `POST <repo>/info/xet/locked-paths`: which of the paths a push changes are locked. The
//! body is the paths, each ended by a NUL; the answer `{"locks":[{"path","owner"}]}`. The
//! hook asks about what the push changes, so its work follows the push, never the number of
//! locks a writer may have taken.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::body::{read_limited, ANONYMOUS_BODY_MAX};
use crate::error::{ServerError, ServerResult};
use crate::lfs::parse_oid;
use crate::state::{blocking, SharedState};
use git_xet_core::api::locks::{LockedPath, LockedPaths};
use git_xet_identity::auth::Scope;
use git_xet_index::LockQuery;
use git_xet_index::RepoName;

const MAX_BODY: usize = 16 * 1024 * 1024;
/// Paths asked about in one `locked-paths` request (the hook sends batches of this many).
pub const MAX_LOCK_PATHS: usize = 4096;
/// Objects looked up in one index query by `missing-objects`.
const LOOKUPS_PER_QUERY: usize = 1000;

pub async fn missing_objects(
    state: SharedState,
    repo: &str,
    headers: &HeaderMap,
    body: Body,
) -> ServerResult<Response> {
    let repo = RepoName::parse(repo.strip_prefix('/').unwrap_or(repo))?;
    let access = state.authorize_repo(headers, &repo, Scope::Read)?;
    let max = match access.anonymous {
        true => ANONYMOUS_BODY_MAX,
        false => MAX_BODY,
    };
    let bytes = read_limited(body, headers, max, "object list").await?;
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ServerError::bad_request("object list is not UTF-8"))?;
    let mut wanted = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let Some(oid) = fields.next() else { continue };
        let sha256 =
            parse_oid(oid).map_err(|e| ServerError::bad_request(format!("line {}: {e}", n + 1)))?;
        let size = match fields.next() {
            Some(s) => Some(s.parse::<u64>().map_err(|_| {
                ServerError::bad_request(format!("line {}: invalid size {s:?}", n + 1))
            })?),
            None => None,
        };
        wanted.push((oid.to_string(), sha256, size));
    }
    let index = state.index.clone();
    let missing = blocking(move || {
        let mut out = String::new();
        // A push's objects are asked about together, a bounded number per index query.
        for part in wanted.chunks(LOOKUPS_PER_QUERY) {
            let sha256s: Vec<[u8; 32]> = part.iter().map(|w| w.1).collect();
            let stored = index.repo_files_by_sha256(&repo, &sha256s)?;
            for ((oid, _, size), stored) in part.iter().zip(stored) {
                let held = stored.is_some_and(|f| size.is_none_or(|s| s == f.size));
                if !held {
                    out.push_str(oid);
                    if let Some(s) = size {
                        out.push_str(&format!(" {s}"));
                    }
                    out.push('\n');
                }
            }
        }
        Ok(out)
    })
    .await?;
    let mut response = missing.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(response)
}

/// `POST <repo>/info/xet/locked-paths` (see the module comment).
pub async fn locked_paths(
    state: SharedState,
    repo: &str,
    headers: &HeaderMap,
    body: Body,
) -> ServerResult<Response> {
    let repo = RepoName::parse(repo.strip_prefix('/').unwrap_or(repo))?;
    state.authorize_repo(headers, &repo, Scope::Read)?;
    let bytes = read_limited(body, headers, MAX_BODY, "path list").await?;
    let paths: Vec<String> = bytes
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::str::from_utf8(p).ok().map(str::to_string))
        .collect();
    if paths.len() > MAX_LOCK_PATHS {
        return Err(ServerError::PayloadTooLarge(format!(
            "{} paths in one request; ask about at most {MAX_LOCK_PATHS} at a time",
            paths.len()
        )));
    }
    let index = state.index.clone();
    let locks = blocking(move || {
        let mut out = Vec::new();
        for path in paths {
            let query = LockQuery {
                path: Some(path),
                limit: 1,
                ..LockQuery::default()
            };
            for lock in index.locks(&repo, &query)?.locks {
                out.push(LockedPath {
                    owner: lock.owner,
                    path: lock.path,
                });
            }
        }
        Ok(out)
    })
    .await?;
    Ok(axum::Json(LockedPaths { locks }).into_response())
}
