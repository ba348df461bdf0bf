//! `GET /v1/reconstructions?file_id=..&file_id=..`: the whole-file reconstructions of many
//! files at once (a clone of many small files would otherwise spend a round trip on each).
//!
//! One answer costs at most what the largest single file's does: it lists at most
//! [`MAX_BATCH_TERMS`] terms, loads the layouts of at most [`MAX_BATCH_LAYOUT_CHUNKS`] xorb
//! chunks and writes about [`MAX_BATCH_ANSWER_BYTES`] of JSON in all. Files past those
//! bounds are left out, as files the repository does not hold are: a client asks for each
//! of them alone (git-xet's does). The first file always fits (what one file may hold is
//! bounded where files are registered, shard_check.rs), so every answer makes progress. The
//! planning runs on the blocking pool.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::Json;

use crate::cas::parse_hash;
use crate::cas::reconstruction::{presign, Signer};
use crate::error::{ServerError, ServerResult};
use crate::reconstruct::{plan, to_reconstruction};
use crate::shard_check::{MAX_FILE_LAYOUT_CHUNKS, MAX_FILE_TERMS};
use crate::state::{blocking, SharedState};
use git_xet_core::reconstruction::{BatchReconstruction, FetchInfo, HttpRange, Reconstruction};
use git_xet_core::MerkleHash;
use git_xet_identity::auth::Scope;
use git_xet_index::XorbMeta;

/// Files one batch query may name (a client sends one Batch API answer's worth, 100): 500
/// ids make a 37 KB URL, well under the 64 KiB the `http` crate allows a URI.
pub const MAX_BATCH_FILES: usize = 500;

/// Terms one batch answer lists in all: as many as one file may have.
pub const MAX_BATCH_TERMS: usize = MAX_FILE_TERMS;

/// Chunks of the distinct xorbs whose layouts one batch loads: as many as one file may use.
pub const MAX_BATCH_LAYOUT_CHUNKS: u64 = MAX_FILE_LAYOUT_CHUNKS;

/// JSON bytes of one batch answer, as [`AnswerSize`] counts them (the largest single file's
/// answer is about half of this).
pub const MAX_BATCH_ANSWER_BYTES: usize = 64 << 20;

/// JSON bytes counted per file key, per term and per fetch entry (besides its URL): upper
/// bounds of what serde writes for them.
const FILE_JSON_BYTES: usize = 80;
const TERM_JSON_BYTES: usize = 160;
const FETCH_JSON_BYTES: usize = 160;
/// What a presigned store URL is counted as (its length is known only once presigned).
const PRESIGNED_URL_BYTES: usize = 1024;

