//! `POST /v1/shards`: validate an uploaded shard against stored xorbs, then register its
//! files in one transaction, visible in the token's repository.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;

use crate::server::auth::Scope;
use crate::server::body::read_limited;
use crate::server::error::ServerResult;
use crate::server::repo_name::RepoName;
use crate::server::shard_check::{validate_upload, ValidatedShard};
use crate::server::state::{blocking, SharedState};

/// Largest shard accepted (the same bound as a xorb: memory per request stays bounded).
const MAX_SHARD_SIZE: usize = 64 * 1024 * 1024;

pub async fn upload(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> ServerResult<Json<serde_json::Value>> {
    let (changed, _) = receive(&state, &headers, body).await?;
    Ok(Json(serde_json::json!({ "result": u8::from(changed) })))
}

/// The shard upload of both API versions: authorize, read, validate, store and register.
/// Returns whether anything new was registered, and how many files the shard describes.
pub(super) async fn receive(
    state: &SharedState,
    headers: &HeaderMap,
    body: Body,
) -> ServerResult<(bool, usize)> {
    let access = state.authorize_cas(headers, Scope::Write)?;
    let bytes = read_limited(body, headers, MAX_SHARD_SIZE, "shard").await?;
    // Taken once the body is in: a client stalling mid-body holds no slot.
    let _slot = state.upload_slot().await?;
    let index = state.index.clone();
    let repo = access.repo.clone();
    let domain = state.dedup_domain(&repo);
    let validated = blocking(move || validate_upload(&*index, &bytes, &repo, &domain)).await?;
    let files = validated.registration.files.len();
    let changed = register(state, validated, &access.repo).await?;
    Ok((changed, files))
}

/// Stores the shard and registers it. Returns whether anything new was registered.
pub async fn register(
    state: &SharedState,
    validated: ValidatedShard,
    repo: &RepoName,
) -> ServerResult<bool> {
    let ValidatedShard {
        registration,
        stored_bytes,
    } = validated;
    let key = crate::server::storage::ObjectKey::shard(registration.shard_hash);
    state.store.put(key, stored_bytes.into()).await?;
    let index = state.index.clone();
    let files = registration.files.len();
    let outcome = blocking(move || Ok(index.register_shard(&registration)?)).await?;
    if outcome.changed() {
        crate::server::metrics::add(&state.metrics.shards_registered, 1);
        crate::server::metrics::add(&state.metrics.registered_files, outcome.new_files);
    }
    tracing::info!(%repo, files, new_files = outcome.new_files, "registered shard");
    Ok(outcome.changed())
}
