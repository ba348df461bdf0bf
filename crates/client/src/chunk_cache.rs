//! The on-disk chunk cache: xorb ranges as fetched (chunk records, still compressed), keyed by
//! xorb hash and chunk range, under the user cache directory.
//!
//! Layout: `<dir>/<xorb hash>/<start>-<end>` holds the records of chunks `start..end`.
//! Content is immutable, so the only questions are space and concurrency:
//! - entries are written to a temporary file and renamed into place, so a reader (in this or
//!   another process) sees a whole entry or none;
//! - a hit refreshes the entry's modification time; when the cache grows past its limit the
//!   least recently used entries are deleted until it is at 90% of it;
//! - a reader treats an entry that vanishes (another process evicted it) as a miss, and a
//!   damaged entry is deleted and fetched again. No shared index exists that could be torn.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{ClientError, Result};
use git_xet_core::reconstruction::ChunkRange;
use git_xet_core::MerkleHash;

/// `size` before the directory was walked.
const UNKNOWN_SIZE: u64 = u64::MAX;

/// 10 GiB, like the deployed client's default.
pub const DEFAULT_CHUNK_CACHE_BYTES: u64 = 10 * 1024 * 1024 * 1024;

/// A cache directory with a size limit.
#[derive(Debug)]
pub struct ChunkCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Estimate of the bytes in the cache (exact after a scan; other processes drift it).
    size: AtomicU64,
    evicting: Mutex<()>,
}

/// A cached entry that covers a requested range.
#[derive(Debug, Clone)]
pub struct CacheHit {
    pub path: PathBuf,
    /// The chunks the entry holds (covers the request).
    pub range: ChunkRange,
}

/// The smallest entry of a xorb's directory holding `range`, and its range.
fn smallest_covering(xorb_dir: &Path, range: ChunkRange) -> Option<(PathBuf, ChunkRange)> {
    fs::read_dir(xorb_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            Some((
                e.path(),
                parse_entry_name(&e.file_name().to_string_lossy())?,
            ))
        })
        .filter(|(_, r)| r.contains_range(&range))
        .min_by_key(|(_, r)| r.len())
}

/// An entry's file name: `<start>-<end>` (chunk indices, end exclusive).
fn entry_name(range: ChunkRange) -> String {
    format!("{}-{}", range.start, range.end)
}

fn parse_entry_name(name: &str) -> Option<ChunkRange> {
    let (s, e) = name.split_once('-')?;
    let range = ChunkRange::new(s.parse().ok()?, e.parse().ok()?);
    (!range.is_empty()).then_some(range)
}

/// Every entry file with its size and modification time.
fn scan(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(xorbs) = fs::read_dir(dir) else {
        return out;
    };
    for xorb in xorbs.filter_map(|e| e.ok()) {
        let Ok(entries) = fs::read_dir(xorb.path()) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            if let Ok(meta) = entry.metadata() {
                if meta.is_file() {
                    out.push((
                        entry.path(),
                        meta.len(),
                        meta.modified().unwrap_or(UNIX_EPOCH),
                    ));
                }
            }
        }
    }
    out
}

