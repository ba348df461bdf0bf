//! `POST /v1/xorbs/default/{hash}`: validate a whole xorb, store it atomically, index it.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;

use crate::server::auth::Scope;
use crate::server::body::read_into;
use crate::server::cas::parse_hash;
use crate::server::error::{ServerError, ServerResult};
use crate::server::index::XorbMeta;
use crate::server::metrics::add;
use crate::server::state::{blocking, SharedState};
use crate::server::storage::ObjectKey;
use crate::xet::constants::MAX_XORB_SIZE;
use crate::xet::xorb::validate_xorb;

pub async fn upload(
    State(state): State<SharedState>,
    Path((namespace, hash)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ServerResult<Json<serde_json::Value>> {
    state.authorize_cas(&headers, Scope::Write)?;
    if namespace != "default" {
        return Err(ServerError::not_found(format!(
            "unknown xorb namespace {namespace:?} (this server has \"default\")"
        )));
    }
    let hash = parse_hash(&hash, "xorb hash")?;
    // Each xorb body is held in memory: bound how many are, whatever the number of clients.
    let _slot = state.upload_slot().await?;
    let buf = state.buffers.take();
    let bytes = read_into(buf, body, &headers, MAX_XORB_SIZE, "xorb").await?;
    let len = bytes.len() as u64;
    let checked = bytes.clone();
    let footer = blocking(move || Ok(validate_xorb(&checked)?)).await?;
    if footer.hash != hash {
        return Err(ServerError::bad_request(format!(
            "xorb hash mismatch: the body is xorb {} but the URL names {hash}",
            footer.hash
        )));
    }
    // Accepted: counted as soon as it is known valid, while it is being written.
    add(&state.metrics.xorb_bytes_received, len);
    let inserted = store_xorb(
        &state,
        XorbMeta {
            footer,
            stored_len: len,
        },
        bytes.clone(),
    )
    .await?;
    state.buffers.recycle(bytes);
    Ok(Json(serde_json::json!({ "was_inserted": inserted })))
}

/// Writes a validated xorb and indexes it; counts it when new. Returns whether it was new.
pub async fn store_xorb(
    state: &SharedState,
    meta: XorbMeta,
    bytes: bytes::Bytes,
) -> ServerResult<bool> {
    let hash = meta.hash();
    let len = meta.stored_len;
    state.store.put(ObjectKey::xorb(hash), bytes).await?;
    let index = state.index.clone();
    // Indexed only once the bytes are durable: a crash in between leaves an unreferenced
    // file, never an index entry without its data.
    let inserted = blocking(move || Ok(index.register_xorb(&meta)?)).await?;
    if inserted {
        state.metrics.xorb_stored(len);
        tracing::debug!(xorb = %hash, bytes = len, "stored xorb");
    }
    Ok(inserted)
}
