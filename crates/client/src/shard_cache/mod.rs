//! The local shard cache of one CAS server: shards this client uploaded (`shards/`) and
//! shards the server returned for global dedup queries (`dedup-shards/`, kept until their
//! key expires), under `servers/<endpoint key>/` of a metadata directory (per repository:
//! `.git/xet/`; otherwise the user cache directory). It is kept per server because a shard
//! describes what one server holds.
//!
//! At the start of an upload session the chunk lookup table of every cached shard (its
//! footer says where) is read into a compact index: 24 bytes per chunk (first hash word,
//! shard, xorb record and chunk position), with each keyed shard's entries in a table of
//! its own. The rest of a shard is not read then: a hit loads the description of the one
//! xorb it points at, to confirm the full hash and to follow the run of chunks after it. A
//! damaged table can therefore only cost hits, never give a wrong one.
//!
//! `upkeep` evicts old shards and merges small ones, under a lock readers share.

mod upkeep;

use std::collections::HashMap;
use std::fs;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{ClientError, Result};
use git_xet_core::hash::keyed_chunk_hash;
use git_xet_core::shard::{
    read_shard, ChunkLookupEntry, ParsedShard, ShardFile, ShardFooter, XorbBlock,
};
use git_xet_core::MerkleHash;

/// Removes the cache that versions before the per-server layout kept directly in the
/// metadata directory. Which server its shards describe is unknown, so it cannot be trusted
/// for any; global dedup finds again what it knew.
pub fn drop_unkeyed_cache(metadata_dir: &Path) {
    for name in ["shards", "dedup-shards"] {
        let dir = metadata_dir.join(name);
        if dir.is_dir() {
            tracing::debug!(
                "removing the shard cache of unknown server {}",
                dir.display()
            );
            let _ = fs::remove_dir_all(&dir);
        }
    }
    let _ = fs::remove_file(metadata_dir.join("shards.lock"));
}

