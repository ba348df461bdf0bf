//! The CAS API, exactly as deployed XET servers serve it (docs/formats.md, "CAS HTTP API",
//! under `/v1` of the CAS URL): reconstructions, global dedup queries, xorb and shard
//! uploads, and fetching xorb byte ranges from `fetch_info` URLs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, RANGE};
use reqwest::Response;

use crate::error::{ClientError, Result};
use crate::http::{describe_transport_error, AttemptError, Http};
use git_xet_core::api::cas::{
    AnnouncedObject, UploadBatchAnswer, UploadShardResponse, UploadXorbResponse,
};
use git_xet_core::api::routes;
use git_xet_core::reconstruction::{BatchReconstruction, HttpRange, Reconstruction};
use git_xet_core::MerkleHash;

/// Largest global-dedup answer we accept (a shard describing a few xorbs).
const MAX_DEDUP_SHARD: usize = 64 * 1024 * 1024;
/// Largest reconstruction answer we accept (millions of terms).
const MAX_RECONSTRUCTION_JSON: usize = 256 * 1024 * 1024;
/// Largest answer of the upload-batch read-ahead route (1000 objects of about 90 bytes).
const MAX_UPLOAD_BATCH_JSON: usize = 256 * 1024;

pub use git_xet_core::api::cas::{AWAIT_XORBS, AWAIT_XORBS_LIMIT};

/// Typed access to one CAS server.
#[derive(Debug, Clone)]
pub struct CasApi {
    http: Http,
    base: String,
    /// The xorbs one shard may name in [`AWAIT_XORBS`], as the server's last upload answer
    /// said (0: not offered, or not known yet), shared by the clones of this API.
    await_limit: Arc<AtomicUsize>,
}

/// Reads a whole body, refusing more than `limit` bytes. Transport failures are retryable.
pub async fn read_body_limited(
    response: Response,
    limit: usize,
    what: &str,
) -> std::result::Result<Bytes, AttemptError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(AttemptError::Fatal(ClientError::protocol(
            what,
            format!("response larger than {limit} bytes"),
        )));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(part) = stream.next().await {
        let part = part.map_err(|e| AttemptError::retry(describe_transport_error(&e)))?;
        if body.len() + part.len() > limit {
            return Err(AttemptError::Fatal(ClientError::protocol(
                what,
                format!("response larger than {limit} bytes"),
            )));
        }
        body.extend_from_slice(&part);
    }
    Ok(Bytes::from(body))
}

/// Largest upload answer we read (they are a few bytes of JSON).
const MAX_UPLOAD_ANSWER: usize = 64 * 1024;

/// An upload's answer, parsed strictly: what is not the API's JSON is an error naming the
/// status and the start of what came, never taken for success.
async fn upload_answer<T: serde::de::DeserializeOwned>(
    response: Response,
    what: &str,
) -> std::result::Result<T, AttemptError> {
    let status = response.status().as_u16();
    let body = read_body_limited(response, MAX_UPLOAD_ANSWER, what).await?;
    serde_json::from_slice(&body)
        .map_err(|e| AttemptError::Fatal(ClientError::malformed(what, status, &body, &e)))
}

