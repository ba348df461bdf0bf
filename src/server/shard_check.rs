//! Validating an uploaded shard against what is stored, before anything becomes visible.
//!
//! A shard is a claim: "these files are made of these chunk ranges". The server checks the
//! claim against the xorbs it holds: every referenced xorb is stored, every term's chunk
//! range lies inside its xorb with the right unpacked length, every verification entry is
//! the hash of the stored chunk hashes of its range (proof that the uploader knew them),
//! the file hash is recomputed from those chunks, sha256 metadata is present, and every
//! CAS block describes its xorb exactly. On a scoped server (`--dedup-scope`) a xorb that no
//! repository of the uploader's scope holds counts as not stored, before anything about it
//! is compared or reported.

use std::collections::HashMap;
use std::sync::Arc;

use crate::server::error::{ServerError, ServerResult};
use crate::server::index::{DedupDomain, FileRecord, Index, ShardRegistration, XorbMeta};
use crate::server::repo_name::RepoName;
use crate::xet::hash::{file_hash, merkle_as_sha256, verification_hash};
use crate::xet::shard::{parse_shard, FileInfo, FooterOptions, Shard, XorbBlock};
use crate::xet::MerkleHash;

/// A shard that passed validation: what to register, and its stored form.
pub struct ValidatedShard {
    pub registration: ShardRegistration,
    pub stored_bytes: Vec<u8>,
}

fn bad(msg: String) -> ServerError {
    ServerError::BadRequest(format!("invalid shard: {msg}"))
}

/// Layouts of referenced xorbs, loaded once each.
struct Xorbs<'a> {
    index: &'a dyn Index,
    domain: &'a DedupDomain,
    loaded: HashMap<MerkleHash, Arc<XorbMeta>>,
}

impl Xorbs<'_> {
    fn get(
        &mut self,
        hash: &MerkleHash,
        used_by: &dyn Fn() -> String,
    ) -> ServerResult<Arc<XorbMeta>> {
        if let Some(meta) = self.loaded.get(hash) {
            return Ok(meta.clone());
        }
        let meta = match self.index.xorb(hash)? {
            Some(meta) if self.index.xorb_in_domain(hash, self.domain)? => meta,
            // The same answer whether another scope holds it or nobody does.
            _ => return Err(bad(format!("{} references xorb {hash}, which is not stored {}; upload the xorb before the shard", used_by(), self.domain))),
        };
        self.loaded.insert(*hash, meta.clone());
        Ok(meta)
    }
}

/// Parses and validates an uploaded shard (the upload form; a stored form is accepted too).
pub fn validate_upload(
    index: &dyn Index,
    bytes: &[u8],
    repo: &RepoName,
    domain: &DedupDomain,
) -> ServerResult<ValidatedShard> {
    let parsed = parse_shard(bytes).map_err(|e| ServerError::BadRequest(e.to_string()))?;
    let problems = parsed.lookup_problems();
    if !problems.is_empty() {
        return Err(bad(problems.join("; ")));
    }
    let shard_hash = MerkleHash::from_bytes(*blake3::hash(bytes).as_bytes());
    validate_shard(
        index,
        parsed.shard,
        repo,
        domain,
        shard_hash,
        bytes.len() as u64,
    )
}

/// Validates a shard the server built itself (from an LFS upload), like any other.
pub fn validate_built(
    index: &dyn Index,
    shard: Shard,
    repo: &RepoName,
    domain: &DedupDomain,
) -> ServerResult<ValidatedShard> {
    let bytes = shard.to_upload_bytes();
    let shard_hash = MerkleHash::from_bytes(*blake3::hash(&bytes).as_bytes());
    validate_shard(index, shard, repo, domain, shard_hash, bytes.len() as u64)
}

/// Validates shard contents.
pub fn validate_shard(
    index: &dyn Index,
    shard: Shard,
    repo: &RepoName,
    domain: &DedupDomain,
    shard_hash: MerkleHash,
    shard_len: u64,
) -> ServerResult<ValidatedShard> {
    let mut xorbs = Xorbs {
        index,
        domain,
        loaded: HashMap::new(),
    };
    for block in &shard.xorbs {
        check_xorb_block(&mut xorbs, block)?;
    }
    let mut files = Vec::with_capacity(shard.files.len());
    let mut first_chunks = Vec::new();
    for file in &shard.files {
        let (record, first_chunk) = check_file(&mut xorbs, file)?;
        if let Some(chunk) = first_chunk {
            first_chunks.push((chunk, record.file_hash));
        }
        files.push(record);
    }
    let stored_bytes = shard.to_stored_bytes(&FooterOptions::default());
    Ok(ValidatedShard {
        registration: ShardRegistration {
            shard_hash,
            shard_len,
            repo: repo.clone(),
            files,
            first_chunks,
        },
        stored_bytes,
    })
}