impl ChunkCache {
    /// Opens (creating) a cache directory holding at most `max_bytes`.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self> {
        let cache = Self::open_unscanned(dir, max_bytes)?;
        cache.approximate_size();
        Ok(cache)
    }

    /// [`open`](Self::open) without walking the directory for its size until something is
    /// added: a process that only reads (a filter rebuilding a file) pays no walk.
    pub fn open_unscanned(dir: &Path, max_bytes: u64) -> Result<Self> {
        fs::create_dir_all(dir).map_err(|e| ClientError::io("creating the chunk cache", dir, e))?;
        Ok(ChunkCache {
            dir: dir.to_path_buf(),
            max_bytes,
            size: AtomicU64::new(UNKNOWN_SIZE),
            evicting: Mutex::new(()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    pub fn approximate_size(&self) -> u64 {
        let size = self.size.load(Ordering::Relaxed);
        if size != UNKNOWN_SIZE {
            return size;
        }
        let scanned = scan(&self.dir).iter().map(|e| e.1).sum();
        let _ =
            self.size
                .compare_exchange(UNKNOWN_SIZE, scanned, Ordering::Relaxed, Ordering::Relaxed);
        self.size.load(Ordering::Relaxed)
    }

    /// Whether an entry of this many bytes is worth caching at all.
    pub fn accepts(&self, len: u64) -> bool {
        len <= self.max_bytes / 2
    }

    /// An entry holding chunks `range` of `xorb` (or a superset of them).
    pub fn get(&self, xorb: &MerkleHash, range: ChunkRange) -> Option<CacheHit> {
        let xorb_dir = self.dir.join(xorb.to_hex());
        // An entry of exactly this range (a file's own range, as its download stored it) is
        // the smallest that covers it: one open, which refreshes its recency too, instead of
        // listing every range of the xorb.
        let exact = xorb_dir.join(entry_name(range));
        if let Ok(f) = fs::File::options().append(true).open(&exact) {
            let _ = f.set_modified(SystemTime::now());
            return Some(CacheHit { path: exact, range });
        }
        let best = smallest_covering(&xorb_dir, range)?;
        // Refresh recency; failing to is harmless.
        if let Ok(f) = fs::File::options().append(true).open(&best.0) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(CacheHit {
            path: best.0,
            range: best.1,
        })
    }

    /// Whether an entry holds chunks `range` of `xorb`, without refreshing its recency (a
    /// check, not a use: one stat when the exact range is stored).
    pub fn contains(&self, xorb: &MerkleHash, range: ChunkRange) -> bool {
        let xorb_dir = self.dir.join(xorb.to_hex());
        fs::symlink_metadata(xorb_dir.join(entry_name(range))).is_ok_and(|m| m.is_file())
            || smallest_covering(&xorb_dir, range).is_some()
    }

    /// Starts a new entry; bytes are written to a temporary file until `commit`.
    pub fn writer(&self, xorb: &MerkleHash, range: ChunkRange) -> Result<CacheWriter> {
        let xorb_dir = self.dir.join(xorb.to_hex());
        fs::create_dir_all(&xorb_dir)
            .map_err(|e| ClientError::io("creating a chunk cache entry", &xorb_dir, e))?;
        let file = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(|e| ClientError::io("creating a chunk cache entry", &self.dir, e))?;
        Ok(CacheWriter {
            file,
            target: xorb_dir.join(entry_name(range)),
            len: 0,
        })
    }

    /// Removes an entry that turned out damaged.
    pub fn remove(&self, path: &Path) {
        if let Ok(meta) = fs::metadata(path) {
            if fs::remove_file(path).is_ok() {
                let size = self.approximate_size();
                self.size.fetch_sub(meta.len().min(size), Ordering::Relaxed);
            }
        }
    }

    fn committed(&self, len: u64) {
        self.approximate_size();
        let size = self.size.fetch_add(len, Ordering::Relaxed) + len;
        if size > self.max_bytes {
            self.evict();
        }
    }

    /// Deletes least recently used entries until the cache is at 90% of its limit.
    pub fn evict(&self) {
        let Ok(_guard) = self.evicting.try_lock() else {
            return;
        };
        let mut entries = scan(&self.dir);
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        let target = self.max_bytes / 10 * 9;
        let before = total;
        entries.sort_by_key(|e| e.2);
        for (path, len, _) in entries {
            if total <= target {
                break;
            }
            if fs::remove_file(&path).is_ok() || !path.exists() {
                total = total.saturating_sub(len);
                if let Some(parent) = path.parent() {
                    let _ = fs::remove_dir(parent); // only succeeds when empty
                }
            }
        }
        self.size.store(total, Ordering::Relaxed);
        if before > total {
            // Said, not silent: in the chunk store, these may be old versions' only copy.
            tracing::warn!(
                "{} passed its bound of {} bytes: deleted {} bytes of the least recently used \
                 chunk ranges (files that used them will be downloaded again)",
                self.dir.display(),
                self.max_bytes,
                before - total
            );
        }
    }
}

/// An entry being written.
pub struct CacheWriter {
    file: tempfile::NamedTempFile,
    target: PathBuf,
    len: u64,
}

impl CacheWriter {
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_record(bytes, &[])
    }

    /// A chunk's header and data in one system call (most of the time): a cold read
    /// writes every chunk it fetches.
    pub fn write_record(&mut self, head: &[u8], data: &[u8]) -> std::io::Result<()> {
        use std::io::{IoSlice, Write};
        self.len += (head.len() + data.len()) as u64;
        let (mut head, mut data) = (head, data);
        while !head.is_empty() || !data.is_empty() {
            let n = self
                .file
                .write_vectored(&[IoSlice::new(head), IoSlice::new(data)])?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let h = n.min(head.len());
            head = &head[h..];
            data = &data[n - h..];
        }
        Ok(())
    }

    /// Publishes the entry (atomically replacing an identical one another process wrote);
    /// returns its path.
    pub fn commit(self, cache: &ChunkCache) -> Option<PathBuf> {
        let len = self.len;
        match self.file.persist(&self.target) {
            Ok(_) => {
                cache.committed(len);
                Some(self.target)
            }
            Err(e) => {
                tracing::debug!("could not add a chunk cache entry: {}", e.error);
                None
            }
        }
    }
}

/// The per-user cache location: `$GIT_XET_CACHE_DIR`, else the platform's cache directory.
pub fn default_cache_root() -> Option<PathBuf> {
    std::env::var_os("GIT_XET_CACHE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("", "", "git-xet").map(|d| d.cache_dir().to_path_buf())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;
    use std::time::Duration;

    fn put(cache: &ChunkCache, xorb: &MerkleHash, range: ChunkRange, len: usize) {
        let mut w = cache.writer(xorb, range).unwrap();
        w.write(&vec![1u8; len]).unwrap();
        w.commit(cache);
    }

    #[test]
    fn a_record_is_written_header_then_data() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        let x = chunk_hash(b"x");
        let mut w = cache.writer(&x, ChunkRange::new(0, 2)).unwrap();
        w.write_record(b"head", &[7u8; 100_000]).unwrap();
        w.write_record(b"h2", b"").unwrap();
        let path = w.commit(&cache).unwrap();
        let got = std::fs::read(path).unwrap();
        assert_eq!(got.len(), 100_006);
        assert_eq!(
            (&got[..4], got[4], &got[100_004..]),
            (&b"head"[..], 7, &b"h2"[..])
        );
    }

    #[test]
    fn finds_the_smallest_covering_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        let x = chunk_hash(b"x");
        assert!(cache.get(&x, ChunkRange::new(0, 1)).is_none());
        put(&cache, &x, ChunkRange::new(0, 10), 100);
        put(&cache, &x, ChunkRange::new(2, 5), 30);
        assert_eq!(
            cache.get(&x, ChunkRange::new(3, 5)).unwrap().range,
            ChunkRange::new(2, 5)
        );
        assert_eq!(
            cache.get(&x, ChunkRange::new(4, 8)).unwrap().range,
            ChunkRange::new(0, 10)
        );
        // An entry of exactly the range asked for is found without listing the others.
        for range in [ChunkRange::new(2, 5), ChunkRange::new(0, 10)] {
            let hit = cache.get(&x, range).unwrap();
            assert_eq!(hit.range, range);
            assert_eq!(
                hit.path,
                dir.path().join(x.to_hex()).join(entry_name(range))
            );
        }
        assert!(cache.get(&x, ChunkRange::new(8, 11)).is_none());
        assert!(cache
            .get(&chunk_hash(b"y"), ChunkRange::new(0, 1))
            .is_none());
        assert_eq!(cache.approximate_size(), 130);
        // A reopened cache knows its size.
        assert_eq!(
            ChunkCache::open(dir.path(), 1 << 30)
                .unwrap()
                .approximate_size(),
            130
        );
    }

    #[test]
    fn evicts_least_recently_used_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChunkCache::open(dir.path(), 1000).unwrap();
        let xs: Vec<MerkleHash> = (0..4u8).map(|i| chunk_hash(&[i])).collect();
        for (i, x) in xs.iter().enumerate() {
            put(&cache, x, ChunkRange::new(0, 1), 240);
            // Distinct, increasing modification times.
            let path = dir.path().join(x.to_hex()).join("0-1");
            let f = fs::File::options().append(true).open(path).unwrap();
            f.set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000 + i as u64))
                .unwrap();
        }
        // Using the oldest makes it the most recent.
        assert!(cache.get(&xs[0], ChunkRange::new(0, 1)).is_some());
        put(&cache, &chunk_hash(b"new"), ChunkRange::new(0, 1), 240); // 1200 > 1000: evict to 900
        assert!(cache.get(&xs[0], ChunkRange::new(0, 1)).is_some());
        assert!(cache.get(&xs[1], ChunkRange::new(0, 1)).is_none());
        assert!(cache.get(&xs[2], ChunkRange::new(0, 1)).is_none());
        assert!(cache.get(&xs[3], ChunkRange::new(0, 1)).is_some());
        assert!(cache.approximate_size() <= 900);
    }

    #[test]
    fn entry_names_are_checked() {
        assert_eq!(parse_entry_name("3-7"), Some(ChunkRange::new(3, 7)));
        assert_eq!(parse_entry_name("7-3"), None);
        assert_eq!(parse_entry_name(".tmp-abc"), None);
        assert_eq!(parse_entry_name("x-1"), None);
    }
}
