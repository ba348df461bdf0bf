//! `POST <repo>/info/xet/missing-objects`: which LFS objects the repository lacks.
//!
//! The body is one `<oid> <size>` per line; the answer lists, in the same form, those not
//! stored for the repository (or stored with another size). Plain text, so that a hook
//! of any kind (even curl in a shell script) can use it; `git xet pre-receive` does.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::server::auth::Scope;
use crate::server::body::{read_limited, ANONYMOUS_BODY_MAX};
use crate::server::error::{ServerError, ServerResult};
use crate::server::lfs::parse_oid;
use crate::server::repo_name::RepoName;
use crate::server::state::{blocking, SharedState};

const MAX_BODY: usize = 16 * 1024 * 1024;

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
        for (oid, sha256, size) in wanted {
            let stored = index.repo_file_by_sha256(&repo, &sha256)?;
            let held = stored.is_some_and(|f| size.is_none_or(|s| s == f.size));
            if !held {
                out.push_str(&oid);
                if let Some(s) = size {
                    out.push_str(&format!(" {s}"));
                }
                out.push('\n');
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
