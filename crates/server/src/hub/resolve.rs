//! `HEAD`/`GET /{ns}/{name}/resolve/{rev}/{path}` and the xet read token.
//!
//! The headers are what `huggingface_hub` keys its cache by: `X-Repo-Commit` names the
//! snapshot, the ETag the blob (the git blob id for a plain file, the sha256 for an LFS
//! file, as the Hub does, so that the tree listing and the HEAD agree). An LFS file the
//! repository holds in XET also gets `X-Xet-Hash` and a `Link` to the read-token route: the
//! client then downloads it with hf_xet from the CAS, not through this route.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::body::parse_range;
use crate::error::ServerError;
use crate::hub::access::open;
use crate::hub::info::{commit_of, xet_hashes};
use crate::hub::{api_url, decode, gitread, valid_repo_path, HubError, HubResult, DATASET_PREFIX};
use crate::state::SharedState;
use git_xet_identity::auth::Scope;

/// `/{ns}/{name}/resolve/...`: a model's file.
pub async fn resolve_model(State(state): State<SharedState>, request: Request) -> Response {
    serve(&state, request, "")
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `/datasets/{ns}/{name}/resolve/...`: a dataset's file.
pub async fn resolve_dataset(State(state): State<SharedState>, request: Request) -> Response {
    serve(&state, request, DATASET_PREFIX)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn serve(state: &SharedState, request: Request, kind: &str) -> HubResult<Response> {
    let method = request.method().clone();
    if method != Method::GET && method != Method::HEAD {
        return Err(ServerError::MethodNotAllowed(format!("{method} is not allowed here")).into());
    }
    let raw = request.uri().path().to_string();
    let raw = raw.trim_start_matches('/');
    let raw = raw.strip_prefix(kind).unwrap_or(raw);
    // `/{ns}/{name}/resolve/{rev}/{path...}`: the revision is one segment (`%2F` escaped).
    let segments: Vec<&str> = raw.splitn(5, '/').collect();
    let [ns, name, _resolve, rev, path] = segments.as_slice() else {
        return Err(ServerError::not_found("expected /{ns}/{name}/resolve/{rev}/{path}").into());
    };
    let headers = request.headers();
    let ns = format!("{kind}{ns}");
    let repo = open(state, headers, &ns, name, Scope::Read).await?;
    let rev = decode(rev)?;
    let path = path
        .split('/')
        .map(decode)
        .collect::<HubResult<Vec<_>>>()?
        .join("/");
    let commit = commit_of(&repo, &rev).await?;
    let missing = || HubError::EntryNotFound {
        message: format!("{path} does not exist at {rev}"),
        commit: Some(commit.clone()),
    };
    if !valid_repo_path(&path) {
        return Err(missing());
    }
    let entry = match gitread::entry(&repo.dir, &commit, &path).await? {
        Some(e) if !e.is_dir => e,
        _ => return Err(missing()),
    };
    let head = method == Method::HEAD;
    let mut response = match &entry.pointer {
        Some(pointer) => {
            let sha256 = pointer.oid.to_hex();
            let xet = xet_hashes(state, &repo, std::slice::from_ref(&entry))
                .await?
                .pop()
                .flatten();
            let mut response = if head {
                sized(pointer.size)
            } else {
                crate::lfs::objects::download(state, &repo.name, &sha256, headers)
                    .await
                    .map_err(|e| HubError::Server(e.0))?
            };
            let h = response.headers_mut();
            let etag = quoted(&sha256);
            h.insert(header::ETAG, etag.clone());
            h.insert("x-linked-etag", etag);
            h.insert("x-linked-size", HeaderValue::from(pointer.size));
            if let Some(xet) = xet {
                let link = format!(
                    "<{}/xet-read-token/{commit}>; rel=\"xet-auth\"",
                    api_url(&state.base_url(headers), &repo.name),
                );
                h.insert("x-xet-hash", header_value(&xet)?);
                h.insert(header::LINK, header_value(&link)?);
            }
            response
        }
        None => {
            let mut response = if head {
                sized(entry.size)
            } else {
                plain(gitread::blob(&repo.dir, &entry.oid).await?, headers)?
            };
            response
                .headers_mut()
                .insert(header::ETAG, quoted(&entry.oid));
            response
        }
    };
    let h = response.headers_mut();
    h.insert("x-repo-commit", header_value(&commit)?);
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    Ok(response)
}

/// A body-less answer announcing `size` bytes (a HEAD's).
fn sized(size: u64) -> Response {
    let mut response = StatusCode::OK.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    response
}

/// A plain file's bytes, or the requested range of them.
fn plain(bytes: Vec<u8>, headers: &HeaderMap) -> HubResult<Response> {
    let size = bytes.len() as u64;
    let range = parse_range(headers, size)?;
    let (status, body) = match &range {
        Some(r) => (
            StatusCode::PARTIAL_CONTENT,
            bytes[r.start as usize..r.end as usize].to_vec(),
        ),
        None => (StatusCode::OK, bytes),
    };
    let mut response = (status, Body::from(body)).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Some(r) = range {
        let value = format!("bytes {}-{}/{size}", r.start, r.end - 1);
        h.insert(header::CONTENT_RANGE, header_value(&value)?);
    }
    Ok(response)
}

fn quoted(hex: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a header value")
}

fn header_value(s: &str) -> HubResult<HeaderValue> {
    HeaderValue::from_str(s)
        .map_err(|_| ServerError::internal(format!("not a header value: {s:?}")).into())
}

/// `GET /api/models/{repo}/xet-read-token/{rev}`: a CAS read token for the repository, in
/// the JSON body (hf_xet refreshes with it) and in `X-Xet-*` headers (what
/// `huggingface_hub` reads).
pub async fn xet_read_token(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    rev: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    commit_of(&repo, rev).await?;
    Ok(xet_token(state, headers, &repo, Scope::Read))
}

/// A CAS token of `scope` for `repo`, both ways (see [`xet_read_token`]).
pub fn xet_token(
    state: &SharedState,
    headers: &HeaderMap,
    repo: &crate::hub::access::Repo,
    scope: Scope,
) -> Response {
    let (token, exp) = state.mint_token(&repo.name, scope, &repo.access);
    let cas_url = state.cas_url(headers, &repo.name);
    let body = serde_json::json!({ "accessToken": token, "exp": exp, "casUrl": cas_url });
    let mut response = axum::Json(body).into_response();
    let h = response.headers_mut();
    for (name, value) in [
        ("x-xet-cas-url", cas_url),
        ("x-xet-access-token", token),
        ("x-xet-token-expiration", exp.to_string()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    response
}
