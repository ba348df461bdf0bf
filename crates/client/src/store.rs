//! The per-user chunk store: history kept as deduplicated chunks instead of whole copies.
//!
//! Layout under its root (one per user, shared by every clone):
//! - `chunks/<xorb hash>/<start>-<end>`: xorb ranges as fetched (compressed records), the
//!   [`ChunkCache`] layout and its write-then-rename discipline;
//! - `files/<file hash>` and `files/by-sha256/<sha256>`: per file, its reconstruction
//!   ([`RecordStore`]: terms and every chunk's hash and size), so that a file (an old
//!   version of an LFS object) can be rebuilt with no network.
//!
//! Every entry is immutable and published by rename, so several processes share the store
//! without a lock and without an index that could be torn. A rebuilt file is checked chunk by
//! chunk against its record and as a whole against its sha256 before it is renamed into place;
//! an entry holding a damaged chunk is deleted, so the next download fetches it again.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::Digest;

use crate::chunk_cache::ChunkCache;
use crate::error::{ClientError, Result};
use crate::records::{FileRecord, RecordStore, RecordTerm};
use git_xet_core::hash::chunk_hash;
use git_xet_core::reconstruction::ChunkRange;
use git_xet_core::xorb::{decode_chunk, ChunkHeader, CHUNK_HEADER_LEN};
use git_xet_core::MerkleHash;

/// 50 GiB: the store is the only local copy of old versions, so it is bounded generously.
pub const DEFAULT_STORE_BYTES: u64 = 50 * 1024 * 1024 * 1024;

/// The per-user store location: `$GIT_XET_STORE`, else `<data dir>/git-xet/store`
/// (`$XDG_DATA_HOME/git-xet/store` on Linux). Data, not cache: it may be the only copy.
pub fn default_store_root() -> Option<PathBuf> {
    std::env::var_os("GIT_XET_STORE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("", "", "git-xet").map(|d| d.data_dir().join("store"))
        })
}

/// The chunk store at one root.
#[derive(Debug, Clone)]
pub struct ChunkStore {
    root: PathBuf,
    chunks: Arc<ChunkCache>,
    records: RecordStore,
}

/// What a rebuild from local chunks came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebuilt {
    /// The file is at the output, verified.
    Done,
    /// No record of the file, or a chunk range is not in the store.
    Missing,
    /// A stored range was damaged; it is deleted (fetch the file again).
    Damaged(String),
}

impl ChunkStore {
    /// The directory of the chunk ranges under a store root.
    pub fn chunks_dir(root: &Path) -> PathBuf {
        root.join("chunks")
    }

