//! `POST /v1/xorbs/default/{hash}`: validate a whole xorb, store it atomically, index it.
//!
//! Two forms are accepted: a complete xorb (footer checked against every chunk), and the
//! chunk records alone, as hf-xet 1.8 sends them: then every chunk is decoded and hashed,
//! the footer rebuilt and appended, so that the stored object is always the complete form.
//! Either way the xorb hash is recomputed and must be the one in the URL.
//!
//! The body is checked as it arrives (each chunk hashed while its bytes are in the CPU's
//! cache) and written to a staging file, which then becomes the stored object: no xorb-sized
//! buffer per request, and the bytes never read back. Nothing is written after a bad chunk;
//! the rest of the body is read and dropped, so that the client gets the answer.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{AppendHeaders, IntoResponse};
use axum::Json;
use git_xet_core::api::cas::UploadXorbResponse;
use git_xet_core::api::routes::XORB_NAMESPACE;

use crate::body::read_blocking_then_slot;
use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::metrics::add;
use crate::state::{blocking, SharedState};
use git_xet_core::constants::MAX_XORB_BODY;
use git_xet_core::xorb::{XorbFooter, XorbStreamCheck};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;
use git_xet_index::{DedupScope, XorbMeta};
use git_xet_storage::Staged;
use std::io::Write;

pub async fn upload(
    State(state): State<SharedState>,
    Path((namespace, hash)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ServerResult<impl IntoResponse> {
    let access = state.authorize_cas(&headers, Scope::Write)?;
    if namespace != XORB_NAMESPACE {
        return Err(ServerError::not_found(format!(
            "unknown xorb namespace {namespace:?} (this server has \"default\")"
        )));
    }
    let hash = parse_hash(&hash, "xorb hash")?;
    let store = state.store.clone();
    // An upload slot bounds the xorbs validated at once; it is taken once the body is in.
    let slots = &state.upload_slots;
    let (staged, received, stored_len, footer) = read_blocking_then_slot(
        body,
        &headers,
        MAX_XORB_BODY as u64,
        "xorb",
        slots,
        move |body| {
            let staged = store.stage()?;
            let mut file = staged.file();
            let mut check = XorbStreamCheck::new();
            while let Some(data) = body.next_bytes()? {
                if let Err(e) = check.push(&data) {
                    // Read to its end, so that the client gets the answer.
                    while body.next_bytes()?.is_some() {}
                    return Err(e.into());
                }
                file.write_all(&data)?;
            }
            let received = check.received();
            let checked = check.finish()?;
            if checked.had_footer {
                return Ok((staged, received, received, checked.footer));
            }
            let footer = checked.footer;
            let mut tail = Vec::with_capacity(XorbFooter::encoded_len(footer.num_chunks()) + 4);
            footer.write_to(&mut tail);
            file.write_all(&tail)?;
            Ok((staged, received, received + tail.len() as u64, footer))
        },
    )
    .await?;
    if footer.hash != hash {
        return Err(ServerError::bad_request(format!(
            "xorb hash mismatch: the body is xorb {} but the URL names {hash}",
            footer.hash
        )));
    }
    // Accepted: counted as soon as it is known valid, while it is being written. What the
    // client sent, without a footer this server added.
    add(&state.metrics.xorb_bytes_received, received);
    let meta = XorbMeta { footer, stored_len };
    let inserted = store_staged_xorb(&state, meta, staged, &access.repo).await?;
    Ok((
        AppendHeaders(super::xorb_waits::advertised(&state)),
        Json(UploadXorbResponse {
            was_inserted: inserted,
        }),
    ))
}

/// Stores a validated xorb that `repo` uploaded from its staging file and indexes the layout
/// the store holds (write-once per hash: see `stored_xorb`), recording `repo` as a holder;
/// counts it when new. Returns whether it was new: to the server, or on a scoped server to
/// `repo`'s dedup scope, so that the answer says nothing about other scopes.
pub async fn store_staged_xorb(
    state: &SharedState,
    meta: XorbMeta,
    staged: Staged,
    repo: &RepoName,
) -> ServerResult<bool> {
    let hash = meta.hash();
    let inserted = super::stored_xorb::store_and_index(state, meta, staged).await?;
    let index = state.index.clone();
    let (repo, domain) = (repo.clone(), state.dedup_domain(repo));
    let held_before = blocking(move || Ok(index.add_xorb_holder(&hash, &repo, &domain)?)).await?;
    // Shards sent ahead of this xorb (xorb_waits.rs) may go on.
    state.xorb_waits.stored();
    Ok(match state.config.dedup_scope {
        DedupScope::Server => inserted,
        DedupScope::Org | DedupScope::Repo => !held_before,
    })
}
