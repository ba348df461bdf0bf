//! git-lfs `basic` transfers: `PUT` and `GET <repo>/info/lfs/objects/{oid}`.
//!
//! An upload streams into a temporary file (bounded memory) while its sha256 is computed;
//! only when size and sha256 match is anything registered: content the server already
//! holds is just made visible in the repository, new content is converted to XET (chunked,
//! deduplicated, packed into xorbs, registered with a shard). A download streams the
//! file's reconstruction, honouring a `Range` so git-lfs can resume.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use sha2::Digest;
use tokio::sync::mpsc;

use crate::server::auth::Scope;
use crate::server::body::{content_length, parse_range};
use crate::server::cas::register_shard;
use crate::server::error::{ServerError, ServerResult};
use crate::server::file_stream::stream_plan;
use crate::server::ingest::ingest_file;
use crate::server::lfs::{parse_oid, LfsResult};
use crate::server::metrics::add;
use crate::server::reconstruct::{load_metas, plan, Plan};
use crate::server::repo_name::RepoName;
use crate::server::shard_check::validate_built;
use crate::server::state::{blocking, SharedState};

/// A received upload: its temporary file, size and sha256.
struct Received {
    file: tempfile::NamedTempFile,
    size: u64,
    sha256: [u8; 32],
}

pub async fn upload(
    state: &SharedState,
    repo: &RepoName,
    oid: &str,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    state.authorize_repo(headers, repo, Scope::Write)?;
    let sha256 = parse_oid(oid)?;
    let declared = content_length(headers);
    let max = state.config.max_object_size;
    if declared.is_some_and(|n| n > max) {
        return Err(ServerError::PayloadTooLarge(format!(
            "objects larger than {max} bytes are not accepted"
        ))
        .into());
    }
    let received = receive(state, body, max).await?;
    if declared.is_some_and(|n| n != received.size) {
        return Err(ServerError::bad_request(format!(
            "upload ended after {} bytes, before its Content-Length",
            received.size
        ))
        .into());
    }
    if received.sha256 != sha256 {
        return Err(ServerError::bad_request(format!(
            "sha256 mismatch: the uploaded bytes hash to {}, not to the object id {oid}",
            crate::xet::hash::sha256_hex(&received.sha256)
        ))
        .into());
    }
    add(&state.metrics.lfs_basic_bytes_received, received.size);
    register_upload(state, repo, received).await?;
    Ok(StatusCode::OK.into_response())
}

/// Streams the body into a temporary file on a blocking thread, hashing as it goes.
async fn receive(state: &SharedState, mut body: Body, max: u64) -> ServerResult<Received> {
    let file = tempfile::Builder::new()
        .prefix(".lfs-")
        .tempfile_in(state.config.tmp_dir())?;
    let (tx, mut rx) = mpsc::channel::<bytes::Bytes>(16);
    let writer = tokio::task::spawn_blocking(move || -> std::io::Result<Received> {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file.as_file().try_clone()?);
        let mut hasher = sha2::Sha256::new();
        let mut size = 0u64;
        while let Some(data) = rx.blocking_recv() {
            hasher.update(&data);
            out.write_all(&data)?;
            size += data.len() as u64;
        }
        out.flush()?;
        Ok(Received {
            file,
            size,
            sha256: hasher.finalize().into(),
        })
    });
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ServerError::bad_request(format!("reading the upload: {e}")))?;
        if let Ok(data) = frame.into_data() {
            total += data.len() as u64;
            if total > max {
                return Err(ServerError::PayloadTooLarge(format!(
                    "objects larger than {max} bytes are not accepted"
                )));
            }
            if tx.send(data).await.is_err() {
                break; // the writer failed; its error is reported below
            }
        }
    }
    drop(tx);
    Ok(writer.await??)
}

/// Makes a received, verified object visible in `repo`, converting it to XET if new.
async fn register_upload(
    state: &SharedState,
    repo: &RepoName,
    received: Received,
) -> ServerResult<()> {
    let index = state.index.clone();
    let (owned_repo, sha256) = (repo.clone(), received.sha256);
    let already = blocking(move || {
        if index.repo_file_by_sha256(&owned_repo, &sha256)?.is_some() {
            return Ok(true);
        }
        // Uploading the bytes proves possession: an existing file becomes visible here.
        match index.file_by_sha256(&sha256)? {
            Some(file) => {
                index.grant_file(&owned_repo, &file)?;
                Ok(true)
            }
            None => Ok(false),
        }
    })
    .await?;
    if already {
        return Ok(());
    }
    let handle = tokio::runtime::Handle::current();
    let (st, owned_repo) = (state.clone(), repo.clone());
    let validated = blocking(move || {
        let ingested = ingest_file(&st, &handle, received.file.path(), received.sha256)?;
        tracing::info!(
            repo = %owned_repo,
            bytes = received.size,
            new_xorbs = ingested.new_xorbs,
            deduplicated_bytes = ingested.deduplicated_bytes,
            "converted an LFS upload to XET"
        );
        validate_built(&*st.index, ingested.shard, &owned_repo)
    })
    .await?;
    register_shard(state, validated, repo).await?;
    Ok(())
}

pub async fn download(
    state: &SharedState,
    repo: &RepoName,
    oid: &str,
    headers: &HeaderMap,
) -> LfsResult<Response> {
    state.authorize_repo(headers, repo, Scope::Read)?;
    let sha256 = parse_oid(oid)?;
    let index = state.index.clone();
    let owned_repo = repo.clone();
    let found = blocking(move || {
        let Some(file) = index.repo_file_by_sha256(&owned_repo, &sha256)? else {
            return Ok(None);
        };
        let metas = load_metas(&*index, &file)?;
        Ok(Some((file, metas)))
    })
    .await?;
    let Some((file, metas)) = found else {
        return Err(ServerError::not_found(format!("object {oid} is not stored in {repo}")).into());
    };
    let requested = parse_range(headers, file.size)?;
    let range = requested.clone().unwrap_or(0..file.size);
    let len = range.end - range.start;
    let planned = if len == 0 {
        Plan::default()
    } else {
        plan(&file, &metas, range.clone())?
    };
    let mut response = stream_plan(state.clone(), planned, len).into_response();
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
