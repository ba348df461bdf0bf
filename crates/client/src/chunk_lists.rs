//! Chunk lists: the chunks (hash and size) of a local file whose content went by anyway
//! before it was uploaded. git-xet's clean filter chunks what `git add` stores, so a later
//! push of that file reads only its new chunks instead of chunking all of it again; for a
//! new version of a large file, that is a few MiB read instead of the whole file.
//!
//! Stored in `<metadata dir>/chunk-lists/<sha256>`:
//!
//! ```text
//! "XETCHL02" | sha256 (32) | file hash (32) | chunk count (u32)
//! per chunk: chunk hash (32) | size (u32)
//! BLAKE3 of everything before (32)
//! ```
//!
//! A list is only a cache and is checked when loaded: the checksum must match and the sizes
//! must add up to the size of the file it describes. The upload checks every chunk it
//! actually reads against the list. Lists written before the checksum (`XETCHL01`, no
//! trailer) are checked by recomputing the file hash from the chunk hashes instead, which
//! costs 3 ms for a 1 GiB file where the checksum costs 0.1 ms.

use std::path::{Path, PathBuf};

use crate::error::{CacheDamage, Result};
use crate::shard_cache::write_atomically;
use git_xet_core::hash::{file_hash, sha256_hex};
use git_xet_core::MerkleHash;

const MAGIC: &[u8; 8] = b"XETCHL02";
/// The first version: no checksum, checked through the file hash.
const MAGIC_V1: &[u8; 8] = b"XETCHL01";
const HEADER_LEN: usize = 8 + 32 + 32 + 4;
const ENTRY_LEN: usize = 36;
const CHECKSUM_LEN: usize = 32;

/// The chunks of one file, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkList {
    pub sha256: [u8; 32],
    pub file_hash: MerkleHash,
    pub chunks: Vec<(MerkleHash, u32)>,
}

impl ChunkList {
    pub fn size(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.1)).sum()
    }

    /// The file hash the chunk hashes give.
    pub fn computed_file_hash(&self) -> MerkleHash {
        file_hash(
            self.chunks
                .iter()
                .map(|&(hash, size)| (hash, u64::from(size))),
        )
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + ENTRY_LEN * self.chunks.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.sha256);
        out.extend_from_slice(self.file_hash.as_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for (hash, size) in &self.chunks {
            out.extend_from_slice(hash.as_bytes());
            out.extend_from_slice(&size.to_le_bytes());
        }
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    /// Parses and checks a list; any inconsistency is an error.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, CacheDamage> {
        const NOT_ONE: CacheDamage = CacheDamage::NotOne("chunk list");
        let magic = bytes.get(..8).ok_or(NOT_ONE)?;
        let v1 = magic == MAGIC_V1;
        if !v1 && magic != MAGIC {
            return Err(NOT_ONE);
        }
        let bytes = if v1 {
            bytes
        } else {
            let Some(split) = bytes.len().checked_sub(CHECKSUM_LEN) else {
                return Err(NOT_ONE);
            };
            let (content, checksum) = bytes.split_at(split);
            if blake3::hash(content).as_bytes() != checksum {
                return Err(CacheDamage::Checksum);
            }
            content
        };
        if bytes.len() < HEADER_LEN {
            return Err(NOT_ONE);
        }
        let sha256: [u8; 32] = bytes[8..40].try_into().expect("32 bytes");
        let file_hash = MerkleHash::from_bytes(bytes[40..72].try_into().expect("32 bytes"));
        let count = u32::from_le_bytes(bytes[72..76].try_into().expect("4 bytes")) as usize;
        let body = &bytes[HEADER_LEN..];
        if count.checked_mul(ENTRY_LEN) != Some(body.len()) {
            return Err(CacheDamage::Count {
                count,
                bytes: body.len(),
            });
        }
        let chunks = body
            .chunks_exact(ENTRY_LEN)
            .map(|e| {
                let hash = MerkleHash::from_bytes(e[..32].try_into().expect("32 bytes"));
                (
                    hash,
                    u32::from_le_bytes(e[32..].try_into().expect("4 bytes")),
                )
            })
            .collect();
        let list = ChunkList {
            sha256,
            file_hash,
            chunks,
        };
        if v1 && list.computed_file_hash() != file_hash {
            return Err(CacheDamage::Checksum);
        }
        Ok(list)
    }
}

/// The chunk lists of one metadata directory.
#[derive(Debug, Clone)]
pub struct ChunkListStore {
    dir: PathBuf,
}

impl ChunkListStore {
    pub fn new(metadata_dir: &Path) -> Self {
        ChunkListStore {
            dir: metadata_dir.join("chunk-lists"),
        }
    }

