//! `GET /v1/reconstructions/{file_hash}` with optional `Range`: the terms overlapping the
//! range and signed, expiring fetch URLs for their xorb bytes. `GET /v2/reconstructions/...`
//! (what hf-xet 1.8 asks first) answers the same plan in the v2 shape. The batch query of
//! many whole files is batch_reconstruction.rs.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;

use crate::body::parse_range;
use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::reconstruct::{load_metas, plan, to_reconstruction};
use crate::state::{blocking, SharedState};
use git_xet_core::reconstruction::{FetchInfo, HttpRange, Reconstruction, ReconstructionV2};
use git_xet_core::MerkleHash;
use git_xet_identity::auth::Scope;
use git_xet_identity::signing::{fetch_url, Grant};
use git_xet_io::time::now_secs;
use git_xet_storage::ObjectKey;

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
        // Files are visible per repository, each served the record of its dedup scope;
        // elsewhere they do not exist.
        let Some(file) = index.repo_file(&repo, &file_hash)? else {
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
    let answer = Signer::new(state, headers, access)
        .answer(state, &plan)
        .await?;
    Ok(answer)
}

/// Signs the fetch URLs of reconstruction answers for one request: each URL grants its
/// entry's bytes to this token, never past the token's own expiry.
pub(super) struct Signer {
    base: String,
    now: u64,
    pub(super) expires: u64,
    token_id: String,
}

impl Signer {
    pub(super) fn new(
        state: &SharedState,
        headers: &HeaderMap,
        access: git_xet_identity::auth::Access,
    ) -> Signer {
        let now = now_secs();
        let ttl = state.config.fetch_url_ttl.as_secs();
        Signer {
            base: state.base_url(headers),
            now,
            expires: access.exp.map_or(now + ttl, |exp| exp.min(now + ttl)),
            token_id: access.holder.map(|h| h.id).unwrap_or_default(),
        }
    }

    /// This server's URL for `bytes` of `xorb`.
    pub(super) fn url(&self, state: &SharedState, xorb: &MerkleHash, bytes: HttpRange) -> String {
        let grant = Grant {
            xorb: *xorb,
            bytes,
            token_id: self.token_id.clone(),
            expires: self.expires,
        };
        fetch_url(&state.keys, &self.base, &grant)
    }

    /// The answer for `plan`, its URLs signed (or presigned with `--presign`).
    async fn answer(
        &self,
        state: &SharedState,
        plan: &crate::reconstruct::Plan,
    ) -> ServerResult<Reconstruction> {
        let mut answer = to_reconstruction(plan, |xorb, bytes| self.url(state, xorb, bytes));
        if state.config.presign {
            presign(state, &mut answer.fetch_info, self.ttl()).await?;
        }
        Ok(answer)
    }

    /// Seconds the URLs live.
    pub(super) fn ttl(&self) -> u64 {
        self.expires.saturating_sub(self.now)
    }
}

/// With `--presign`, replaces the URLs by ones that fetch each entry's bytes straight from
/// the object store (signed for that `Range` only); keeps this server's URLs for a store
/// without such URLs. A store cannot see revocations: these URLs live out their TTL.
pub(super) async fn presign(
    state: &SharedState,
    fetch_info: &mut std::collections::HashMap<MerkleHash, Vec<FetchInfo>>,
    ttl: u64,
) -> ServerResult<()> {
    let ttl = std::time::Duration::from_secs(ttl.max(1));
    for (hash, infos) in fetch_info.iter_mut() {
        for info in infos {
            let range = info.url_range.start..info.url_range.end + 1;
            let url = state
                .store
                .presign_get(ObjectKey::xorb(*hash), range, ttl)
                .await?;
            match url {
                Some(url) => info.url = url,
                None => return Ok(()),
            }
        }
    }
    Ok(())
}
