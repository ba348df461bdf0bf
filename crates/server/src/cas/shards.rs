//! `POST /v1/shards`: validate an uploaded shard against stored xorbs, then register its
//! files in one transaction, visible in the token's repository.

use std::io::{Seek, Write};

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{AppendHeaders, IntoResponse};
use axum::Json;
use git_xet_core::api::cas::{ShardResult, UploadShardResponse};

use crate::body::read_blocking;
use crate::error::ServerResult;
use crate::shard_check::{validate_read, ValidatedShard};
use crate::state::{blocking, SharedState};
use git_xet_core::constants::MAX_SHARD_BODY;
use git_xet_core::MerkleHash;
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;

pub async fn upload(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> ServerResult<impl IntoResponse> {
    let (changed, _) = receive(&state, &headers, body).await?;
    Ok((
        AppendHeaders(super::xorb_waits::advertised(&state)),
        Json(UploadShardResponse {
            result: ShardResult::from_changed(changed),
        }),
    ))
}

/// The shard upload of both API versions: authorize, read, validate, store and register.
/// Returns whether anything new was registered, and how many files the shard describes.
pub(super) async fn receive(
    state: &SharedState,
    headers: &HeaderMap,
    body: Body,
) -> ServerResult<(bool, usize)> {
    let access = state.authorize_cas(headers, Scope::Write)?;
    let (store, index, repo) = (
        state.store.clone(),
        state.index.clone(),
        access.repo.clone(),
    );
    let domain = state.dedup_domain(&repo);
    let awaited = super::xorb_waits::requested(state, headers)?;
    // The body goes to a staging file as it arrives, not to memory: shards being received
    // cost disk, not memory, however many clients send them at once. Receiving takes no
    // upload slot (a client stalling mid-body holds none), nor does waiting for the xorbs
    // the client is still sending (their uploads need the slots); parsing the staged file
    // (only the records are held), storing and registering do.
    let staged = read_blocking(body, headers, MAX_SHARD_BODY as u64, "shard", move |body| {
        let staged = store.stage()?;
        let mut file = staged.file();
        let mut hasher = blake3::Hasher::new();
        let mut len = 0u64;
        while let Some(data) = body.next_bytes()? {
            file.write_all(&data)?;
            hasher.update(&data);
            len += data.len() as u64;
        }
        let hash = MerkleHash::from_bytes(*hasher.finalize().as_bytes());
        Ok((staged, hash, len))
    })
    .await?;
    super::xorb_waits::wait(state, awaited, &access.repo, &domain).await;
    let _slot = state.upload_slot().await?;
    let validated = blocking(move || {
        let (staged, hash, len) = staged;
        let mut file = staged.file();
        file.seek(std::io::SeekFrom::Start(0))?;
        let mut reader = std::io::BufReader::new(file);
        validate_read(&*index, &mut reader, hash, len, &repo, &domain)
    })
    .await?;
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
    let key = git_xet_storage::ObjectKey::shard(registration.shard_hash);
    state.store.put(key, stored_bytes.into()).await?;
    let index = state.index.clone();
    let files = registration.files.len();
    let outcome = blocking(move || Ok(index.register_shard(&registration)?)).await?;
    if outcome.changed() {
        crate::metrics::add(&state.metrics.shards_registered, 1);
    }
    tracing::info!(%repo, files, new_files = outcome.new_files, "registered shard");
    Ok(outcome.changed())
}
