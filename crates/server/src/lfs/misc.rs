//! The small LFS routes: `verify` and the `xet` token refresh.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;

use crate::body::read_limited;
use crate::error::ServerError;
use crate::lfs::{lfs_json, parse_oid, LfsResult};
use crate::state::{blocking, SharedState};
use git_xet_core::api::cas::XetTokenResponse;
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;

#[derive(serde::Deserialize)]
struct VerifyRequest {
    oid: String,
    size: u64,
}

/// `POST verify`: 200 when the object is stored for this repository with that size.
pub async fn verify(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    state.authorize_transfer(headers, repo, Scope::Read)?;
    let bytes = read_limited(body, headers, 64 * 1024, "verify request").await?;
    let request: VerifyRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed verify request: {e}")))?;
    let sha256 = parse_oid(&request.oid)?;
    let index = state.index.clone();
    let owned = repo.clone();
    let found = blocking(move || Ok(index.repo_file_by_sha256(&owned, &sha256)?)).await?;
    // A claim not yet checked is checked now, by hashing the content once.
    let found = match found {
        Some(file) => {
            let index = state.index.clone();
            let (owned, checked) = (repo.clone(), file.clone());
            let status =
                blocking(move || super::objects::claim_status(&*index, &owned, &checked)).await?;
            let holds = match status {
                super::objects::Claim::Verified => true,
                super::objects::Claim::False => false,
                super::objects::Claim::Unverified => {
                    super::objects::check_claim(state, repo, file.clone()).await?
                }
            };
            holds.then_some(file)
        }
        None => None,
    };
    match found {
        Some(file) if file.size == request.size => Ok(lfs_json(&serde_json::json!({}))),
        Some(file) => Err(ServerError::Conflict(format!(
            "object {} is stored with {} bytes, not {}",
            request.oid, file.size, request.size
        ))
        .into()),
        None => Err(ServerError::not_found(format!(
            "object {} is not stored in {repo}",
            request.oid
        ))
        .into()),
    }
}

/// `GET xet-read-token` / `xet-write-token`: a fresh CAS token for the `xet` transfer,
/// `{"accessToken", "exp", "casUrl"}`, for the same credentials as the batch request.
pub fn xet_token(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    write: bool,
) -> LfsResult<Response> {
    let scope = if write { Scope::Write } else { Scope::Read };
    let access = state.authorize_repo(headers, repo, scope)?;
    let (token, exp) = state.mint_token(repo, scope, &access);
    Ok(lfs_json(&XetTokenResponse {
        access_token: token,
        cas_url: state.cas_url(headers, repo),
        exp,
    }))
}
