//! Reconstruction records: for each file this client uploaded or downloaded, which xorb
//! chunks it is made of and where each chunk sits in the file. A later download can then
//! take chunks from a local copy of that file (for example the previous version of a model
//! in `.git/lfs/objects`) instead of fetching them.
//!
//! Stored in `<metadata dir>/files/<file hash>` (binary, below), with
//! `files/by-sha256/<sha256>` naming the file hash of each record that has one.
//!
//! ```text
//! "XETREC01" | file hash (32) | has sha256 (1) | sha256 (32) | term count (u32)
//! per term: xorb hash (32) | first chunk index (u32) | chunk count (u32)
//!           | per chunk: chunk hash (32) | size (u32)
//! ```

use std::path::{Path, PathBuf};

use crate::client::error::Result;
use crate::client::shard_cache::write_atomically;
use crate::xet::hash::sha256_hex;
use crate::xet::MerkleHash;

const MAGIC: &[u8; 8] = b"XETREC01";

/// A run of consecutive chunks of one xorb, as used by a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordTerm {
    pub xorb: MerkleHash,
    pub start: u32,
    /// (chunk hash, uncompressed size) of chunks `start..start + chunks.len()`.
    pub chunks: Vec<(MerkleHash, u32)>,
}

/// How a file is made of xorb chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub file_hash: MerkleHash,
    pub sha256: Option<[u8; 32]>,
    pub terms: Vec<RecordTerm>,
}

impl FileRecord {
    pub fn size(&self) -> u64 {
        self.terms
            .iter()
            .flat_map(|t| t.chunks.iter())
            .map(|c| u64::from(c.1))
            .sum()
    }

    pub fn encode(&self) -> Vec<u8> {
        let n: usize = self.terms.iter().map(|t| 40 + 36 * t.chunks.len()).sum();
        let mut out = Vec::with_capacity(77 + n);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(self.file_hash.as_bytes());
        out.push(u8::from(self.sha256.is_some()));
        out.extend_from_slice(&self.sha256.unwrap_or([0; 32]));
        out.extend_from_slice(&(self.terms.len() as u32).to_le_bytes());
        for t in &self.terms {
            out.extend_from_slice(t.xorb.as_bytes());
            out.extend_from_slice(&t.start.to_le_bytes());
            out.extend_from_slice(&(t.chunks.len() as u32).to_le_bytes());
            for (hash, size) in &t.chunks {
                out.extend_from_slice(hash.as_bytes());
                out.extend_from_slice(&size.to_le_bytes());
            }
        }
        out
    }

    /// Parses a record; any inconsistency is an error (the file is only a cache).
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut r = Reader { bytes, pos: 0 };
        if r.take(8)? != MAGIC {
            return Err("not a reconstruction record".into());
        }
        let file_hash = r.hash()?;
        let has_sha = r.take(1)?[0];
        let sha: [u8; 32] = r.take(32)?.try_into().expect("32 bytes");
        let n_terms = r.u32()?;
        let mut terms = Vec::new();
        for _ in 0..n_terms {
            let xorb = r.hash()?;
            let start = r.u32()?;
            let n = r.u32()? as usize;
            if n.checked_mul(36).is_none_or(|b| b > r.remaining()) {
                return Err("chunk count exceeds the record".into());
            }
            let mut chunks = Vec::with_capacity(n);
            for _ in 0..n {
                chunks.push((r.hash()?, r.u32()?));
            }
            terms.push(RecordTerm {
                xorb,
                start,
                chunks,
            });
        }
        if r.remaining() != 0 {
            return Err("trailing bytes after the record".into());
        }
        Ok(FileRecord {
            file_hash,
            sha256: (has_sha == 1).then_some(sha),
            terms,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("record is truncated")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn hash(&mut self) -> std::result::Result<MerkleHash, String> {
        Ok(MerkleHash::from_bytes(
            self.take(32)?.try_into().expect("32 bytes"),
        ))
    }
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// The records of one metadata directory.
#[derive(Debug, Clone)]
pub struct RecordStore {
    dir: PathBuf,
}

impl RecordStore {
    pub fn new(metadata_dir: &Path) -> Self {
        RecordStore {
            dir: metadata_dir.join("files"),
        }
    }

    pub fn save(&self, record: &FileRecord) -> Result<()> {
        write_atomically(&self.dir, &record.file_hash.to_hex(), &record.encode())?;
        if let Some(sha) = &record.sha256 {
            write_atomically(
                &self.dir.join("by-sha256"),
                &sha256_hex(sha),
                record.file_hash.to_hex().as_bytes(),
            )?;
        }
        Ok(())
    }

    /// The record of a file, if there is a readable one.
    pub fn load(&self, file_hash: &MerkleHash) -> Option<FileRecord> {
        let path = self.dir.join(file_hash.to_hex());
        let bytes = std::fs::read(&path).ok()?;
        match FileRecord::decode(&bytes) {
            Ok(r) if r.file_hash == *file_hash => Some(r),
            Ok(_) | Err(_) => {
                tracing::warn!(
                    "ignoring a damaged reconstruction record {}",
                    path.display()
                );
                None
            }
        }
    }

    /// The XET hash of the file with this sha256, if a record of it exists.
    pub fn file_hash_for_sha256(&self, sha256: &[u8; 32]) -> Option<MerkleHash> {
        let text =
            std::fs::read_to_string(self.dir.join("by-sha256").join(sha256_hex(sha256))).ok()?;
        MerkleHash::from_hex(text.trim()).ok()
    }
}

/// Saves a record, logging instead of failing: records only speed things up.
pub fn save_quietly(store: Option<&RecordStore>, record: &FileRecord) {
    if let Some(store) = store {
        if let Err(e) = store.save(record) {
            tracing::warn!(
                "could not save the reconstruction record of {}: {e}",
                record.file_hash
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xet::hash::chunk_hash;

    fn sample() -> FileRecord {
        FileRecord {
            file_hash: chunk_hash(b"f"),
            sha256: Some([7; 32]),
            terms: vec![
                RecordTerm {
                    xorb: chunk_hash(b"x"),
                    start: 3,
                    chunks: vec![(chunk_hash(b"a"), 10), (chunk_hash(b"b"), 20)],
                },
                RecordTerm {
                    xorb: chunk_hash(b"y"),
                    start: 0,
                    chunks: vec![(chunk_hash(b"c"), 5)],
                },
            ],
        }
    }

    #[test]
    fn round_trip_and_lookup_by_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::new(dir.path());
        let record = sample();
        assert_eq!(record.size(), 35);
        store.save(&record).unwrap();
        assert_eq!(store.load(&record.file_hash), Some(record.clone()));
        assert_eq!(store.file_hash_for_sha256(&[7; 32]), Some(record.file_hash));
        assert_eq!(store.load(&chunk_hash(b"other")), None);
    }

    #[test]
    fn damaged_records_are_rejected_without_panicking() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(FileRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[8 + 32 + 33 + 4 + 36..8 + 32 + 33 + 4 + 40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(FileRecord::decode(&huge).is_err());
        let mut extra = bytes;
        extra.push(0);
        assert!(FileRecord::decode(&extra).is_err());
    }
}
