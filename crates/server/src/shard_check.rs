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

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::{ServerError, ServerResult};
use git_xet_core::hash::{file_hash_from_root, merkle_as_sha256, verification_hash};
use git_xet_core::merkle::MerkleBuilder;
use git_xet_core::shard::{read_shard, FileInfo, FooterOptions, Shard, XorbBlock};
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{DedupDomain, FileRecord, Index, ShardRegistration, XorbMeta};

/// A shard that passed validation: what to register, and its stored form.
pub struct ValidatedShard {
    pub registration: ShardRegistration,
    pub stored_bytes: Vec<u8>,
}

fn bad(msg: String) -> ServerError {
    ServerError::BadRequest(format!("invalid shard: {msg}"))
}

/// Chunks the files of one shard may reference in all, counting repeats: validation hashes
/// each (about 0.2 µs), whatever the shard's size, so a shard claiming more is refused
/// before any work. 2 TiB of files at the average chunk size; a 2 MB shard repeating a xorb
/// of 8192 chunks 20,000 times claims 160 Mi.
pub const MAX_SHARD_CHUNK_REFS: u64 = 1 << 25;
/// Per file, the chunks of its distinct xorbs: planning the file's whole reconstruction holds
/// their layouts (about 40 bytes a chunk), so this bounds its memory (about 170 MB).
pub const MAX_FILE_LAYOUT_CHUNKS: u64 = 1 << 22;
/// Terms of one file: a reconstruction answer lists each (a few hundred bytes of JSON).
pub const MAX_FILE_TERMS: usize = 1 << 16;

/// Layouts of referenced xorbs, asked of the index each time: its cache is bounded, a map
/// here would hold every distinct xorb a shard names at once.
struct Xorbs<'a> {
    index: &'a dyn Index,
    domain: &'a DedupDomain,
}

impl Xorbs<'_> {
    fn get(
        &mut self,
        hash: &MerkleHash,
        used_by: &dyn Fn() -> String,
    ) -> ServerResult<Arc<XorbMeta>> {
        match self.index.xorb(hash)? {
            Some(meta) if self.index.xorb_in_domain(hash, self.domain)? => Ok(meta),
            // The same answer whether another scope holds it or nobody does.
            _ => Err(bad(format!("{} references xorb {hash}, which is not stored {}; upload the xorb before the shard", used_by(), self.domain))),
        }
    }
}

/// Refuses a shard whose files claim more than [`MAX_SHARD_CHUNK_REFS`] chunks, from the
/// terms alone (before anything is looked up or hashed).
fn check_chunk_refs(shard: &Shard) -> ServerResult<()> {
    let claimed: u64 = shard
        .files
        .iter()
        .flat_map(|f| &f.terms)
        .map(|t| u64::from(t.chunk_end.saturating_sub(t.chunk_start)))
        .sum();
    if claimed > MAX_SHARD_CHUNK_REFS {
        return Err(ServerError::PayloadTooLarge(format!(
            "invalid shard: its files reference {claimed} chunks, more than the {MAX_SHARD_CHUNK_REFS} one shard may; split the files over several shards"
        )));
    }
    Ok(())
}

/// Parses and validates an uploaded shard (the upload form; a stored form is accepted too)
/// from `reader` (a staging file: only the parsed records are held), whose BLAKE3 hash and
/// length the caller computed as it arrived.
pub fn validate_read(
    index: &dyn Index,
    reader: &mut impl std::io::Read,
    shard_hash: MerkleHash,
    shard_len: u64,
    repo: &RepoName,
    domain: &DedupDomain,
) -> ServerResult<ValidatedShard> {
    let parsed = read_shard(reader).map_err(|e| ServerError::BadRequest(e.to_string()))?;
    let problems = parsed.lookup_problems();
    if !problems.is_empty() {
        return Err(bad(problems.join("; ")));
    }
    validate_shard(index, parsed.shard, repo, domain, shard_hash, shard_len)
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
    check_chunk_refs(&shard)?;
    let mut xorbs = Xorbs { index, domain };
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
            domain: domain.clone(),
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
    if file.terms.len() > MAX_FILE_TERMS {
        return Err(ServerError::PayloadTooLarge(format!(
            "invalid shard: file {f} has {} terms, more than the {MAX_FILE_TERMS} a reconstruction may list",
            file.terms.len()
        )));
    }
    if verification.len() != file.terms.len() {
        return Err(bad(format!(
            "file {f} has {} verification entries for {} terms",
            verification.len(),
            file.terms.len()
        )));
    }
    // The file hash streams: memory stays a few kilobytes however many chunks it covers.
    let mut merkle = MerkleBuilder::new();
    let mut distinct = HashSet::new();
    let mut layout_chunks = 0u64;
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
        if distinct.insert(term.xorb_hash) {
            layout_chunks += meta.num_chunks() as u64;
            if layout_chunks > MAX_FILE_LAYOUT_CHUNKS {
                return Err(ServerError::PayloadTooLarge(format!(
                    "invalid shard: file {f} uses xorbs of more than {MAX_FILE_LAYOUT_CHUNKS} chunks in all, too many to plan its reconstruction"
                )));
            }
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
        for (hash, len) in meta.chunks(term.chunk_start, term.chunk_end) {
            merkle.push(hash, len);
        }
        size += unpacked;
    }
    let computed = file_hash_from_root(merkle.len(), merkle.finish());
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
