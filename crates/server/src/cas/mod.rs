//! The CAS API (docs/formats.md, "CAS HTTP API"), mounted under both `/v1` and
//! `/api/v1`: xorb and shard uploads, reconstructions, global dedup, and the signed xorb
//! data route that reconstruction fetch URLs point to; and what hf-xet 1.8 adds (upload
//! grants, telemetry, v2 reconstructions: docs/protocol.md, "The deployed ecosystem").

mod dedup;
mod grants;
mod reconstruction;
mod shards;
mod shards_v2;
mod stored_xorb;
mod telemetry;
mod xorb_data;
mod xorbs;

pub(crate) use shards::register as register_shard;
pub(crate) use xorbs::store_staged_xorb;

use axum::routing::{get, post};
use axum::Router;

use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_core::MerkleHash;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/xorbs/{namespace}/{hash}", post(xorbs::upload))
        .route("/shards", post(shards::upload))
        .route("/reconstructions/{file_hash}", get(reconstruction::get))
        .route("/chunks/{namespace}/{hash}", get(dedup::query))
        .route("/xorb-data/{hash}", get(xorb_data::get))
        .route("/xorb-grants/{namespace}/{hash}", post(grants::request))
        .route("/telemetry", post(telemetry::report))
}

/// The routes under `/v2` (and `/api/v2`).
pub fn router_v2() -> Router<SharedState> {
    Router::new()
        .route("/reconstructions/{file_hash}", get(reconstruction::get_v2))
        .route("/shards", post(shards_v2::upload))
}

/// Parses a hash from a URL path, naming what it is in the error.
pub(crate) fn parse_hash(s: &str, what: &str) -> ServerResult<MerkleHash> {
    MerkleHash::from_hex(s)
        .map_err(|e| ServerError::bad_request(format!("invalid {what} {s:?}: {e}")))
}