fn check_xorb_block(xorbs: &mut Xorbs, block: &XorbBlock) -> ServerResult<()> {
    let h = block.xorb_hash;
    let meta = xorbs.get(&h, &|| "a CAS block".to_string())?;
    if block.chunks.len() != meta.num_chunks() {
        return Err(bad(format!(
            "CAS block for xorb {h} lists {} chunks, the xorb has {}",
            block.chunks.len(),
            meta.num_chunks()
        )));
    }
    for (i, chunk) in block.chunks.iter().enumerate() {
        let stored = meta.footer.chunk_hashes[i];
        if chunk.chunk_hash != stored || chunk.unpacked_bytes != meta.chunk_len(i as u32) {
            return Err(bad(format!(
                "CAS block for xorb {h}, chunk {i}: {} ({} bytes) does not match the stored chunk {stored} ({} bytes)",
                chunk.chunk_hash,
                chunk.unpacked_bytes,
                meta.chunk_len(i as u32)
            )));
        }
    }
    if u64::from(block.num_bytes_in_xorb) != meta.footer.unpacked_len() {
        return Err(bad(format!(
            "CAS block for xorb {h} says {} uncompressed bytes, the xorb has {}",
            block.num_bytes_in_xorb,
            meta.footer.unpacked_len()
        )));
    }
    // The deployed client writes 0 here; anything else must be the real size.
    if block.num_bytes_on_disk != 0 && u64::from(block.num_bytes_on_disk) != meta.stored_len {
        return Err(bad(format!(
            "CAS block for xorb {h} says {} bytes on disk, the stored xorb has {}",
            block.num_bytes_on_disk, meta.stored_len
        )));
    }
    Ok(())
}

/// Checks one file; returns its record and its first chunk's hash (None for an empty file).
fn check_file(
    xorbs: &mut Xorbs,
    file: &FileInfo,
) -> ServerResult<(FileRecord, Option<MerkleHash>)> {
    let f = file.file_hash;
    let sha256 = file.sha256.ok_or_else(|| {
        bad(format!(
            "file {f} has no sha256 metadata extension; it is required to serve git-lfs"
        ))
    })?;
    let verification = match &file.verification {
        Some(v) => v.as_slice(),
        None if file.terms.is_empty() => &[],
        None => return Err(bad(format!("file {f} has no verification entries"))),
    };
    let mut chunks: Vec<(MerkleHash, u64)> = Vec::new();
    let mut size = 0u64;
    let mut first_chunk = None;
    for (i, term) in file.terms.iter().enumerate() {
        let meta = xorbs.get(&term.xorb_hash, &|| format!("file {f} term {i}"))?;
        if term.chunk_end as usize > meta.num_chunks() || term.chunk_start >= term.chunk_end {
            return Err(bad(format!(
                "file {f} term {i}: chunks {}..{} are not inside xorb {} of {} chunks",
                term.chunk_start,
                term.chunk_end,
                term.xorb_hash,
                meta.num_chunks()
            )));
        }
        let unpacked: u64 = meta
            .chunks(term.chunk_start, term.chunk_end)
            .map(|(_, n)| n)
            .sum();
        if unpacked != u64::from(term.unpacked_bytes) {
            return Err(bad(format!(
                "file {f} term {i}: says {} unpacked bytes, chunks {}..{} of xorb {} hold {unpacked}",
                term.unpacked_bytes, term.chunk_start, term.chunk_end, term.xorb_hash
            )));
        }
        let range_hashes =
            &meta.footer.chunk_hashes[term.chunk_start as usize..term.chunk_end as usize];
        let expected = verification_hash(range_hashes);
        if verification[i] != expected {
            return Err(bad(format!(
                "file {f} term {i}: verification hash {} does not match the stored chunks (expected {expected})",
                verification[i]
            )));
        }
        if first_chunk.is_none() {
            first_chunk = Some(range_hashes[0]);
        }
        chunks.extend(meta.chunks(term.chunk_start, term.chunk_end));
        size += unpacked;
    }
    let computed = file_hash(chunks.iter().copied());
    if computed != f {
        return Err(bad(format!(
            "file hash {f} does not match its chunks, which hash to {computed}"
        )));
    }
    let record = FileRecord {
        file_hash: f,
        size,
        sha256: merkle_as_sha256(&sha256),
        terms: file.terms.clone(),
    };
    Ok((record, first_chunk))
}
