//! `GET /v1/chunks/{namespace}/{chunk_hash}`: global deduplication. The namespace is
//! `default` for hf-xet 1.8 (its one key prefix for xorbs and dedup alike) and
//! `default-merkledb` for the draft and older clients: both name the same store.
//!
//! For a chunk that is eligible (the first chunk of a registered file, or one whose hash
//! passes the 1-in-1024 rule; the server decides, as deployed clients set no flags) and
//! stored, answers a stored-form shard without files, describing the xorb holding it and,
//! for a file's first chunk, the xorbs of that file, so that a re-upload can match long
//! runs. On a scoped server (`--dedup-scope`) only xorbs and files of the caller's scope are
//! found or described: another scope's chunk is a miss, like a chunk stored nowhere.
//! Chunk hashes in the answer are keyed with the current rotation's key, so only a
//! client that has a chunk can recognise it; the footer carries the key and its expiry.

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::metrics::add;
use crate::state::{blocking, SharedState};
use git_xet_core::hash::{is_global_dedup_eligible, keyed_chunk_hash};
use git_xet_core::shard::{FooterOptions, Shard, XorbBlock, XorbChunk};
use git_xet_core::MerkleHash;
use git_xet_identity::auth::Scope;
use git_xet_identity::keys::Keys;
use git_xet_index::{DedupDomain, Index, XorbMeta};
use git_xet_io::time::now_secs;

/// The dedup namespaces clients use, current (`default`) and draft (`default-merkledb`).
const DEDUP_NAMESPACES: [&str; 2] = [XORB_NAMESPACE, DEDUP_NAMESPACE];
use git_xet_core::api::routes::{DEDUP_NAMESPACE, XORB_NAMESPACE};
/// Upper bound on chunks described in one answer (about 48 bytes each).
const MAX_ANSWER_CHUNKS: usize = 64 * 1024;
/// Files whose xorbs are added when the chunk starts several files.
const MAX_FILES: usize = 2;

pub async fn query(
    State(state): State<SharedState>,
    Path((namespace, hash)): Path<(String, String)>,
    headers: HeaderMap,
) -> ServerResult<Response> {
    let access = state.authorize_cas(&headers, Scope::Read)?;
    if !DEDUP_NAMESPACES.contains(&namespace.as_str()) {
        return Err(ServerError::not_found(format!(
            "unknown dedup namespace {namespace:?} (this server has {DEDUP_NAMESPACES:?})"
        )));
    }
    let chunk = parse_hash(&hash, "chunk hash")?;
    let index = state.index.clone();
    let domain = state.dedup_domain(&access.repo);
    let xorbs = blocking(move || related_xorbs(&*index, &chunk, &domain)).await?;
    if xorbs.is_empty() {
        add(&state.metrics.dedup_misses, 1);
        return Err(ServerError::not_found(format!(
            "chunk {chunk} is not tracked by global dedup"
        )));
    }
    add(&state.metrics.dedup_hits, 1);
    let period = state.config.dedup_key_period.as_secs().max(1);
    let bytes = answer(&state.keys, &xorbs, now_secs(), period);
    let mut response = bytes.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(response)
}

/// The xorbs of `domain` to describe for `chunk`; empty when it is not eligible or not
/// stored there.
fn related_xorbs(
    index: &dyn Index,
    chunk: &MerkleHash,
    domain: &DedupDomain,
) -> ServerResult<Vec<std::sync::Arc<XorbMeta>>> {
    let Some((xorb, _)) = index.chunk_location(chunk, domain)? else {
        return Ok(Vec::new());
    };
    let files = index.files_starting_with(chunk, MAX_FILES, domain)?;
    if files.is_empty() && !is_global_dedup_eligible(chunk, false) {
        return Ok(Vec::new());
    }
    let mut order = vec![xorb];
    for file in files {
        if let Some(record) = index.file(&file, domain)? {
            order.extend(record.terms.iter().map(|t| t.xorb_hash));
        }
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut chunks = 0;
    for hash in order {
        if !seen.insert(hash) {
            continue;
        }
        // The domain's files reference only its xorbs; checked anyway, as that is the rule.
        if !index.xorb_in_domain(&hash, domain)? {
            continue;
        }
        let Some(meta) = index.xorb(&hash)? else {
            continue;
        };
        if !out.is_empty() && chunks + meta.num_chunks() > MAX_ANSWER_CHUNKS {
            break;
        }
        chunks += meta.num_chunks();
        out.push(meta);
    }
    Ok(out)
}

/// The rotation epoch's key and when answers keyed with it stop being usable: the end of
/// the next epoch, so an answer given just before a rotation stays useful for a period.
pub fn dedup_key(keys: &Keys, now: u64, period: u64) -> (MerkleHash, u64) {
    let epoch = now / period;
    (keys.dedup_key(epoch), (epoch + 2) * period)
}

fn answer(keys: &Keys, xorbs: &[std::sync::Arc<XorbMeta>], now: u64, period: u64) -> Vec<u8> {
    let (key, expiry) = dedup_key(keys, now, period);
    let blocks = xorbs
        .iter()
        .map(|meta| {
            let mut block = XorbBlock::from_chunks(
                meta.hash(),
                (0..meta.num_chunks() as u32)
                    .map(|i| (meta.footer.chunk_hashes[i as usize], meta.chunk_len(i))),
                u32::try_from(meta.stored_len).unwrap_or(0),
            );
            block
                .chunks
                .iter_mut()
                .for_each(|c: &mut XorbChunk| c.chunk_hash = keyed_chunk_hash(&key, &c.chunk_hash));
            block
        })
        .collect();
    let shard = Shard {
        files: Vec::new(),
        xorbs: blocks,
    };
    shard.to_stored_bytes(&FooterOptions {
        chunk_hash_key: key,
        creation_timestamp: now,
        key_expiry: expiry,
    })
}