/// Empties one server's cache (`dir`, as from `ClientConfig::shard_cache_dir`) after the
/// server showed it no longer holds what the cache says. The directory is renamed away
/// first, so that no session lists half of it; sessions still reading a shard from it find
/// the file gone and treat it as a miss.
pub fn discard(dir: &Path) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".discarded-{}-{nanos}", std::process::id()));
    let aside = dir.with_file_name(name);
    match fs::rename(dir, &aside) {
        Ok(()) => {
            let _ = fs::remove_dir_all(&aside);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!("could not clear the shard cache {}: {e}", dir.display());
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// Own shards beyond this total size are evicted, oldest first: about the last 50 GiB of
/// uploads, indexed in ~20 MiB of memory. Older content is still found by global dedup.
pub const DEFAULT_MAX_OWN_SHARD_BYTES: u64 = 64 * 1024 * 1024;

/// A chunk found in a cached shard: the xorb holding it and its index there.
#[derive(Debug, Clone)]
pub struct CachedChunk {
    pub xorb: Arc<XorbBlock>,
    pub index: u32,
    /// The key chunk hashes in this xorb description are keyed with (global-dedup shards).
    pub key: Option<MerkleHash>,
}

impl CachedChunk {
    /// Whether the chunk after this one in the xorb has hash `next`.
    pub fn next_is(&self, next: &MerkleHash) -> bool {
        let stored = match &self.key {
            Some(k) => keyed_chunk_hash(k, next),
            None => *next,
        };
        self.xorb
            .chunks
            .get(self.index as usize + 1)
            .is_some_and(|c| c.chunk_hash == stored)
    }

    pub fn advance(&self) -> CachedChunk {
        CachedChunk {
            xorb: self.xorb.clone(),
            index: self.index + 1,
            key: self.key,
        }
    }

    pub fn unpacked_bytes(&self) -> u32 {
        self.xorb.chunks[self.index as usize].unpacked_bytes
    }
}

/// (first word of stored chunk hash, shard, record index of the xorb's header in the
/// shard's CAS section, chunk index): the shard's own chunk lookup entry, plus the shard.
type Entry = (u64, u32, u32, u32);

#[derive(Debug)]
struct Table {
    key: Option<MerkleHash>,
    /// Sorted.
    entries: Vec<Entry>,
}

/// How a shard's entries join their table.
enum Insert {
    /// While loading: appended, and every table is sorted once at the end.
    Bulk,
    /// Into a sorted table, by merging: sorting the whole table again after every session
    /// would cost O(n log n) per file with a large cache.
    Merge,
}

/// Merges `new` into the sorted `entries`, in place from the back: O(n + m).
fn merge_sorted(entries: &mut Vec<Entry>, mut new: Vec<Entry>) {
    new.sort_unstable();
    let (mut i, mut j) = (entries.len(), new.len());
    entries.resize(i + j, (0, 0, 0, 0));
    while j > 0 {
        let k = i + j - 1;
        if i > 0 && entries[i - 1] > new[j - 1] {
            entries[k] = entries[i - 1];
            i -= 1;
        } else {
            entries[k] = new[j - 1];
            j -= 1;
        }
    }
}

/// Chunk lookups over all cached shards.
#[derive(Debug, Default)]
pub struct ShardIndex {
    tables: Vec<Table>,
    paths: Vec<PathBuf>,
    /// Xorb descriptions that had a hit, by (shard, record), loaded on demand; `None` when
    /// the record holds no xorb (a damaged lookup table).
    loaded: HashMap<(u32, u32), Option<Arc<XorbBlock>>>,
    dedup_dir: Option<PathBuf>,
    /// Held shared while the index may read `shards/` (see [`upkeep`]).
    _read_lock: Option<fs::File>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn open_shard_file(path: &Path) -> Result<ShardFile<BufReader<fs::File>>> {
    let file =
        fs::File::open(path).map_err(|e| ClientError::io("opening a cached shard", path, e))?;
    ShardFile::open(BufReader::new(file))
        .map_err(|e| ClientError::core(format!("reading cached shard {}", path.display()), e))
}

/// What the index needs of a cached shard: its footer and chunk lookup table.
fn read_chunk_lookup(path: &Path) -> Result<(ShardFooter, Vec<ChunkLookupEntry>)> {
    let mut shard = open_shard_file(path)?;
    let table = shard
        .chunk_lookup_table()
        .map_err(|e| ClientError::core(format!("reading cached shard {}", path.display()), e))?;
    Ok((shard.footer().clone(), table))
}

fn read_shard_file(path: &Path) -> Result<ParsedShard> {
    let file =
        fs::File::open(path).map_err(|e| ClientError::io("opening a cached shard", path, e))?;
    read_shard(&mut BufReader::with_capacity(256 * 1024, file))
        .map_err(|e| ClientError::core(format!("reading cached shard {}", path.display()), e))
}

/// Writes `bytes` to `dir/name` atomically (temp file and rename), creating `dir`.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    fs::create_dir_all(dir).map_err(|e| ClientError::io("creating a cache directory", dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| ClientError::io("creating a temporary file", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| ClientError::io("writing a temporary file", tmp.path(), e))?;
    let path = dir.join(name);
    tmp.persist(&path)
        .map_err(|e| ClientError::io("saving a cache file", &path, e.error))?;
    Ok(path)
}

fn shard_files(dir: &Path) -> Vec<(PathBuf, fs::Metadata)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".shard"))
        .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
        .collect()
}

/// Deletes the oldest shards until the directory holds at most `max_bytes`.
fn evict_oldest(files: &mut Vec<(PathBuf, fs::Metadata)>, max_bytes: u64) {
    files.sort_by_key(|(_, m)| std::cmp::Reverse(m.modified().unwrap_or(UNIX_EPOCH)));
    let mut total = 0u64;
    files.retain(|(path, meta)| {
        total += meta.len();
        if total > max_bytes {
            tracing::debug!("evicting cached shard {}", path.display());
            let _ = fs::remove_file(path);
            false
        } else {
            true
        }
    });
}

