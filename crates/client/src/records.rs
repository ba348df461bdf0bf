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

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{CacheDamage, ClientError, Result};
use crate::shard_cache::write_atomically;
use git_xet_core::hash::sha256_hex;
use git_xet_core::MerkleHash;

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
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, CacheDamage> {
        let mut r = Reader { bytes, pos: 0 };
        if r.take(8)? != MAGIC {
            return Err(CacheDamage::NotOne("reconstruction record"));
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
                return Err(CacheDamage::Count {
                    count: n,
                    bytes: r.remaining(),
                });
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
            return Err(CacheDamage::Trailing);
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
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], CacheDamage> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(CacheDamage::Truncated)?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> std::result::Result<u32, CacheDamage> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn hash(&mut self) -> std::result::Result<MerkleHash, CacheDamage> {
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

/// A file's chunks as they go by, spooled to an unnamed temporary file (36 bytes a chunk),
/// so that recording a reconstruction costs no memory however large the file.
pub struct ChunkLog {
    out: BufWriter<File>,
    count: u64,
}

impl ChunkLog {
    pub fn new() -> std::io::Result<Self> {
        Ok(ChunkLog {
            out: BufWriter::with_capacity(64 * 1024, tempfile::tempfile()?),
            count: 0,
        })
    }

    pub fn push(&mut self, hash: &MerkleHash, size: u32) -> std::io::Result<()> {
        self.out.write_all(hash.as_bytes())?;
        self.out.write_all(&size.to_le_bytes())?;
        self.count += 1;
        Ok(())
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

impl RecordStore {
    /// Saves the record of a file from its terms — (xorb, first chunk, chunk count) — and the
    /// log of its chunks, streaming.
    pub fn save_from_log(
        &self,
        file_hash: &MerkleHash,
        sha256: Option<[u8; 32]>,
        terms: &[(MerkleHash, u32, u32)],
        log: ChunkLog,
    ) -> Result<()> {
        let fail =
            |e: std::io::Error| ClientError::io("writing a reconstruction record", &self.dir, e);
        let total: u64 = terms.iter().map(|t| u64::from(t.2)).sum();
        if total != log.count {
            return Err(ClientError::Aborted(format!(
                "internal error: {} chunks logged for terms of {total} chunks",
                log.count
            )));
        }
        let mut chunks = log.out.into_inner().map_err(|e| fail(e.into_error()))?;
        chunks.seek(SeekFrom::Start(0)).map_err(fail)?;
        let mut chunks = BufReader::with_capacity(64 * 1024, chunks);
        std::fs::create_dir_all(&self.dir).map_err(fail)?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(fail)?;
        let mut out = BufWriter::with_capacity(64 * 1024, tmp);
        out.write_all(MAGIC).map_err(fail)?;
        out.write_all(file_hash.as_bytes()).map_err(fail)?;
        out.write_all(&[u8::from(sha256.is_some())]).map_err(fail)?;
        out.write_all(&sha256.unwrap_or([0; 32])).map_err(fail)?;
        out.write_all(&(terms.len() as u32).to_le_bytes())
            .map_err(fail)?;
        let mut chunk = [0u8; 36];
        for (xorb, start, n) in terms {
            out.write_all(xorb.as_bytes()).map_err(fail)?;
            out.write_all(&start.to_le_bytes()).map_err(fail)?;
            out.write_all(&n.to_le_bytes()).map_err(fail)?;
            for _ in 0..*n {
                chunks.read_exact(&mut chunk).map_err(fail)?;
                out.write_all(&chunk).map_err(fail)?;
            }
        }
        let tmp = out.into_inner().map_err(|e| fail(e.into_error()))?;
        let path = self.dir.join(file_hash.to_hex());
        tmp.persist(&path).map_err(|e| fail(e.error))?;
        if let Some(sha) = &sha256 {
            let by_sha = self.dir.join("by-sha256");
            write_atomically(&by_sha, &sha256_hex(sha), file_hash.to_hex().as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;

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
    fn records_stream_from_a_chunk_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::new(dir.path());
        let record = sample();
        let mut log = ChunkLog::new().unwrap();
        for t in &record.terms {
            for (h, n) in &t.chunks {
                log.push(h, *n).unwrap();
            }
        }
        let terms: Vec<_> = record
            .terms
            .iter()
            .map(|t| (t.xorb, t.start, t.chunks.len() as u32))
            .collect();
        store
            .save_from_log(&record.file_hash, record.sha256, &terms, log)
            .unwrap();
        assert_eq!(store.load(&record.file_hash), Some(record.clone()));
        assert_eq!(store.file_hash_for_sha256(&[7; 32]), Some(record.file_hash));
        let short = ChunkLog::new().unwrap();
        assert!(store
            .save_from_log(&record.file_hash, None, &terms, short)
            .is_err());
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