pub async fn get_batch(
    State(state): State<SharedState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ServerResult<Json<BatchReconstruction>> {
    let access = state.authorize_cas(&headers, Scope::Read)?;
    let files = batch_file_ids(query.as_deref().unwrap_or(""))?;
    let repo = access.repo.clone();
    let signer = Signer::new(&state, &headers, access);
    let planner = state.clone();
    let (mut batch, signer) = blocking(move || {
        let batch = plan_batch(&planner, &repo, &files, &signer)?;
        Ok((batch, signer))
    })
    .await?;
    if state.config.presign {
        presign(&state, &mut batch.fetch_info, signer.ttl()).await?;
    }
    Ok(Json(batch))
}

/// What the answer holds so far, against the bounds of the module comment.
#[derive(Default)]
struct AnswerSize {
    terms: usize,
    layout_chunks: u64,
    json_bytes: usize,
}

/// The batch answer for the repository's files among `files`, in their order, until one does
/// not fit the bounds (see the module comment). Blocking: index reads and planning.
fn plan_batch(
    state: &SharedState,
    repo: &git_xet_index::RepoName,
    files: &[MerkleHash],
    signer: &Signer,
) -> ServerResult<BatchReconstruction> {
    let index = &*state.index;
    let url_bytes = |url: &str| match state.config.presign {
        true => PRESIGNED_URL_BYTES,
        false => url.len(),
    };
    let mut metas: HashMap<MerkleHash, Arc<XorbMeta>> = HashMap::new();
    let mut size = AnswerSize::default();
    let mut listed: HashSet<(MerkleHash, u32, u32)> = HashSet::new();
    let mut batch = BatchReconstruction::default();
    for file_hash in files {
        let Some(file) = index.repo_file(repo, file_hash)? else {
            continue;
        };
        let first = batch.files.is_empty();
        if !first && size.terms + file.terms.len() > MAX_BATCH_TERMS {
            break;
        }
        for term in &file.terms {
            if metas.contains_key(&term.xorb_hash) {
                continue;
            }
            let meta = index.xorb(&term.xorb_hash)?.ok_or_else(|| {
                ServerError::internal(format!(
                    "file {file_hash} uses xorb {} which is not indexed",
                    term.xorb_hash
                ))
            })?;
            size.layout_chunks += meta.num_chunks() as u64;
            metas.insert(term.xorb_hash, meta);
        }
        if !first && size.layout_chunks > MAX_BATCH_LAYOUT_CHUNKS {
            break;
        }
        let one = match file.size {
            0 => Reconstruction::default(),
            _ => {
                let plan = plan(&file, &metas, 0..file.size)?;
                to_reconstruction(&plan, |xorb, bytes| signer.url(state, xorb, bytes))
            }
        };
        let new_entries: Vec<(MerkleHash, &FetchInfo)> = one
            .fetch_info
            .iter()
            .flat_map(|(xorb, infos)| infos.iter().map(move |info| (*xorb, info)))
            .filter(|(xorb, info)| !listed.contains(&(*xorb, info.range.start, info.range.end)))
            .collect();
        let json_bytes = FILE_JSON_BYTES
            + one.terms.len() * TERM_JSON_BYTES
            + new_entries
                .iter()
                .map(|(_, info)| FETCH_JSON_BYTES + url_bytes(&info.url))
                .sum::<usize>();
        if !first && size.json_bytes + json_bytes > MAX_BATCH_ANSWER_BYTES {
            break;
        }
        size.terms += one.terms.len();
        size.json_bytes += json_bytes;
        for (xorb, infos) in one.fetch_info {
            let entries = batch.fetch_info.entry(xorb).or_default();
            for info in infos {
                if listed.insert((xorb, info.range.start, info.range.end)) {
                    entries.push(info);
                }
            }
        }
        batch.files.insert(*file_hash, one.terms);
    }
    if !state.config.presign {
        share_runs(&mut batch.fetch_info, |xorb, bytes| {
            signer.url(state, xorb, bytes)
        });
    }
    Ok(batch)
}

/// The entries of one xorb whose bytes touch or overlap form a run (small files uploaded
/// together sit side by side in shared xorbs); every entry of a run of two or more gets the
/// one URL that grants the run's bytes, keeping its own `url_range`. A client fetching
/// entry by entry sends the same requests as before; one that sees the shared URL may fetch
/// the run with one ranged GET. Only touching bytes are joined, so a URL grants no byte that
/// no file of the answer needs.
fn share_runs(
    fetch_info: &mut HashMap<MerkleHash, Vec<FetchInfo>>,
    url: impl Fn(&MerkleHash, HttpRange) -> String,
) {
    for (xorb, entries) in fetch_info.iter_mut() {
        entries.sort_by_key(|e| (e.url_range.start, e.url_range.end));
        let mut start = 0;
        while start < entries.len() {
            let mut bytes = entries[start].url_range;
            let mut end = start + 1;
            while end < entries.len() && entries[end].url_range.start <= bytes.end.saturating_add(1)
            {
                bytes.end = bytes.end.max(entries[end].url_range.end);
                end += 1;
            }
            if end - start > 1 {
                let shared = url(xorb, bytes);
                for entry in &mut entries[start..end] {
                    entry.url = shared.clone();
                }
            }
            start = end;
        }
    }
}

/// The distinct `file_id`s of a batch query, at least one and at most [`MAX_BATCH_FILES`].
fn batch_file_ids(query: &str) -> ServerResult<Vec<MerkleHash>> {
    let mut files: Vec<MerkleHash> = Vec::new();
    let mut seen = HashSet::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some(hex) = pair.strip_prefix("file_id=") else {
            continue; // other parameters are not ours to refuse
        };
        let hash = parse_hash(hex, "file hash")?;
        if seen.insert(hash) {
            files.push(hash);
        }
        if files.len() > MAX_BATCH_FILES {
            return Err(ServerError::bad_request(format!(
                "more than {MAX_BATCH_FILES} files in one reconstruction query: ask in parts"
            )));
        }
    }
    if files.is_empty() {
        return Err(ServerError::bad_request(
            "a batch reconstruction query names files as file_id=<hash>",
        ));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_queries_name_one_to_five_hundred_distinct_files() {
        let h = |n: u8| MerkleHash::from_bytes([n; 32]);
        let q = |ids: &[MerkleHash]| {
            ids.iter()
                .map(|i| format!("file_id={}", i.to_hex()))
                .collect::<Vec<_>>()
                .join("&")
        };
        assert_eq!(
            batch_file_ids(&format!("{}&x=1", q(&[h(1), h(2), h(1)]))).unwrap(),
            vec![h(1), h(2)]
        );
        for bad in ["", "x=1", "file_id=zz", "file_id="] {
            assert!(
                matches!(batch_file_ids(bad), Err(ServerError::BadRequest(_))),
                "{bad:?}"
            );
        }
        let many: Vec<MerkleHash> = (0..=MAX_BATCH_FILES as u32)
            .map(|i| {
                let mut b = [0u8; 32];
                b[..4].copy_from_slice(&i.to_le_bytes());
                MerkleHash::from_bytes(b)
            })
            .collect();
        assert!(batch_file_ids(&q(&many[..MAX_BATCH_FILES])).is_ok());
        assert!(matches!(
            batch_file_ids(&q(&many)),
            Err(ServerError::BadRequest(_))
        ));
    }

    #[test]
    fn touching_entries_of_a_xorb_share_one_url_and_keep_their_ranges() {
        use git_xet_core::reconstruction::ChunkRange;
        let x = MerkleHash::from_bytes([7; 32]);
        let entry = |c: (u32, u32), b: (u64, u64)| FetchInfo {
            range: ChunkRange::new(c.0, c.1),
            url: format!("own-{}", b.0),
            url_range: HttpRange {
                start: b.0,
                end: b.1,
            },
        };
        // Three side by side (one overlapping), then a gap, then one alone.
        let mut map = HashMap::new();
        map.insert(
            x,
            vec![
                entry((2, 3), (100, 149)),
                entry((0, 2), (0, 99)),
                entry((1, 3), (50, 149)),
                entry((5, 6), (200, 249)),
            ],
        );
        share_runs(&mut map, |_, b| format!("run-{}-{}", b.start, b.end));
        let got: Vec<(String, u64, u64)> = map[&x]
            .iter()
            .map(|e| (e.url.clone(), e.url_range.start, e.url_range.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("run-0-149".into(), 0, 99),
                ("run-0-149".into(), 50, 149),
                ("run-0-149".into(), 100, 149),
                ("own-200".into(), 200, 249),
            ]
        );
    }
}
