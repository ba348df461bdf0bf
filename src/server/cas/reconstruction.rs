//! `GET /v1/reconstructions/{file_hash}` with optional `Range`: the terms overlapping the
//! range and signed, expiring fetch URLs for their xorb bytes. `GET /v2/reconstructions/...`
//! (what hf-xet 1.8 asks first) answers the same plan in the v2 shape.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;

use crate::server::auth::{now_secs, Scope};
use crate::server::body::parse_range;
use crate::server::cas::parse_hash;
use crate::server::error::{ServerError, ServerResult};
use std::collections::HashMap;

use crate::server::reconstruct::{load_metas, plan, to_reconstruction, Plan};
use crate::server::signing::fetch_url;
use crate::server::state::{blocking, SharedState};
use crate::server::storage::ObjectKey;
use crate::xet::reconstruction::{Reconstruction, ReconstructionV2};
use crate::xet::MerkleHash;

pub async fn get(
    State(state): State<SharedState>,
    Path(file_hash): Path<String>,
    headers: HeaderMap,
) -> ServerResult<Json<Reconstruction>> {
    Ok(Json(answer(&state, &file_hash, &headers).await?))
}

pub async fn get_v2(
    State(state): State<SharedState>,
    Path(file_hash): Path<String>,
    headers: HeaderMap,
) -> ServerResult<Json<ReconstructionV2>> {
    Ok(Json(answer(&state, &file_hash, &headers).await?.into()))
}

async fn answer(
    state: &SharedState,
    file_hash: &str,
    headers: &HeaderMap,
) -> ServerResult<Reconstruction> {
    let access = state.authorize_cas(headers, Scope::Read)?;
    let file_hash = parse_hash(file_hash, "file hash")?;
    let index = state.index.clone();
    let repo = access.repo.clone();
    let found = blocking(move || {
        // Files are visible per repository; elsewhere they do not exist.
        if !index.repo_has_file(&repo, &file_hash)? {
            return Ok(None);
        }
        let Some(file) = index.file(&file_hash)? else {
            return Ok(None);
        };
        let metas = load_metas(&*index, &file)?;
        Ok(Some((file, metas)))
    })
    .await?;
    let Some((file, metas)) = found else {
        return Err(ServerError::not_found(format!(
            "file {file_hash} is not in repository {}",
            access.repo
        )));
    };
    let range = match parse_range(headers, file.size)? {
        Some(r) => r,
        None => 0..file.size,
    };
    let plan = if range.is_empty() {
        Default::default()
    } else {
        plan(&file, &metas, range)?
    };
    let presigned = presign(state, &plan).await?;
    let base = state.base_url(headers);
    let expires = now_secs() + state.config.fetch_url_ttl.as_secs();
    Ok(to_reconstruction(&plan, |xorb| match presigned.get(xorb) {
        Some(url) => url.clone(),
        None => fetch_url(&state.keys, &base, xorb, expires),
    }))
}

/// With `--presign`, URLs that fetch the plan's xorbs straight from the object store; empty
/// otherwise (and for a store without such URLs), so fetches come back to this server.
async fn presign(state: &SharedState, plan: &Plan) -> ServerResult<HashMap<MerkleHash, String>> {
    let mut urls = HashMap::new();
    if !state.config.presign {
        return Ok(urls);
    }
    for term in &plan.terms {
        let hash = term.xorb.hash();
        if urls.contains_key(&hash) {
            continue;
        }
        let url = state
            .store
            .presign_get(ObjectKey::xorb(hash), state.config.fetch_url_ttl)
            .await?;
        match url {
            Some(url) => urls.insert(hash, url),
            None => break,
        };
    }
    Ok(urls)
}
