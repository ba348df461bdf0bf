//! Upkeep of the own-shard directory (`shards/`): eviction by size and merging of small
//! shards, coordinated with the processes reading it.
//!
//! Every upload session saves the shard it uploaded, so a repository pushed as thousands of
//! small files gathers thousands of tiny shard files, and every upload session (each of
//! git-lfs's eight agents) would open all of them before its first chunk. Small shards are
//! therefore merged into larger ones that keep only the xorb descriptions, which is all the
//! cache is read for.
//!
//! Readers hold a shared lock (flock) on `shards.lock`, beside `shards/`, from listing the
//! directory until their index is dropped, since a hit reads its shard again. Upkeep
//! deletes files, so it runs only under the exclusive lock, taken without waiting: while
//! anyone reads, it is simply left to a later session.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::shard_cache::{read_shard_file, shard_files, write_atomically};
use git_xet_core::shard::{FooterOptions, Shard};
use git_xet_io::platform::file::{self, Lock};

/// Merging starts when at least this many small shards have gathered.
pub const MERGE_MIN_FILES: usize = 64;
/// Shards below this size count as small.
pub const SMALL_SHARD_BYTES: u64 = 1 << 20;
/// A merged shard gathers small shards up to about this size.
pub const MERGED_SHARD_BYTES: u64 = 16 << 20;

const LOCK_FILE: &str = "shards.lock";

/// Runs upkeep if no one is reading `shards_dir`, then returns the lock held shared for
/// the caller's reading. `None` when the lock cannot be had (a read-only directory, a file
/// system without flock): reading goes on unprotected, as it is only a cache.
pub fn upkeep_then_lock_shared(shards_dir: &Path, max_bytes: u64) -> Option<File> {
    let path = shards_dir.with_file_name(LOCK_FILE);
    if let Err(e) = path.parent().map_or(Ok(()), fs::create_dir_all) {
        tracing::debug!("no shard cache lock ({}): {e}", path.display());
        return None;
    }
    let lock = match fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!("no shard cache lock ({}): {e}", path.display());
            return None;
        }
    };
    if file::lock(&lock, Lock::ExclusiveNow).is_ok() {
        upkeep(shards_dir, max_bytes);
    }
    // Turns the exclusive lock into a shared one, or waits for another process's upkeep.
    match file::lock(&lock, Lock::Shared) {
        Ok(()) => Some(lock),
        Err(e) => {
            tracing::debug!("cannot lock the shard cache: {e}");
            None
        }
    }
}

/// Evicts the oldest shards beyond `max_bytes`, then merges small shards once enough have
/// gathered. Only under the exclusive lock.
fn upkeep(shards_dir: &Path, max_bytes: u64) {
    let mut files = shard_files(shards_dir);
    super::evict_oldest(&mut files, max_bytes);
    let mut small: Vec<(PathBuf, fs::Metadata)> = files
        .into_iter()
        .filter(|(_, m)| m.len() < SMALL_SHARD_BYTES)
        .collect();
    if small.len() < MERGE_MIN_FILES {
        return;
    }
    small.sort_by_key(|(_, m)| m.modified().unwrap_or(UNIX_EPOCH));
    let mut groups: Vec<Vec<(PathBuf, fs::Metadata)>> = vec![Vec::new()];
    let mut group_bytes = 0;
    for file in small {
        if group_bytes + file.1.len() > MERGED_SHARD_BYTES {
            groups.push(Vec::new());
            group_bytes = 0;
        }
        group_bytes += file.1.len();
        groups.last_mut().expect("one group at least").push(file);
    }
    let (mut merged, mut into) = (0, 0);
    for group in groups.iter().filter(|g| g.len() > 1) {
        match merge(shards_dir, group) {
            Ok(n) => {
                merged += n;
                into += 1;
            }
            Err(e) => tracing::debug!("not merging cached shards: {e}"),
        }
    }
    if merged > 0 {
        tracing::debug!("shard cache: merged {merged} small shards into {into}");
    }
}