    fn path(&self, sha256: &[u8; 32]) -> PathBuf {
        self.dir.join(sha256_hex(sha256))
    }

    pub fn save(&self, list: &ChunkList) -> Result<()> {
        write_atomically(&self.dir, &sha256_hex(&list.sha256), &list.encode()).map(|_| ())
    }

    /// The list of the file with this sha256 and size, if a sound one is stored. A damaged
    /// or mismatched list is removed (it is only a cache).
    pub fn load(&self, sha256: &[u8; 32], size: u64) -> Option<ChunkList> {
        let path = self.path(sha256);
        let bytes = std::fs::read(&path).ok()?;
        match ChunkList::decode(&bytes) {
            Ok(list) if list.sha256 == *sha256 && list.size() == size => Some(list),
            Ok(_) => {
                tracing::warn!("removing a chunk list for another file: {}", path.display());
                self.remove(sha256);
                None
            }
            Err(e) => {
                tracing::warn!("removing a damaged chunk list {}: {e}", path.display());
                self.remove(sha256);
                None
            }
        }
    }

    pub fn remove(&self, sha256: &[u8; 32]) {
        let _ = std::fs::remove_file(self.path(sha256));
    }

    /// Removes the lists of files for which `keep` says no (say, objects no longer in the
    /// store), and leftovers of interrupted saves.
    pub fn prune(&self, keep: impl Fn(&[u8; 32]) -> bool) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let sha = git_xet_core::lfs::parse_oid(&name).ok();
            let stale = match sha {
                Some(sha) => !keep(&sha),
                None => name.starts_with(".tmp-") && is_old(&entry),
            };
            if stale {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// A temp file older than an hour is a leftover, not a save in progress.
fn is_old(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;

    fn sample() -> ChunkList {
        let mut list = ChunkList {
            sha256: [9; 32],
            file_hash: MerkleHash::ZERO,
            chunks: vec![(chunk_hash(b"a"), 10), (chunk_hash(b"b"), 20)],
        };
        list.file_hash = list.computed_file_hash();
        list
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkListStore::new(dir.path());
        let list = sample();
        assert_eq!(list.size(), 30);
        store.save(&list).unwrap();
        assert_eq!(store.load(&[9; 32], 30), Some(list));
        assert_eq!(store.load(&[8; 32], 30), None);
    }

    #[test]
    fn damaged_or_mismatched_lists_are_rejected_and_removed() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(ChunkList::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[bytes.len() - CHECKSUM_LEN - 1] ^= 1; // a chunk size
        assert!(ChunkList::decode(&flipped).is_err());
        let mut summed = flipped[..bytes.len() - CHECKSUM_LEN].to_vec();
        summed.extend_from_slice(blake3::hash(&summed).as_bytes());
        assert!(
            ChunkList::decode(&summed).is_ok(),
            "the checksum is what catches it"
        );
        let mut huge = bytes[..bytes.len() - CHECKSUM_LEN].to_vec();
        huge[72..76].copy_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(blake3::hash(&huge).as_bytes());
        assert!(ChunkList::decode(&huge).is_err());

        let dir = tempfile::tempdir().unwrap();
        let store = ChunkListStore::new(dir.path());
        store.save(&sample()).unwrap();
        assert_eq!(store.load(&[9; 32], 31), None, "wrong size");
        assert!(!store.path(&[9; 32]).exists());
        store.save(&sample()).unwrap();
        std::fs::write(store.path(&[9; 32]), &flipped).unwrap();
        assert_eq!(store.load(&[9; 32], 30), None, "damaged");
        assert!(!store.path(&[9; 32]).exists());
    }

    /// Lists saved before the checksum still load, checked through their file hash.
    #[test]
    fn first_version_lists_are_checked_by_their_file_hash() {
        let bytes = sample().encode();
        let mut v1 = bytes[..bytes.len() - CHECKSUM_LEN].to_vec();
        v1[..8].copy_from_slice(MAGIC_V1);
        assert_eq!(ChunkList::decode(&v1), Ok(sample()));
        let last = v1.len() - 1;
        v1[last] ^= 1; // a chunk size: the file hash no longer matches
        assert!(ChunkList::decode(&v1).is_err());
    }

    #[test]
    fn prune_keeps_only_what_it_is_told_to() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkListStore::new(dir.path());
        let mut other = sample();
        other.sha256 = [3; 32];
        store.save(&sample()).unwrap();
        store.save(&other).unwrap();
        std::fs::write(store.dir.join("unrelated"), b"x").unwrap();
        store.prune(|sha| *sha == [9; 32]);
        assert!(store.load(&[9; 32], 30).is_some());
        assert!(!store.path(&[3; 32]).exists());
        assert!(
            store.dir.join("unrelated").exists(),
            "only lists are touched"
        );
    }
}
