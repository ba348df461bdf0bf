//! How index rows are encoded, shared by every backend: hashes and sha256 digests as
//! 32-byte blobs, chunk tables as little-endian u32 blobs, the chunk key as the hash's
//! first 8 bytes.

use crate::gc::Sha256Claim;
use crate::repo_name::RepoName;
use crate::{decode_terms, FileRecord, IndexError, IndexResult, XorbMeta};
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;

pub(crate) fn hash_from(bytes: Vec<u8>) -> IndexResult<MerkleHash> {
    MerkleHash::from_slice(&bytes)
        .ok_or_else(|| IndexError::Corrupt(format!("hash of {} bytes", bytes.len())))
}

pub(crate) fn sha256_from(bytes: &[u8]) -> IndexResult<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| IndexError::Corrupt(format!("sha256 of {} bytes", bytes.len())))
}

/// A `repo_files` row's claim: the repository's name and the sha256 it knows the file by.
pub(crate) fn sha256_claim(repo: &str, sha256: &[u8]) -> IndexResult<Sha256Claim> {
    Ok(Sha256Claim {
        repo: RepoName::parse(repo)
            .map_err(|e| IndexError::Corrupt(format!("repository name {repo:?}: {e}")))?,
        sha256: sha256_from(sha256)?,
    })
}

pub(crate) fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}

pub(crate) fn u32_blob(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(crate) fn hashes_blob(hashes: &[MerkleHash]) -> Vec<u8> {
    hashes.iter().flat_map(|h| *h.as_bytes()).collect()
}

/// Key of the chunk-location table: 8 bytes of the hash, confirmed against the xorb's
/// layout on lookup.
pub(crate) fn chunk_key(hash: &MerkleHash) -> i64 {
    hash.truncated() as i64
}

/// A chunk-location row's answer, once confirmed: its key is only 8 bytes of the hash, so
/// the xorb's layout (`meta`, if still stored) must hold `chunk_hash` at `index`.
pub(crate) fn confirmed_location(
    meta: Option<&XorbMeta>,
    chunk_hash: &MerkleHash,
    index: u32,
) -> Option<(MerkleHash, u32)> {
    let meta = meta?;
    (meta.footer.chunk_hashes.get(index as usize) == Some(chunk_hash))
        .then_some((meta.footer.hash, index))
}

/// A stored xorb's layout from its row.
pub(crate) fn xorb_meta(
    hash: &MerkleHash,
    stored_len: i64,
    hashes: &[u8],
    chunk_ends: &[u8],
    unpacked_ends: &[u8],
) -> IndexResult<XorbMeta> {
    let chunk_hashes: Vec<MerkleHash> = hashes
        .chunks_exact(32)
        .map(|h| MerkleHash::from_slice(h).expect("32 bytes"))
        .collect();
    let footer = XorbFooter {
        hash: *hash,
        chunk_hashes,
        chunk_ends: u32s(chunk_ends),
        unpacked_ends: u32s(unpacked_ends),
    };
    if footer.chunk_ends.len() != footer.num_chunks()
        || footer.unpacked_ends.len() != footer.num_chunks()
    {
        return Err(IndexError::Corrupt(format!(
            "xorb {hash} has inconsistent chunk tables"
        )));
    }
    Ok(XorbMeta {
        footer,
        stored_len: stored_len as u64,
    })
}

/// A `files` row: hash, size, sha256, terms.
pub(crate) type RawFile = (Vec<u8>, i64, Vec<u8>, Vec<u8>);

pub(crate) fn file_record(raw: RawFile) -> IndexResult<FileRecord> {
    let (hash, size, sha256, terms) = raw;
    Ok(FileRecord {
        file_hash: hash_from(hash)?,
        size: size as u64,
        sha256: sha256_from(&sha256)?,
        terms: decode_terms(&terms)?,
    })
}
