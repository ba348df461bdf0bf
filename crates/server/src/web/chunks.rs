//! What the pages ask of the index and the store: which LFS objects this repository holds
//! in XET (their file records), the chunk sizes their costs are counted in, and the first
//! bytes of an object (a safetensors header) read through its reconstruction, never the
//! whole object. Blocking index calls run on blocking threads.

use std::collections::HashMap;
use std::ops::Range;

use http_body_util::BodyExt;

use git_xet_web::costs::{self, ChunkSizes, Cost, Term};

use crate::error::{ServerError, ServerResult};
use crate::reconstruct::plan;
use crate::state::{blocking, SharedState};
use git_xet_index::FileRecord;
use git_xet_index::RepoName;

/// Distinct xorbs whose chunk sizes one page reads; past this, costs are counted in
/// proportion to chunk counts (costs.rs).
const MAX_XORBS: usize = 2000;

/// The file records `repo` holds for these sha256s, in order (one query).
pub async fn records(
    state: &SharedState,
    repo: &RepoName,
    sha256s: Vec<[u8; 32]>,
) -> ServerResult<Vec<Option<FileRecord>>> {
    if sha256s.is_empty() {
        return Ok(Vec::new());
    }
    let (index, repo) = (state.index.clone(), repo.clone());
    blocking(move || Ok(index.repo_files_by_sha256(&repo, &sha256s)?)).await
}

/// The costs of `versions` (oldest first; `None` for one the server does not hold), each
/// against the union of the held versions before it.
pub async fn version_costs(
    state: &SharedState,
    versions: Vec<Option<FileRecord>>,
) -> ServerResult<Vec<Option<Cost>>> {
    let held: Vec<Vec<FileRecord>> = versions.iter().flatten().map(|r| vec![r.clone()]).collect();
    let mut computed = push_costs(state, held).await?.into_iter();
    Ok(versions
        .iter()
        .map(|v| v.as_ref().and_then(|_| computed.next()))
        .collect())
}

/// The costs of groups of files (a push's new objects), oldest first, each group against
/// every group before it.
pub async fn push_costs(
    state: &SharedState,
    groups: Vec<Vec<FileRecord>>,
) -> ServerResult<Vec<Cost>> {
    let index = state.index.clone();
    blocking(move || {
        let mut sizes = ChunkSizes::new();
        for term in groups.iter().flatten().flat_map(|r| &r.terms) {
            let key = *term.xorb_hash.as_bytes();
            if sizes.len() >= MAX_XORBS || sizes.contains_key(&key) {
                continue;
            }
            if let Some(meta) = index.xorb(&term.xorb_hash)? {
                let lens = (0..meta.num_chunks() as u32).map(|i| meta.chunk_len(i));
                sizes.insert(key, lens.collect());
            }
        }
        let versions: Vec<Vec<Term>> = groups
            .iter()
            .map(|g| g.iter().flat_map(terms).collect())
            .collect();
        Ok(costs::version_costs(&versions, &sizes))
    })
    .await
}

fn terms(record: &FileRecord) -> Vec<Term> {
    record
        .terms
        .iter()
        .map(|t| Term {
            xorb: *t.xorb_hash.as_bytes(),
            start: t.chunk_start,
            end: t.chunk_end,
            bytes: u64::from(t.unpacked_bytes),
        })
        .collect()
}

/// Bytes `range` of a registered file, read through its reconstruction: only the xorbs of
/// the terms the range touches are looked up, only their chunks read (and each checked
/// against its hash, as every download is).
pub async fn file_bytes(
    state: &SharedState,
    file: &FileRecord,
    range: Range<u64>,
) -> ServerResult<Vec<u8>> {
    let range = range.start.min(file.size)..range.end.min(file.size);
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let (index, owned) = (state.index.clone(), file.clone());
    let end = range.end;
    let metas = blocking(move || {
        let mut metas = HashMap::new();
        let mut at = 0u64;
        for term in &owned.terms {
            if at >= end {
                break;
            }
            at += u64::from(term.unpacked_bytes);
            if let std::collections::hash_map::Entry::Vacant(slot) = metas.entry(term.xorb_hash) {
                let meta = index.xorb(&term.xorb_hash)?.ok_or_else(|| {
                    ServerError::internal(format!("xorb {} is not indexed", term.xorb_hash))
                })?;
                slot.insert(meta);
            }
        }
        Ok(metas)
    })
    .await?;
    let len = range.end - range.start;
    let planned = plan(file, &metas, range)?;
    let body = crate::file_stream::stream_plan(state.clone(), planned, len, None);
    let bytes = body
        .collect()
        .await
        .map_err(|e| ServerError::internal(format!("reading a file's first bytes: {e}")))?
        .to_bytes();
    Ok(bytes.to_vec())
}