impl ShardIndex {
    /// An index over nothing (no metadata directory).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Reads every cached shard under `dir` (`shards/` and unexpired `dedup-shards/`),
    /// after upkeep if no other process is reading it.
    /// Unreadable shards are skipped with a warning (and deleted: they are only a cache).
    pub fn load(dir: &Path) -> Self {
        let shards_dir = dir.join("shards");
        let mut index = ShardIndex {
            dedup_dir: Some(dir.join("dedup-shards")),
            _read_lock: upkeep::upkeep_then_lock_shared(&shards_dir, DEFAULT_MAX_OWN_SHARD_BYTES),
            ..Self::default()
        };
        let own = shard_files(&shards_dir);
        let dedup = shard_files(&dir.join("dedup-shards"));
        for (path, _) in own.into_iter().chain(dedup) {
            match read_chunk_lookup(&path) {
                Ok((footer, lookup)) => {
                    if footer.key_expiry <= now_secs() {
                        tracing::debug!("dropping expired dedup shard {}", path.display());
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                    let entries = lookup.into_iter();
                    index.insert(path, Some(&footer), entries, Insert::Bulk);
                }
                Err(e) => {
                    tracing::warn!("ignoring unreadable cached shard: {e}");
                    let _ = fs::remove_file(&path);
                }
            }
        }
        for table in &mut index.tables {
            table.entries.sort_unstable();
        }
        index
    }

    /// Adds a shard file this client just saved, so that a later session of this process
    /// finds it without reloading the whole cache.
    pub fn add_own_shard_file(&mut self, path: &Path) {
        match read_chunk_lookup(path) {
            Ok((footer, lookup)) => {
                let entries = lookup.into_iter();
                self.insert(path.to_path_buf(), Some(&footer), entries, Insert::Merge);
            }
            Err(e) => tracing::warn!("not indexing a shard just saved: {e}"),
        }
    }

    /// Drops the xorb descriptions loaded for hits (they are read again when needed).
    pub fn unload(&mut self) {
        self.loaded.clear();
    }

    /// Number of chunks indexed.
    pub fn num_chunks(&self) -> usize {
        self.tables.iter().map(|t| t.entries.len()).sum()
    }

    /// Adds a shard's chunk lookup entries to the table of its key.
    fn insert(
        &mut self,
        path: PathBuf,
        footer: Option<&ShardFooter>,
        lookup: impl Iterator<Item = ChunkLookupEntry>,
        how: Insert,
    ) -> u32 {
        let shard_id = self.paths.len() as u32;
        self.paths.push(path);
        let key = footer
            .filter(|f| f.chunk_hashes_keyed())
            .map(|f| f.chunk_hash_key);
        let table = match self.tables.iter().position(|t| t.key == key) {
            Some(i) => i,
            None => {
                self.tables.push(Table {
                    key,
                    entries: Vec::new(),
                });
                self.tables.len() - 1
            }
        };
        let new = lookup.map(|(word, record, chunk)| (word, shard_id, record, chunk));
        let entries = &mut self.tables[table].entries;
        match how {
            Insert::Bulk => entries.extend(new),
            Insert::Merge => merge_sorted(entries, new.collect()),
        }
        shard_id
    }

    /// Records a global-dedup answer: saved under `dedup-shards/` (when there is a metadata
    /// directory) and indexed at once.
    pub fn add_dedup_shard(&mut self, bytes: &[u8]) -> Result<()> {
        let parsed = git_xet_core::shard::parse_shard(bytes)
            .map_err(|e| ClientError::core("the server's global dedup answer", e))?;
        let path = match &self.dedup_dir {
            Some(dir) if parsed.footer.is_some() => {
                let name = format!("{}.shard", blake3::hash(bytes).to_hex());
                write_atomically(dir, &name, bytes)?
            }
            _ => PathBuf::new(),
        };
        // Indexed from the parsed sections (an answer held in memory may have no lookup
        // tables), and its xorbs kept: they are about to be used.
        let mut lookup = Vec::new();
        let mut record = 0u32;
        let mut xorbs = Vec::new();
        for xorb in parsed.shard.xorbs {
            for (c, chunk) in xorb.chunks.iter().enumerate() {
                lookup.push((chunk.chunk_hash.truncated(), record, c as u32));
            }
            let records = xorb.num_records() as u32;
            xorbs.push((record, Arc::new(xorb)));
            record += records;
        }
        let shard = self.insert(
            path,
            parsed.footer.as_ref(),
            lookup.into_iter(),
            Insert::Merge,
        );
        for (record, xorb) in xorbs {
            self.loaded.insert((shard, record), Some(xorb));
        }
        Ok(())
    }

    /// The xorb described at `record` of a shard's CAS section, read on first use.
    fn xorb_at(&mut self, shard: u32, record: u32) -> Option<Arc<XorbBlock>> {
        if let Some(loaded) = self.loaded.get(&(shard, record)) {
            return loaded.clone();
        }
        let path = &self.paths[shard as usize];
        let read = open_shard_file(path).and_then(|mut file| {
            file.xorb_at(record).map_err(|e| {
                ClientError::core(format!("reading cached shard {}", path.display()), e)
            })
        });
        let xorb = match read {
            Ok(xorb) => xorb.map(Arc::new),
            Err(e) => {
                tracing::warn!("cached shard vanished or changed: {e}");
                None
            }
        };
        self.loaded.insert((shard, record), xorb.clone());
        xorb
    }

    /// Finds a cached xorb holding this chunk.
    pub fn lookup(&mut self, chunk: &MerkleHash) -> Option<CachedChunk> {
        let mut candidates = Vec::new();
        for table in &self.tables {
            let stored = match &table.key {
                Some(k) => keyed_chunk_hash(k, chunk),
                None => *chunk,
            };
            let word = stored.truncated();
            let start = table.entries.partition_point(|e| e.0 < word);
            for e in table.entries[start..].iter().take_while(|e| e.0 == word) {
                candidates.push((stored, table.key, e.1, e.2, e.3));
            }
        }
        for (stored, key, shard, record, c) in candidates {
            let Some(xorb) = self.xorb_at(shard, record) else {
                continue;
            };
            if xorb
                .chunks
                .get(c as usize)
                .is_some_and(|ch| ch.chunk_hash == stored)
            {
                return Some(CachedChunk {
                    xorb,
                    index: c,
                    key,
                });
            }
        }
        None
    }
}

/// Saves a shard this client uploaded, in stored form, so later sessions dedup against it.
pub fn save_own_shard(dir: &Path, stored_bytes: &[u8]) -> Result<PathBuf> {
    let name = format!("{}.shard", blake3::hash(stored_bytes).to_hex());
    write_atomically(&dir.join("shards"), &name, stored_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;
    use git_xet_core::shard::{FooterOptions, Shard};

    fn xorb(seed: u8, n: usize) -> XorbBlock {
        let chunks: Vec<(MerkleHash, u32)> = (0..n)
            .map(|i| (chunk_hash(&[seed, i as u8]), 1000))
            .collect();
        XorbBlock::from_chunks(chunk_hash(&[seed]), chunks, 0)
    }

    /// The index is built from the lookup tables alone; xorbs are found by their record
    /// (not their position) in the CAS section, and a damaged table costs hits, never gives
    /// a wrong one.
    #[test]
    fn lookup_tables_find_every_chunk_and_damage_costs_only_hits() {
        let shard = Shard {
            files: vec![],
            xorbs: vec![xorb(1, 4), xorb(2, 7), xorb(3, 2)],
        };
        let mut bytes = shard.to_stored_bytes(&FooterOptions::default());
        let dir = tempfile::tempdir().unwrap();
        save_own_shard(dir.path(), &bytes).unwrap();
        let mut index = ShardIndex::load(dir.path());
        assert_eq!(index.num_chunks(), 13);
        for x in &shard.xorbs {
            for (i, c) in x.chunks.iter().enumerate() {
                let hit = index.lookup(&c.chunk_hash).expect("every chunk is found");
                assert_eq!((hit.xorb.xorb_hash, hit.index), (x.xorb_hash, i as u32));
            }
        }

        // Entries pointing at the wrong xorb, past the section, and at a wrong chunk.
        let footer = git_xet_core::shard::parse_shard(&bytes)
            .unwrap()
            .footer
            .unwrap();
        let entry = |k: u64| (footer.chunk_lookup_offset + 16 * k) as usize;
        bytes[entry(0) + 8..entry(0) + 12].copy_from_slice(&5u32.to_le_bytes());
        bytes[entry(1) + 8..entry(1) + 12].copy_from_slice(&9_999u32.to_le_bytes());
        bytes[entry(2) + 12..entry(2) + 16].copy_from_slice(&1u32.to_le_bytes());
        let damaged = tempfile::tempdir().unwrap();
        save_own_shard(damaged.path(), &bytes).unwrap();
        let mut index = ShardIndex::load(damaged.path());
        let mut misses = 0;
        for x in &shard.xorbs {
            for (i, c) in x.chunks.iter().enumerate() {
                match index.lookup(&c.chunk_hash) {
                    Some(hit) => {
                        assert_eq!((hit.xorb.xorb_hash, hit.index), (x.xorb_hash, i as u32))
                    }
                    None => misses += 1,
                }
            }
        }
        assert!((1..=3).contains(&misses), "{misses} misses");
    }

    #[test]
    fn finds_chunks_of_own_and_keyed_shards_and_follows_runs() {
        let dir = tempfile::tempdir().unwrap();
        let own = Shard {
            files: vec![],
            xorbs: vec![xorb(1, 5)],
        };
        save_own_shard(dir.path(), &own.to_stored_bytes(&FooterOptions::default())).unwrap();

        let key = chunk_hash(b"key");
        let options = FooterOptions {
            chunk_hash_key: key,
            creation_timestamp: 0,
            key_expiry: now_secs() + 3600,
        };
        let mut keyed_xorb = xorb(2, 3);
        for c in &mut keyed_xorb.chunks {
            c.chunk_hash = keyed_chunk_hash(&key, &c.chunk_hash);
        }
        let keyed = Shard {
            files: vec![],
            xorbs: vec![keyed_xorb],
        };

        let mut index = ShardIndex::load(dir.path());
        assert_eq!(index.num_chunks(), 5);
        index
            .add_dedup_shard(&keyed.to_stored_bytes(&options))
            .unwrap();
        assert_eq!(index.num_chunks(), 8);

        let hit = index.lookup(&chunk_hash(&[1, 2])).expect("own shard hit");
        assert_eq!((hit.xorb.xorb_hash, hit.index), (chunk_hash(&[1]), 2));
        assert!(hit.next_is(&chunk_hash(&[1, 3])));
        assert!(!hit.next_is(&chunk_hash(&[1, 4])));

        let hit = index.lookup(&chunk_hash(&[2, 0])).expect("keyed shard hit");
        assert_eq!((hit.xorb.xorb_hash, hit.index), (chunk_hash(&[2]), 0));
        assert!(hit.next_is(&chunk_hash(&[2, 1])));
        assert!(index.lookup(&chunk_hash(&[9, 9])).is_none());

        // The dedup answer was saved and is found again by a new session.
        let mut again = ShardIndex::load(dir.path());
        assert!(again.lookup(&chunk_hash(&[2, 2])).is_some());
    }

    #[test]
    fn merging_into_a_sorted_table_equals_sorting_everything() {
        let mut state = 7u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 50 // small range: plenty of equal words
        };
        for (old_len, new_len) in [(0, 0), (0, 5), (5, 0), (1, 1), (300, 7), (7, 300), (64, 64)] {
            let mut entries: Vec<Entry> = (0..old_len).map(|i| (next(), 0, 0, i)).collect();
            entries.sort_unstable();
            let new: Vec<Entry> = (0..new_len).map(|i| (next(), 1, 0, i)).collect();
            let mut expected = [entries.clone(), new.clone()].concat();
            expected.sort_unstable();
            merge_sorted(&mut entries, new);
            assert_eq!(entries, expected, "{old_len} + {new_len}");
        }
    }

    #[test]
    fn expired_dedup_shards_and_garbage_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let key = chunk_hash(b"key");
        let expired = FooterOptions {
            chunk_hash_key: key,
            creation_timestamp: 0,
            key_expiry: 1,
        };
        let shard = Shard {
            files: vec![],
            xorbs: vec![xorb(3, 2)],
        };
        write_atomically(
            &dir.path().join("dedup-shards"),
            "a.shard",
            &shard.to_stored_bytes(&expired),
        )
        .unwrap();
        write_atomically(&dir.path().join("shards"), "b.shard", b"not a shard").unwrap();
        let index = ShardIndex::load(dir.path());
        assert_eq!(index.num_chunks(), 0);
        assert!(!dir.path().join("dedup-shards/a.shard").exists());
        assert!(!dir.path().join("shards/b.shard").exists());
    }
}
