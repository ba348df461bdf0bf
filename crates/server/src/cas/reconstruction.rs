//! `GET /v1/reconstructions/{file_hash}` with optional `Range`: the terms overlapping the
//! range and signed, expiring fetch URLs for their xorb bytes. `GET /v2/reconstructions/...`
//! (what hf-xet 1.8 asks first) answers the same plan in the v2 shape. `GET
//! /v1/reconstructions?file_id=..&file_id=..` answers many whole files at once (a clone of
//! many small files would otherwise spend a round trip on each).

use std::collections::HashSet;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::Json;

use crate::auth::{now_secs, Scope};
use crate::body::parse_range;
use crate::cas::parse_hash;
use crate::error::{ServerError, ServerResult};
use crate::reconstruct::{load_metas, plan, to_reconstruction};
use crate::signing::{fetch_url, Grant};
use crate::state::{blocking, SharedState};
use crate::storage::ObjectKey;
use git_xet_core::reconstruction::{
    BatchReconstruction, FetchInfo, HttpRange, Reconstruction, ReconstructionV2,
};
use git_xet_core::MerkleHash;

/// Files one batch query may name (a client sends one Batch API answer's worth, 100): 500
/// ids make a 37 KB URL, well under the 64 KiB the `http` crate allows a URI.
pub const MAX_BATCH_FILES: usize = 500;

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

/// Whole-file reconstructions of the repository's files among the `file_id`s; the others
/// are left out, as the single query answers 404 for them.
pub async fn get_batch(
    State(state): State<SharedState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ServerResult<Json<BatchReconstruction>> {
    let access = state.authorize_cas(&headers, Scope::Read)?;
    let files = batch_file_ids(query.as_deref().unwrap_or(""))?;
    let index = state.index.clone();
    let repo = access.repo.clone();
    let found = blocking(move || {
        let mut found = Vec::new();
        for file_hash in files {
            if let Some(file) = index.repo_file(&repo, &file_hash)? {
                let metas = load_metas(&*index, &file)?;
                found.push((file_hash, file, metas));
            }
        }
        Ok(found)
    })
    .await?;
    let signer = Signer::new(&state, &headers, access);
    let mut batch = BatchReconstruction::default();
    for (file_hash, file, metas) in found {
        let plan = if file.size == 0 {
            Default::default()
        } else {
            plan(&file, &metas, 0..file.size)?
        };
        let one = signer.answer(&state, &plan).await?;
        for (xorb, infos) in one.fetch_info {
            let entries = batch.fetch_info.entry(xorb).or_default();
            for info in infos {
                if !entries.iter().any(|e| e.range == info.range) {
                    entries.push(info);
                }
            }
        }
        batch.files.insert(file_hash, one.terms);
    }
    if !state.config.presign {
        share_runs(&mut batch.fetch_info, |xorb, bytes| {
            signer.url(&state, xorb, bytes)
        });
    }
    Ok(Json(batch))
}

/// The entries of one xorb whose bytes touch or overlap form a run (small files uploaded
/// together sit side by side in shared xorbs); every entry of a run of two or more gets the
/// one URL that grants the run's bytes, keeping its own `url_range`. A client fetching
/// entry by entry sends the same requests as before; one that sees the shared URL may fetch
/// the run with one ranged GET. Only touching bytes are joined, so a URL grants no byte that
/// no file of the answer needs.
fn share_runs(
    fetch_info: &mut std::collections::HashMap<MerkleHash, Vec<FetchInfo>>,
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
struct Signer {
    base: String,
    now: u64,
    expires: u64,
    token_id: String,
}

impl Signer {
    fn new(state: &SharedState, headers: &HeaderMap, access: crate::auth::Access) -> Signer {
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
    fn url(&self, state: &SharedState, xorb: &MerkleHash, bytes: HttpRange) -> String {
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
            presign(state, &mut answer, self.expires.saturating_sub(self.now)).await?;
        }
        Ok(answer)
    }
}

/// With `--presign`, replaces the URLs by ones that fetch each entry's bytes straight from
/// the object store (signed for that `Range` only); keeps this server's URLs for a store
/// without such URLs. A store cannot see revocations: these URLs live out their TTL.
async fn presign(state: &SharedState, answer: &mut Reconstruction, ttl: u64) -> ServerResult<()> {
    let ttl = std::time::Duration::from_secs(ttl.max(1));
    for (hash, infos) in answer.fetch_info.iter_mut() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_queries_name_one_to_a_thousand_distinct_files() {
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
        let mut map = std::collections::HashMap::new();
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
