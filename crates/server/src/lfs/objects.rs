//! git-lfs `basic` transfers: `PUT` and `GET <repo>/info/lfs/objects/{oid}`.
//!
//! An upload is converted to XET as it arrives (chunked, deduplicated, new chunks packed into
//! staged xorbs) while its sha256 is computed, so the answer follows the last byte at once;
//! only when size and sha256 match is anything stored or registered. Content already stored
//! elsewhere costs no storage (the conversion deduplicates against it), but the object id is
//! bound to the file the uploaded bytes hash to, never to what another repository's shard
//! claimed for that sha256: a shard's sha256 metadata is an unchecked claim. A download
//! streams the file's reconstruction, honouring a `Range` so git-lfs can resume.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::body::{check_declared, parse_range, read_blocking, read_blocking_slot_when_flowing};
use crate::cas::register_shard;
use crate::error::{ServerError, ServerResult};
use crate::file_stream::{stream_plan, ClaimCheck};
use crate::ingest::{commit, ingest_stream, Ingested};
use crate::lfs::{parse_oid, LfsResult};
use crate::metrics::add;
use crate::reconstruct::{load_metas, plan, Plan};
use crate::shard_check::validate_built;
use crate::state::{blocking, SharedState};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;
use git_xet_io::pipeline::{hash_stream, StreamSummary};

pub async fn upload(
    state: &SharedState,
    repo: &RepoName,
    oid: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    // The action's header, or (for clients that send none) the grant its href carries.
    match query.filter(|_| git_xet_identity::auth::credential(headers).is_none()) {
        Some(query) => {
            let now = git_xet_io::time::now_secs();
            let grant = git_xet_identity::signing::verify_upload(
                &state.keys,
                repo.as_str(),
                oid,
                query,
                now,
            )?;
            if !grant.token_id.is_empty() {
                state.not_revoked_id(&grant.token_id)?;
            }
        }
        None => {
            state.authorize_transfer(headers, repo, Scope::Write)?;
        }
    }
    let sha256 = parse_oid(oid)?;
    let max = state.config.max_object_size;
    if let Some(declared) = check_declared(headers, max, "object")? {
        refuse_if_it_cannot_fit(state, declared)?;
    }
    let convert = !in_repo(state, repo, sha256).await?;
    let (st, owned_repo) = (state.clone(), repo.clone());
    let received = if convert {
        // Converting builds a whole xorb in memory: conversions at once are bounded, and a
        // conversion takes its slot only once data flows, so stalled uploads hold none.
        read_blocking_slot_when_flowing(
            body,
            headers,
            max,
            "object",
            &state.conversion_slots,
            CONVERT_AFTER,
            move |body| {
                Ok(Received::Converted(Box::new(ingest_stream(
                    &st,
                    &owned_repo,
                    body,
                )?)))
            },
        )
        .await?
    } else {
        read_blocking(body, headers, max, "object", move |body| {
            Ok(Received::Hashed(hash_stream(body, true)?))
        })
        .await?
    };
    if received.sha256() != sha256 {
        return Err(ServerError::bad_request(format!(
            "sha256 mismatch: the uploaded bytes hash to {}, not to the object id {oid}",
            git_xet_core::hash::sha256_hex(&received.sha256())
        ))
        .into());
    }
    add(&state.metrics.lfs_basic_bytes_received, received.size());
    match received {
        Received::Converted(ingested) => register(state, repo, *ingested).await?,
        Received::Hashed(_) => {} // already in this repository
    }
    Ok(StatusCode::OK.into_response())
}

/// Bytes of a basic upload received before it takes a conversion slot (or all of it, if
/// smaller): what a stalled upload can hold without a slot.
const CONVERT_AFTER: u64 = 256 * 1024;

/// 507 before reading a body that the data directory has no room for (converted content may
/// deduplicate, but an upload that does not would fill the disk before being refused).
fn refuse_if_it_cannot_fit(state: &SharedState, declared: u64) -> ServerResult<()> {
    match git_xet_io::platform::file::available_space(&state.config.data_dir) {
        Some(free) if declared > free => Err(ServerError::disk_full(format!(
            "an object of {declared} bytes does not fit in the {free} bytes free"
        ))),
        _ => Ok(()),
    }
}

/// Whether this repository already has the object. Other repositories are not asked: their
/// files are found by the conversion's deduplication, by content.
async fn in_repo(state: &SharedState, repo: &RepoName, sha256: [u8; 32]) -> ServerResult<bool> {
    let (index, repo) = (state.index.clone(), repo.clone());
    blocking(move || Ok(index.repo_file_by_sha256(&repo, &sha256)?.is_some())).await
}

/// An upload as received: converted to XET as it arrived, or only hashed (known content).
enum Received {
    Hashed(StreamSummary),
    Converted(Box<Ingested>),
}

impl Received {
    fn size(&self) -> u64 {
        match self {
            Received::Hashed(s) => s.size,
            Received::Converted(i) => i.size,
        }
    }

    fn sha256(&self) -> [u8; 32] {
        match self {
            Received::Hashed(s) => s.sha256.expect("sha256 was asked for"),
            Received::Converted(i) => i.sha256,
        }
    }
}

/// Makes a converted, verified upload visible in `repo`: stores its staged xorbs, then
/// validates and registers its shard.
async fn register(state: &SharedState, repo: &RepoName, ingested: Ingested) -> ServerResult<()> {
    let new_xorbs = ingested.staged.len();
    commit(state, ingested.staged, repo).await?;
    tracing::info!(
        repo = %repo,
        bytes = ingested.size,
        new_xorbs,
        deduplicated_bytes = ingested.deduplicated_bytes,
        "converted an LFS upload to XET"
    );
    let file = ingested.shard.files.first().map(|f| f.file_hash);
    let (index, shard, owned_repo) = (state.index.clone(), ingested.shard, repo.clone());
    let domain = state.dedup_domain(repo);
    let validated = blocking(move || validate_built(&*index, shard, &owned_repo, &domain)).await?;
    register_shard(state, validated, repo).await?;
    record_sha256(state, file, ingested.sha256).await
}

