//! `POST /v1/xorb-grants/default/{hash}`: hf-xet 1.8 asks for an upload grant (a URL to put
//! the xorb to, then a commit) before every xorb upload. This server has no separate upload
//! store, so it grants none: `200` when the xorb is already stored (the client then skips
//! the upload, as the reference server answers), `404` otherwise, on which the client
//! uploads through `POST /v1/xorbs`, where the xorb is validated. On a scoped server
//! (`--dedup-scope`), "stored" means held by a repository of the caller's scope: another
//! scope's copy is not revealed, and the client proves possession by uploading it.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::metrics::add;
use crate::state::{blocking, SharedState};
use git_xet_identity::auth::Scope;

pub async fn request(
    State(state): State<SharedState>,
    Path((namespace, hash)): Path<(String, String)>,
    headers: HeaderMap,
) -> ServerResult<StatusCode> {
    let access = state.authorize_cas(&headers, Scope::Write)?;
    if namespace != git_xet_core::api::routes::XORB_NAMESPACE {
        return Err(ServerError::not_found(format!(
            "unknown xorb namespace {namespace:?} (this server has \"default\")"
        )));
    }
    let hash = parse_hash(&hash, "xorb hash")?;
    let index = state.index.clone();
    let domain = state.dedup_domain(&access.repo);
    let stored = blocking(move || Ok(index.xorb_in_domain(&hash, &domain)?)).await?;
    if stored {
        add(&state.metrics.xorb_grants_already_stored, 1);
        return Ok(StatusCode::OK);
    }
    Err(ServerError::not_found(format!(
        "no upload grants here: upload xorb {hash} with POST /v1/xorbs/default/{hash}"
    )))
}
