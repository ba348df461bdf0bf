//! `GET /v1/xorb-data/{hash}?expires=..&sig=..`: the bytes of a stored xorb, for the signed
//! URLs reconstructions hand out. Honours a single HTTP `Range` with 206 and streams.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;

use crate::server::auth::now_secs;
use crate::server::body::parse_range;
use crate::server::cas::parse_hash;
use crate::server::error::{ServerError, ServerResult};
use crate::server::metrics::add;
use crate::server::signing::{self, FetchQuery};
use crate::server::state::SharedState;
use crate::server::storage::ObjectKey;

pub async fn get(
    State(state): State<SharedState>,
    Path(hash): Path<String>,
    Query(query): Query<FetchQuery>,
    headers: HeaderMap,
) -> ServerResult<Response> {
    let hash = parse_hash(&hash, "xorb hash")?;
    signing::verify(&state.keys, &hash, &query, now_secs())?;
    let key = ObjectKey::xorb(hash);
    let len = state
        .store
        .len(key)
        .await?
        .ok_or_else(|| ServerError::not_found(format!("xorb {hash} is not stored")))?;
    let requested = parse_range(&headers, len)?;
    let range = requested.clone().unwrap_or(0..len);
    let stream = state.store.stream_range(key, range.clone()).await?;
    let counter = state.clone();
    let stream =
        stream.inspect_ok(move |bytes| add(&counter.metrics.xorb_bytes_served, bytes.len() as u64));
    let mut response = Body::from_stream(stream).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(range.end - range.start),
    );
    if requested.is_some() {
        let value = format!(
            "bytes {}-{}/{len}",
            range.start,
            range.end.saturating_sub(1)
        );
        h.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&value).expect("ascii"),
        );
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    Ok(response)
}