/// Records a sha256 this server computed from a file's bytes (a basic upload's): claims
/// matching it need no check at download.
pub async fn record_sha256(
    state: &SharedState,
    file: Option<git_xet_core::MerkleHash>,
    sha256: [u8; 32],
) -> ServerResult<()> {
    let Some(file) = file else { return Ok(()) };
    let index = state.index.clone();
    blocking(move || Ok(index.record_verified_sha256(&file, &sha256)?)).await
}

pub async fn download(
    state: &SharedState,
    repo: &RepoName,
    oid: &str,
    headers: &HeaderMap,
) -> LfsResult<Response> {
    state.authorize_transfer(headers, repo, Scope::Read)?;
    let sha256 = parse_oid(oid)?;
    let index = state.index.clone();
    let owned_repo = repo.clone();
    let found = blocking(move || {
        let Some(file) = index.repo_file_by_sha256(&owned_repo, &sha256)? else {
            return Ok(None);
        };
        let verified = claim_status(&*index, &owned_repo, &file)?;
        let metas = load_metas(&*index, &file)?;
        Ok(Some((file, metas, verified)))
    })
    .await?;
    let Some((file, metas, verified)) = found.filter(|f| f.2 != Claim::False) else {
        return Err(ServerError::not_found(format!("object {oid} is not stored in {repo}")).into());
    };
    let requested = parse_range(headers, file.size)?;
    // A range cannot be checked alone: an unverified claim is checked first, by hashing the
    // whole file once (git-lfs asks for a range only to resume a download begun whole, which
    // checked it already unless the client went away).
    if verified == Claim::Unverified
        && requested.is_some()
        && !check_claim(state, repo, file.clone()).await?
    {
        return Err(ServerError::not_found(format!("object {oid} is not stored in {repo}")).into());
    }
    // A whole download checks an unverified claim as it streams.
    let claim = (verified == Claim::Unverified && requested.is_none()).then(|| ClaimCheck {
        repo: repo.clone(),
        file_hash: file.file_hash,
        sha256: file.sha256,
    });
    let range = requested.clone().unwrap_or(0..file.size);
    let len = range.end - range.start;
    let planned = if len == 0 {
        Plan::default()
    } else {
        plan(&file, &metas, range.clone())?
    };
    let mut response = stream_plan(state.clone(), planned, len, claim).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if requested.is_some() {
        let value = format!("bytes {}-{}/{}", range.start, range.end - 1, file.size);
        h.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&value).expect("ascii"),
        );
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    Ok(response)
}

/// What is known of a repository's sha256 claim for a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    Verified,
    Unverified,
    /// The content's sha256 is known and differs: the claim is dropped now.
    False,
}

/// Checks `file.sha256` (the repository's claim, as `repo_file_by_sha256` returns it)
/// against the content's sha256 if known, dropping a false claim.
pub fn claim_status(
    index: &dyn git_xet_index::Index,
    repo: &RepoName,
    file: &git_xet_index::FileRecord,
) -> ServerResult<Claim> {
    let verified = index.verified_sha256(&file.file_hash)?;
    settle_claim(index, repo, file, verified)
}

/// [`claim_status`] of many files, with one index query for all.
pub fn claim_statuses(
    index: &dyn git_xet_index::Index,
    repo: &RepoName,
    files: &[&git_xet_index::FileRecord],
) -> ServerResult<Vec<Claim>> {
    let hashes: Vec<_> = files.iter().map(|f| f.file_hash).collect();
    let verified = index.verified_sha256s(&hashes)?;
    files
        .iter()
        .zip(verified)
        .map(|(file, verified)| settle_claim(index, repo, file, verified))
        .collect()
}

/// The claim `file.sha256` given the content's sha256 (`verified`) if known.
fn settle_claim(
    index: &dyn git_xet_index::Index,
    repo: &RepoName,
    file: &git_xet_index::FileRecord,
    verified: Option<[u8; 32]>,
) -> ServerResult<Claim> {
    Ok(match verified {
        Some(actual) if actual == file.sha256 => Claim::Verified,
        Some(_) => {
            index.drop_sha256_claim(repo, &file.file_hash, &file.sha256)?;
            tracing::error!(%repo, file = %file.file_hash, "a false sha256 claim is dropped");
            Claim::False
        }
        None => Claim::Unverified,
    })
}

/// Hashes the whole file to check `repo`'s unverified claim (see [`ClaimCheck`]). Returns
/// whether it held (when not, it is dropped).
pub async fn check_claim(
    state: &SharedState,
    repo: &RepoName,
    file: git_xet_index::FileRecord,
) -> ServerResult<bool> {
    use futures::StreamExt;
    let index = state.index.clone();
    let (file, metas) = blocking(move || {
        let metas = load_metas(&*index, &file)?;
        Ok((file, metas))
    })
    .await?;
    let planned = if file.size == 0 {
        Plan::default()
    } else {
        plan(&file, &metas, 0..file.size)?
    };
    let claim = ClaimCheck {
        repo: repo.clone(),
        file_hash: file.file_hash,
        sha256: file.sha256,
    };
    let mut body = stream_plan(state.clone(), planned, file.size, Some(claim)).into_data_stream();
    while let Some(piece) = body.next().await {
        if piece.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}
