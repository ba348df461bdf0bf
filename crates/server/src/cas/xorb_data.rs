//! `GET /v1/xorb-data/{hash}?bytes=..&tid=..&expires=..&sig=..`: bytes of a stored xorb, for
//! the signed URLs reconstructions hand out. Serves only inside the URL's signed byte range
//! (a single HTTP `Range` within it, answered 206 and streamed), and only while the token it
//! was handed out to is not revoked: a xorb holds other repositories' chunks too.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;

use crate::body::parse_range;
use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::metrics::add;
use crate::state::SharedState;
use git_xet_identity::signing::{self, FetchQuery};
use git_xet_io::time::now_secs;
use git_xet_storage::ObjectKey;

pub async fn get(
    State(state): State<SharedState>,
    Path(hash): Path<String>,
    Query(query): Query<FetchQuery>,
    headers: HeaderMap,
) -> ServerResult<Response> {
    let hash = parse_hash(&hash, "xorb hash")?;
    let grant = signing::verify(&state.keys, &hash, &query, now_secs())?;
    if !grant.token_id.is_empty() {
        state.not_revoked_id(&grant.token_id)?;
    }
    let key = ObjectKey::xorb(hash);
    let len = state
        .store
        .len(key)
        .await?
        .ok_or_else(|| ServerError::not_found(format!("xorb {hash} is not stored")))?;
    let (from, to) = (grant.bytes.start, grant.bytes.end);
    let outside = |what: &str| {
        ServerError::Forbidden(format!(
            "this xorb data URL grants bytes {from}-{to} of xorb {hash} only, and {what}: \
             send a Range header inside bytes={from}-{to}, as the reconstruction's url_range says"
        ))
    };
    let range = match parse_range(&headers, len)? {
        None => return Err(outside("the request has no (single) byte Range")),
        Some(r) if r.start < from || r.end > to + 1 => {
            return Err(outside(&format!(
                "bytes {}-{} were asked",
                r.start,
                r.end.saturating_sub(1)
            )))
        }
        Some(r) => r,
    };
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
    Ok(response)
}