impl CasApi {
    pub fn new(cas_url: &str, http: Http) -> Self {
        CasApi {
            http,
            base: cas_url.trim_end_matches('/').to_string(),
            await_limit: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many still-uploading xorbs a shard upload may name ([`AWAIT_XORBS`]): 0 until an
    /// upload answer of this server offered it.
    pub fn await_limit(&self) -> usize {
        self.await_limit.load(Ordering::Relaxed)
    }

    /// Takes the server's word, given before any upload (the `xet` action of a git-xet
    /// server), that it honours [`AWAIT_XORBS`] for `limit` xorbs: the first session's shard
    /// can then go with its xorbs. Every upload answer still updates it.
    pub fn assume_await_limit(&self, limit: usize) {
        self.await_limit.store(limit, Ordering::Relaxed);
    }

    /// Learns from an upload answer whether the server honours [`AWAIT_XORBS`].
    fn learn(&self, response: &Response) {
        let limit = response
            .headers()
            .get(AWAIT_XORBS_LIMIT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        self.await_limit.store(limit, Ordering::Relaxed);
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn http(&self) -> &Http {
        &self.http
    }

    /// GET `url` (bytes `range.0..=range.1` of it when given), status checked and the body
    /// read whole, refusing more than `limit` bytes.
    async fn get_limited(
        &self,
        what: &str,
        url: &str,
        range: Option<(u64, u64)>,
        limit: usize,
    ) -> Result<Bytes> {
        self.http
            .request(
                what,
                url,
                |c| {
                    let req = c.get(url);
                    Ok(match range {
                        Some((s, e)) => req.header(RANGE, format!("bytes={s}-{e}")),
                        None => req,
                    })
                },
                |r| read_body_limited(r, limit, what),
            )
            .await
    }

    /// A reconstruction answer ([`get_limited`](Self::get_limited)), its JSON decoded.
    async fn get_reconstruction<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        range: Option<(u64, u64)>,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let body = self
            .get_limited(what, &url, range, MAX_RECONSTRUCTION_JSON)
            .await?;
        serde_json::from_slice(&body)
            .map_err(|e| ClientError::protocol(what, format!("reconstruction JSON: {e}")))
    }

    /// The reconstruction of a file, or of bytes `range.0..=range.1` of it.
    pub async fn reconstruction(
        &self,
        file: &MerkleHash,
        range: Option<(u64, u64)>,
    ) -> Result<Reconstruction> {
        let what = format!("querying the reconstruction of {file}");
        let path = routes::reconstruction_path(file);
        self.get_reconstruction(&what, &path, range).await
    }

    /// The whole-file reconstructions of many files in one request (the batch query);
    /// files the server does not show are left out of the answer.
    pub async fn reconstructions(&self, files: &[MerkleHash]) -> Result<BatchReconstruction> {
        let what = format!("querying the reconstructions of {} files", files.len());
        let path = routes::reconstruction_batch_path(files);
        self.get_reconstruction(&what, &path, None).await
    }

    /// Global dedup: the shard describing xorbs that hold this chunk, if the server knows it.
    pub async fn query_chunk(&self, chunk: &MerkleHash) -> Result<Option<Bytes>> {
        let url = format!("{}{}", self.base, routes::dedup_query_path(chunk));
        let what = format!("global dedup query for chunk {chunk}");
        match self.get_limited(&what, &url, None, MAX_DEDUP_SHARD).await {
            Ok(body) => Ok(Some(body)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The objects the upload Batch API answer with session id `session` gave `xet` actions
    /// (a git-xet server extension, for reading ahead of git-lfs); `None` when the server
    /// keeps no such list (another server, another instance, too old) or the id cannot be
    /// a git-xet server's.
    pub async fn announced_uploads(&self, session: &str) -> Result<Option<Vec<AnnouncedObject>>> {
        let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if session.is_empty() || session.len() > 128 || !session.bytes().all(plain) {
            return Ok(None);
        }
        let url = format!("{}{}", self.base, routes::upload_batch_path(session));
        let what = "asking which objects the push's Batch API answer announced";
        match self
            .get_limited(what, &url, None, MAX_UPLOAD_BATCH_JSON)
            .await
        {
            Ok(body) => serde_json::from_slice::<UploadBatchAnswer>(&body)
                .map(|answer| Some(answer.objects))
                .map_err(|e| ClientError::protocol(what, format!("upload batch JSON: {e}"))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Uploads a serialized xorb of `len` bytes; `body` makes a fresh body for each attempt.
    /// Returns whether the server stored it anew (false: it already had it).
    pub async fn upload_xorb(
        &self,
        hash: &MerkleHash,
        len: u64,
        body: impl Fn() -> reqwest::Body,
    ) -> Result<bool> {
        let url = format!("{}{}", self.base, routes::xorb_path(hash));
        let what = format!("uploading xorb {hash}");
        let answer: UploadXorbResponse = self
            .http
            .request(
                &what,
                &url,
                |c| {
                    Ok(c.post(&url)
                        .header(CONTENT_TYPE, "application/octet-stream")
                        .header(CONTENT_LENGTH, len)
                        .body(body()))
                },
                |r| {
                    self.learn(&r);
                    upload_answer(r, &what)
                },
            )
            .await?;
        Ok(answer.was_inserted)
    }

    /// Registers a shard (upload form, no footer); returns whether it was new.
    pub async fn upload_shard(&self, shard: Bytes) -> Result<bool> {
        self.upload_shard_awaiting(shard, &[]).await
    }

    /// [`upload_shard`](Self::upload_shard) while the xorbs `awaiting` are still being
    /// uploaded: the server waits for them before it validates the shard. Only for a server
    /// whose [`await_limit`](Self::await_limit) allows as many; a failure may only mean that
    /// a xorb was late (send the shard again once the xorbs succeeded).
    pub async fn upload_shard_awaiting(
        &self,
        shard: Bytes,
        awaiting: &[MerkleHash],
    ) -> Result<bool> {
        let url = format!("{}{}", self.base, routes::SHARD_UPLOAD);
        let what = "registering the upload's shard".to_string();
        let awaited = awaiting
            .iter()
            .map(|h| h.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let answer: UploadShardResponse = self
            .http
            .request(
                &what,
                &url,
                |c| {
                    let req = c
                        .post(&url)
                        .header(CONTENT_TYPE, "application/octet-stream")
                        .body(shard.clone());
                    Ok(match awaited.is_empty() {
                        true => req,
                        false => req.header(AWAIT_XORBS, &awaited),
                    })
                },
                |r| {
                    self.learn(&r);
                    upload_answer(r, &what)
                },
            )
            .await?;
        Ok(answer.result.changed())
    }

    /// Starts fetching `range` of a `fetch_info` URL exactly as given. The caller reads the
    /// body and retries a failure mid-body itself (it knows how much it already consumed).
    pub async fn fetch_range(&self, what: &str, url: &str, range: HttpRange) -> Result<Response> {
        self.http
            .request(
                what,
                url,
                |c| Ok(c.get(url).header(RANGE, range.header_value())),
                |r| async move { check_range_response(r, range, what) },
            )
            .await
    }
}

/// A range response must be 206 for exactly the range asked (or a 200 of exactly that
/// length, which a server may send when the range is the whole object).
fn check_range_response(
    r: Response,
    range: HttpRange,
    what: &str,
) -> std::result::Result<Response, AttemptError> {
    let status = r.status().as_u16();
    let len = r.content_length();
    let fits = match status {
        206 => len.is_none_or(|n| n == range.len()),
        200 => range.start == 0 && len == Some(range.len()),
        _ => false,
    };
    if !fits {
        return Err(AttemptError::Fatal(ClientError::protocol(
            what,
            format!(
                "asked for bytes {}-{} and got status {status} with {len:?} bytes",
                range.start, range.end
            ),
        )));
    }
    Ok(r)
}