    /// Opens (creating) the store at `root`, holding at most `max_bytes` of chunks.
    pub fn open(root: &Path, max_bytes: u64) -> Result<Self> {
        let chunks = ChunkCache::open_unscanned(&Self::chunks_dir(root), max_bytes)?;
        Ok(ChunkStore {
            root: root.to_path_buf(),
            chunks: Arc::new(chunks),
            records: RecordStore::new(root),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn chunks(&self) -> &Arc<ChunkCache> {
        &self.chunks
    }

    pub fn records(&self) -> &RecordStore {
        &self.records
    }

    /// The reconstruction recorded for the file with this sha256.
    pub fn record_for_sha256(&self, sha256: &[u8; 32]) -> Option<FileRecord> {
        let hash = self.records.file_hash_for_sha256(sha256)?;
        self.records
            .load(&hash)
            .filter(|r| r.sha256 == Some(*sha256))
    }

    /// Whether every chunk of `record` is in the store.
    pub fn covers(&self, record: &FileRecord) -> bool {
        every_term(record, |xorb, range| self.chunks.get(xorb, range).is_some())
    }

    /// Whether the object with this sha256 and size can be rebuilt from the store alone.
    pub fn has(&self, sha256: &[u8; 32], size: u64) -> bool {
        self.record_for_sha256(sha256)
            .is_some_and(|r| r.size() == size && self.covers(&r))
    }

    /// [`ChunkStore::has`] without refreshing the recency of the chunks: for a check that
    /// does not use them (the filter's re-clean of a file its checkout just wrote, which
    /// refreshed them then).
    pub fn holds(&self, sha256: &[u8; 32], size: u64) -> bool {
        self.record_for_sha256(sha256).is_some_and(|r| {
            r.size() == size && every_term(&r, |xorb, range| self.chunks.contains(xorb, range))
        })
    }

    /// Rebuilds the file with this sha256 and size into `output` from local chunks only:
    /// written to a temporary file beside it, each chunk checked against the record, the
    /// whole against the sha256, then renamed over `output`.
    pub fn rebuild(&self, sha256: &[u8; 32], size: u64, output: &Path) -> Result<Rebuilt> {
        let Some(record) = self.record_for_sha256(sha256) else {
            return Ok(Rebuilt::Missing);
        };
        if record.size() != size {
            return Ok(Rebuilt::Missing);
        }
        let parent = output.parent().unwrap_or(Path::new("."));
        let fail =
            |e: std::io::Error| ClientError::io("rebuilding from the chunk store", output, e);
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-rebuild-")
            .tempfile_in(parent)
            .map_err(fail)?;
        let mut out = BufWriter::with_capacity(1 << 20, tmp);
        let mut sha = sha2::Sha256::new();
        for term in &record.terms {
            match self.copy_term(term, &mut out, &mut sha)? {
                Rebuilt::Done => {}
                other => return Ok(other),
            }
        }
        let tmp = out.into_inner().map_err(|e| fail(e.into_error()))?;
        let actual: [u8; 32] = sha.finalize().into();
        if actual != *sha256 {
            // Every chunk matched its record, so the record itself is wrong: forget it.
            let _ = std::fs::remove_file(self.root.join("files").join(record.file_hash.to_hex()));
            return Ok(Rebuilt::Damaged(format!(
                "the record of {} does not give its sha256",
                record.file_hash
            )));
        }
        tmp.persist(output).map_err(|e| fail(e.error))?;
        Ok(Rebuilt::Done)
    }

    /// Appends one term's chunks, read from the stored range that covers them.
    fn copy_term(
        &self,
        term: &RecordTerm,
        out: &mut impl Write,
        sha: &mut sha2::Sha256,
    ) -> Result<Rebuilt> {
        let range = ChunkRange::new(term.start, term.start + term.chunks.len() as u32);
        let Some(hit) = self.chunks.get(&term.xorb, range) else {
            return Ok(Rebuilt::Missing);
        };
        // Another process may have evicted it since: a miss.
        let Ok(file) = File::open(&hit.path) else {
            return Ok(Rebuilt::Missing);
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut reader = BufReader::with_capacity(256 * 1024, file);
        let all = 0..term.chunks.len();
        let emit = |_, data: &[u8]| {
            sha.update(data);
            out.write_all(data)
        };
        match read_term(&mut reader, len, hit.range.start, term, all, emit) {
            Ok(()) => Ok(Rebuilt::Done),
            Err(TermError::Write(e)) => Err(ClientError::io(
                "rebuilding from the chunk store",
                &self.root,
                e,
            )),
            Err(TermError::Damaged(reason)) => {
                let what = format!("{}: {reason}", hit.path.display());
                tracing::warn!("damaged chunk store entry {what}; it will be fetched again");
                self.chunks.remove(&hit.path);
                Ok(Rebuilt::Damaged(what))
            }
        }
    }
}

impl ChunkStore {
    /// Bytes `start..=end` of the file `record` describes, from the store alone (for a
    /// lazy mount): only the chunks overlapping the range are read, each checked against
    /// its record. None when a range is not in the store or is damaged (then deleted): the
    /// caller fetches instead.
    pub fn read_range(&self, record: &FileRecord, (start, end): (u64, u64)) -> Option<Vec<u8>> {
        if end < start || end >= record.size() {
            return None;
        }
        let mut out = Vec::with_capacity((end - start + 1).min(1 << 30) as usize);
        let mut pos = 0u64; // where the term begins in the file
        for term in &record.terms {
            let sizes = term.chunks.iter().map(|c| u64::from(c.1));
            let term_len: u64 = sizes.clone().sum();
            if pos + term_len <= start {
                pos += term_len;
                continue;
            }
            if pos > end {
                break;
            }
            // The chunks of this term that overlap the range, and where the first begins.
            let (mut first, mut at) = (None, pos);
            let mut wanted_end = 0;
            for (i, size) in sizes.enumerate() {
                if at + size > start && at <= end {
                    if first.is_none() {
                        first = Some((i, at));
                    }
                    wanted_end = i + 1;
                }
                at += size;
            }
            let (wanted_start, mut chunk_at) = first?;
            let range = ChunkRange::new(term.start, term.start + term.chunks.len() as u32);
            let hit = self.chunks.get(&term.xorb, range)?;
            let file = File::open(&hit.path).ok()?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut reader = BufReader::with_capacity(256 * 1024, file);
            let emit = |_, data: &[u8]| {
                let from = start.saturating_sub(chunk_at) as usize;
                let to = ((end + 1 - chunk_at) as usize).min(data.len());
                out.extend_from_slice(&data[from..to]);
                chunk_at += data.len() as u64;
                Ok(())
            };
            let wanted = wanted_start..wanted_end;
            if let Err(e) = read_term(&mut reader, len, hit.range.start, term, wanted, emit) {
                if let TermError::Damaged(reason) = e {
                    let what = hit.path.display();
                    tracing::warn!("damaged chunk store entry {what}: {reason}; fetching instead");
                    self.chunks.remove(&hit.path);
                }
                return None;
            }
            pos += term_len;
        }
        (out.len() as u64 == end - start + 1).then_some(out)
    }
}

/// What [`ChunkStore::prune`] did (or, dry, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PruneReport {
    pub kept_entries: usize,
    pub kept_bytes: u64,
    pub deleted_entries: usize,
    pub deleted_bytes: u64,
    pub deleted_records: usize,
}

/// Entries younger than this are spared by a prune: a download may be writing their file's
/// record right now.
const PRUNE_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

impl ChunkStore {
    /// Registers a clone (its git directory) as a user of the store, once: `clones/<key>`
    /// holds its path. A clone whose directory is gone stops pinning anything.
    pub fn register_clone(&self, git_dir: &Path) -> Result<()> {
        let path = git_dir.to_string_lossy();
        let key = blake3::hash(path.as_bytes()).to_hex()[..16].to_string();
        let dir = self.root.join("clones");
        if dir.join(&key).exists() {
            return Ok(());
        }
        crate::shard_cache::write_atomically(&dir, &key, path.as_bytes()).map(|_| ())
    }

    /// The registered clones: (registration file, git directory).
    pub fn clones(&self) -> Vec<(PathBuf, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(self.root.join("clones")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| {
                let text = std::fs::read_to_string(e.path()).ok()?;
                Some((e.path(), PathBuf::from(text)))
            })
            .collect()
    }

    /// Deletes every stored range and record that no file of `needed` (sha256s) uses, except
    /// ranges written in the last minutes. `dry`: only counts.
    pub fn prune(&self, needed: &std::collections::HashSet<[u8; 32]>, dry: bool) -> PruneReport {
        let mut keep = std::collections::HashSet::new();
        for sha in needed {
            let Some(record) = self.record_for_sha256(sha) else {
                continue;
            };
            for t in &record.terms {
                let range = ChunkRange::new(t.start, t.start + t.chunks.len() as u32);
                if let Some(hit) = self.chunks.get(&t.xorb, range) {
                    keep.insert(hit.path);
                }
            }
        }
        let mut report = PruneReport::default();
        let now = std::time::SystemTime::now();
        let chunks_dir = Self::chunks_dir(&self.root);
        for xorb in std::fs::read_dir(&chunks_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            for entry in std::fs::read_dir(xorb.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let Ok(meta) = entry.metadata() else { continue };
                let young = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .is_some_and(|age| age < PRUNE_GRACE);
                if keep.contains(&entry.path()) || young {
                    report.kept_entries += 1;
                    report.kept_bytes += meta.len();
                    continue;
                }
                report.deleted_entries += 1;
                report.deleted_bytes += meta.len();
                if !dry {
                    self.chunks.remove(&entry.path());
                }
            }
            if !dry {
                let _ = std::fs::remove_dir(xorb.path()); // only when empty
            }
        }
        let by_sha = self.root.join("files").join("by-sha256");
        for entry in std::fs::read_dir(&by_sha).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let Ok(sha) = git_xet_core::lfs::parse_oid(&name) else {
                continue;
            };
            if needed.contains(&sha) {
                continue;
            }
            report.deleted_records += 1;
            if !dry {
                if let Some(hash) = self.records.file_hash_for_sha256(&sha) {
                    let _ = std::fs::remove_file(self.root.join("files").join(hash.to_hex()));
                }
                let _ = std::fs::remove_file(entry.path());
            }
        }
        report
    }
}

enum TermError {
    Damaged(String),
    Write(std::io::Error),
}

/// Reads the records of an entry starting at chunk `first`, skipping to `term.start`, and
/// hands `emit` the term's chunks `wanted` (indices into the term; none after them is
/// read), each checked against its recorded hash and size.
fn read_term(
    reader: &mut BufReader<File>,
    len: u64,
    first: u32,
    term: &RecordTerm,
    wanted: std::ops::Range<usize>,
    mut emit: impl FnMut(usize, &[u8]) -> std::io::Result<()>,
) -> std::result::Result<(), TermError> {
    let damaged = |e: String| TermError::Damaged(e);
    let mut consumed = 0u64;
    let mut index = first;
    let mut stored = Vec::new();
    let mut data = Vec::new();
    let end = term.start + wanted.end.min(term.chunks.len()) as u32;
    let from = term.start + wanted.start as u32;
    while index < end {
        let mut head = [0u8; CHUNK_HEADER_LEN];
        reader
            .read_exact(&mut head)
            .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
        consumed += CHUNK_HEADER_LEN as u64;
        let remaining = len.saturating_sub(consumed).min(usize::MAX as u64) as usize;
        let header = ChunkHeader::parse(&head, remaining)
            .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
        consumed += u64::from(header.compressed_len);
        if index < from {
            reader
                .seek_relative(i64::from(header.compressed_len))
                .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
            index += 1;
            continue;
        }
        stored.resize(header.compressed_len as usize, 0);
        reader
            .read_exact(&mut stored)
            .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
        data.clear();
        decode_chunk(&header, &stored, &mut data)
            .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
        let i = (index - term.start) as usize;
        let (hash, size) = term.chunks[i];
        if data.len() != size as usize || chunk_hash(&data) != hash {
            return Err(damaged(format!("chunk {index} does not match its hash")));
        }
        emit(i, &data).map_err(TermError::Write)?;
        index += 1;
    }
    Ok(())
}

/// Whether `present` says yes for the chunk range of every term of `record`.
fn every_term(record: &FileRecord, present: impl Fn(&MerkleHash, ChunkRange) -> bool) -> bool {
    record.terms.iter().all(|t| {
        let range = ChunkRange::new(t.start, t.start + t.chunks.len() as u32);
        present(&t.xorb, range)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::compression::CompressionScheme;

    /// A store holding one file of three chunks (two in one stored range of a xorb, one in
    /// another xorb), stored raw; returns the store, its sha256 and content.
    fn fixture(dir: &Path) -> (ChunkStore, [u8; 32], Vec<u8>) {
        let store = ChunkStore::open(dir, 1 << 30).unwrap();
        let pieces: Vec<Vec<u8>> = vec![vec![1; 1000], vec![2; 500], vec![3; 700]];
        let xorbs = [chunk_hash(b"x"), chunk_hash(b"y")];
        // xorb x: chunks 0..3 stored (0 is not used by the file), y: chunk 0..1.
        let mut w = store
            .chunks
            .writer(&xorbs[0], ChunkRange::new(0, 3))
            .unwrap();
        for data in [&vec![9u8; 300], &pieces[0], &pieces[1]] {
            let h = ChunkHeader::new(CompressionScheme::None, data.len(), data.len());
            w.write(&h.to_bytes()).unwrap();
            w.write(data).unwrap();
        }
        w.commit(&store.chunks).unwrap();
        let mut w = store
            .chunks
            .writer(&xorbs[1], ChunkRange::new(0, 1))
            .unwrap();
        let h = ChunkHeader::new(CompressionScheme::None, 700, 700);
        w.write(&h.to_bytes()).unwrap();
        w.write(&pieces[2]).unwrap();
        w.commit(&store.chunks).unwrap();
        let content: Vec<u8> = pieces.concat();
        let sha: [u8; 32] = sha2::Sha256::digest(&content).into();
        let c = |d: &Vec<u8>| (chunk_hash(d), d.len() as u32);
        let record = FileRecord {
            file_hash: chunk_hash(b"file"),
            sha256: Some(sha),
            terms: vec![
                RecordTerm {
                    xorb: xorbs[0],
                    start: 1,
                    chunks: vec![c(&pieces[0]), c(&pieces[1])],
                },
                RecordTerm {
                    xorb: xorbs[1],
                    start: 0,
                    chunks: vec![c(&pieces[2])],
                },
            ],
        };
        store.records.save(&record).unwrap();
        (store, sha, content)
    }

    #[test]
    fn rebuilds_a_recorded_file_from_local_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let (store, sha, content) = fixture(&dir.path().join("store"));
        assert!(store.has(&sha, content.len() as u64));
        // A check leaves the ranges' recency as it was.
        let range = store
            .chunks
            .dir()
            .join(chunk_hash(b"y").to_hex())
            .join("0-1");
        let past = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options()
            .append(true)
            .open(&range)
            .unwrap()
            .set_modified(past)
            .unwrap();
        assert!(store.holds(&sha, content.len() as u64));
        assert!(!store.holds(&sha, content.len() as u64 + 1));
        assert!(!store.holds(&[0; 32], 3));
        assert_eq!(std::fs::metadata(&range).unwrap().modified().unwrap(), past);
        let out = dir.path().join("out");
        assert_eq!(
            store.rebuild(&sha, content.len() as u64, &out).unwrap(),
            Rebuilt::Done
        );
        assert_eq!(std::fs::read(&out).unwrap(), content);
        // Unknown content, or a wrong size, is not served.
        assert_eq!(store.rebuild(&[0; 32], 3, &out).unwrap(), Rebuilt::Missing);
        assert_eq!(store.rebuild(&sha, 5, &out).unwrap(), Rebuilt::Missing);
    }

    #[test]
    fn ranges_are_read_from_the_chunks_they_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let (store, sha, content) = fixture(&dir.path().join("store"));
        let record = store.record_for_sha256(&sha).unwrap();
        let n = content.len() as u64;
        for (s, e) in [
            (0, 0),
            (0, n - 1),
            (999, 1000),
            (1200, 1600),
            (1500, n - 1),
            (10, 20),
        ] {
            let got = store.read_range(&record, (s, e));
            assert_eq!(
                got.as_deref(),
                Some(&content[s as usize..=e as usize]),
                "{s}-{e}"
            );
        }
        assert_eq!(store.read_range(&record, (0, n)), None);
        // A damaged chunk: no bytes, and the entry is gone (fetched again later).
        let hit = store
            .chunks
            .get(&chunk_hash(b"y"), ChunkRange::new(0, 1))
            .unwrap();
        let mut bytes = std::fs::read(&hit.path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&hit.path, bytes).unwrap();
        assert_eq!(
            store.read_range(&record, (0, 99)).as_deref(),
            Some(&content[..100])
        );
        assert_eq!(store.read_range(&record, (1400, 1600)), None);
        assert!(!hit.path.exists());
    }

    #[test]
    fn a_damaged_chunk_is_deleted_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let (store, sha, content) = fixture(&dir.path().join("store"));
        let entry = dir
            .path()
            .join("store/chunks")
            .join(chunk_hash(b"y").to_hex())
            .join("0-1");
        let mut bytes = std::fs::read(&entry).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&entry, bytes).unwrap();
        let out = dir.path().join("out");
        let got = store.rebuild(&sha, content.len() as u64, &out).unwrap();
        assert!(matches!(got, Rebuilt::Damaged(_)), "{got:?}");
        assert!(!out.exists(), "nothing is left at the output");
        assert!(!entry.exists(), "the damaged entry is deleted");
        assert!(!store.has(&sha, content.len() as u64));
        assert_eq!(
            store.rebuild(&sha, content.len() as u64, &out).unwrap(),
            Rebuilt::Missing
        );
    }
}
