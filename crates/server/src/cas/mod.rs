//! The CAS API (docs/formats.md, "CAS HTTP API"), at the paths `git_xet_core::api::routes`
//! names, mounted at the root and under `/api`: xorb and shard uploads, reconstructions,
//! global dedup, and the signed xorb data route that reconstruction fetch URLs point to; and what hf-xet 1.8 adds (upload
//! grants, telemetry, v2 reconstructions: docs/protocol.md, "The deployed ecosystem").

mod batch_reconstruction;
mod dedup;
mod grants;
mod reconstruction;
mod shards;
mod shards_v2;
mod stored_xorb;
mod telemetry;
pub(crate) mod upload_batches;
mod xorb_data;
pub(crate) mod xorb_waits;
mod xorbs;

pub(crate) use shards::register as register_shard;
pub(crate) use xorbs::store_staged_xorb;

use axum::routing::{get, post, MethodRouter};
use axum::Router;

use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_core::api::routes::Route;
use git_xet_core::MerkleHash;

/// The CAS API at the paths `routes` names (relative to the CAS URL). The match is
/// exhaustive, so a route named there and not served here does not compile.
pub fn router() -> Router<SharedState> {
    Route::CAS.into_iter().fold(Router::new(), |router, route| {
        let template = route.cas_template().expect("a CAS route has a template");
        router.route(template, handler(route))
    })
}

fn handler(route: Route) -> MethodRouter<SharedState> {
    match route {
        Route::XorbUpload => post(xorbs::upload),
        Route::XorbGrant => post(grants::request),
        Route::Telemetry => post(telemetry::report),
        Route::Reconstruction => get(reconstruction::get),
        Route::ReconstructionV2 => get(reconstruction::get_v2),
        Route::ReconstructionBatch => get(batch_reconstruction::get_batch),
        Route::DedupQuery => get(dedup::query),
        Route::XorbData => get(xorb_data::get),
        Route::ShardUpload => post(shards::upload),
        Route::ShardUploadV2 => post(shards_v2::upload),
        Route::UploadBatch => get(upload_batches::get),
        Route::Health
        | Route::Ready
        | Route::Metrics
        | Route::Status
        | Route::LfsBatch
        | Route::LfsVerify
        | Route::LfsXetToken
        | Route::LfsLocks
        | Route::LfsUpload
        | Route::LfsDownload
        | Route::GitInfoRefs
        | Route::GitUploadPack
        | Route::GitReceivePack
        | Route::HookCheck
        | Route::LockCheck => unreachable!("{route:?} is not a CAS route"),
    }
}

/// Parses a hash from a URL path, naming what it is in the error.
pub(crate) fn parse_hash(s: &str, what: &str) -> ServerResult<MerkleHash> {
    MerkleHash::from_hex(s)
        .map_err(|e| ServerError::bad_request(format!("invalid {what} {s:?}: {e}")))
}