/// Writes the xorb descriptions of `group` as one shard, dated as its newest member so that
/// eviction keeps its place, then deletes the members. Returns how many were merged.
fn merge(shards_dir: &Path, group: &[(PathBuf, fs::Metadata)]) -> std::io::Result<usize> {
    let mut shard = Shard::new();
    let mut seen = HashSet::new();
    let mut members = Vec::new();
    for (path, meta) in group {
        // Unreadable members stay: the reader that meets them deletes them with a warning.
        let Ok(parsed) = read_shard_file(path) else {
            continue;
        };
        for xorb in parsed.shard.xorbs {
            if seen.insert(xorb.xorb_hash) {
                shard.xorbs.push(xorb);
            }
        }
        members.push((path, meta.modified().unwrap_or(UNIX_EPOCH)));
    }
    if members.len() < 2 {
        return Ok(0);
    }
    let bytes = shard.to_stored_bytes(&FooterOptions::default());
    let name = format!("{}.shard", blake3::hash(&bytes).to_hex());
    let path = write_atomically(shards_dir, &name, &bytes).map_err(std::io::Error::other)?;
    if let Some(newest) = members.iter().map(|(_, t)| *t).max() {
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(newest))?;
    }
    for (member, _) in &members {
        if **member != path {
            fs::remove_file(member)?;
        }
    }
    Ok(members.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard_cache::{save_own_shard, ShardIndex};
    use git_xet_core::hash::chunk_hash;
    use git_xet_core::shard::XorbBlock;
    use git_xet_core::MerkleHash;

    fn save_shards(dir: &Path, seeds: std::ops::Range<u16>) {
        for seed in seeds {
            let [a, b] = seed.to_le_bytes();
            let chunks: Vec<(MerkleHash, u32)> =
                (0..3u8).map(|i| (chunk_hash(&[a, b, i]), 100)).collect();
            let shard = Shard {
                files: vec![],
                xorbs: vec![XorbBlock::from_chunks(chunk_hash(&[a, b]), chunks, 0)],
            };
            save_own_shard(dir, &shard.to_stored_bytes(&FooterOptions::default())).unwrap();
        }
    }

    fn count_shards(dir: &Path) -> usize {
        shard_files(&dir.join("shards")).len()
    }

    fn finds_all(index: &mut ShardIndex, seeds: std::ops::Range<u16>) {
        for seed in seeds {
            let [a, b] = seed.to_le_bytes();
            let hit = index.lookup(&chunk_hash(&[a, b, 1])).expect("chunk found");
            assert_eq!((hit.xorb.xorb_hash, hit.index), (chunk_hash(&[a, b]), 1));
            assert!(hit.next_is(&chunk_hash(&[a, b, 2])), "run followed");
        }
    }

    #[test]
    fn many_small_shards_are_merged_and_every_chunk_is_still_found() {
        let dir = tempfile::tempdir().unwrap();
        save_shards(dir.path(), 0..(MERGE_MIN_FILES as u16 - 1));
        let mut index = ShardIndex::load(dir.path());
        assert_eq!(
            count_shards(dir.path()),
            MERGE_MIN_FILES - 1,
            "below the threshold"
        );
        finds_all(&mut index, 0..(MERGE_MIN_FILES as u16 - 1));
        drop(index);

        save_shards(dir.path(), 1000..1100);
        let mut index = ShardIndex::load(dir.path());
        assert_eq!(count_shards(dir.path()), 1, "merged into one");
        assert_eq!(index.num_chunks(), 3 * (MERGE_MIN_FILES - 1 + 100));
        finds_all(&mut index, 0..(MERGE_MIN_FILES as u16 - 1));
        finds_all(&mut index, 1000..1100);
    }

    #[test]
    fn no_merge_while_another_index_reads_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        save_shards(dir.path(), 0..10);
        let reading = ShardIndex::load(dir.path());
        save_shards(dir.path(), 10..110);
        let mut second = ShardIndex::load(dir.path());
        assert_eq!(count_shards(dir.path()), 110, "left alone while read");
        finds_all(&mut second, 0..110);
        drop((reading, second));
        let mut third = ShardIndex::load(dir.path());
        assert_eq!(count_shards(dir.path()), 1);
        finds_all(&mut third, 0..110);
    }
}
