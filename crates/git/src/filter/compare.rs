//! Checks content arriving piece by piece against an object already in the store.
//!
//! When git re-checks a racily clean file, the content is almost always the stored object's.
//! Comparing bytes with the stored copy (mapped, in page cache right after a checkout) costs
//! a fraction of hashing them with sha256, and equal bytes give the stored object's oid.
//! When a difference turns up, the caller takes the equal prefix from the stored copy.

use std::fs::File;
use std::path::Path;

use bytes::Bytes;
use git_xet_io::platform::mmap::Mapper;

/// Stored bytes are mapped this many at a time.
const WINDOW: u64 = 8 << 20;

pub struct StoredComparison {
    mapper: Mapper,
    file: File,
    len: u64,
    /// Content bytes found equal so far.
    matched: u64,
    differed: bool,
    window: Bytes,
    window_start: u64,
}

impl StoredComparison {
    pub fn open(path: &Path) -> std::io::Result<StoredComparison> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(StoredComparison {
            // SAFETY: objects in the LFS store are written once under their oid and replaced
            // only by rename, never truncated, so a mapping keeps its pages.
            mapper: unsafe { Mapper::new() },
            file,
            len,
            matched: 0,
            differed: false,
            window: Bytes::new(),
            window_start: 0,
        })
    }

    /// Whether `data`, the content's next piece, equals the stored bytes at that offset.
    /// After `false`, nothing more is compared.
    pub fn matches(&mut self, mut data: &[u8]) -> std::io::Result<bool> {
        if self.differed || self.len - self.matched < data.len() as u64 {
            self.differed = true;
            return Ok(false);
        }
        let start = self.matched;
        while !data.is_empty() {
            let at = self.matched;
            if at >= self.window_start + self.window.len() as u64 {
                self.window_start = at - at % WINDOW;
                let len = (self.len - self.window_start).min(WINDOW) as usize;
                self.window = self
                    .mapper
                    .map_range(&self.file, self.window_start, len, true)?;
            }
            let from = (at - self.window_start) as usize;
            let n = data.len().min(self.window.len() - from);
            if data[..n] != self.window[from..from + n] {
                self.matched = start;
                self.differed = true;
                return Ok(false);
            }
            self.matched += n as u64;
            data = &data[n..];
        }
        Ok(true)
    }

    /// Whether the content so far is the whole stored object.
    pub fn complete(&self) -> bool {
        !self.differed && self.matched == self.len
    }

    /// Hands the content matched so far, read back from the stored copy, to `each` in
    /// pieces, while it returns true.
    pub fn each_matched(&self, mut each: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
        let mut offset = 0;
        while offset < self.matched {
            let len = (self.matched - offset).min(WINDOW) as usize;
            if !each(&self.mapper.map_range(&self.file, offset, len, true)?) {
                break;
            }
            offset += len as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn hash_of_matched(cmp: &StoredComparison) -> Vec<u8> {
        let mut hasher = Sha256::new();
        cmp.each_matched(|piece| {
            hasher.update(piece);
            true
        })
        .unwrap();
        hasher.finalize().to_vec()
    }

    fn stored(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Feeds `data` in pieces of `piece` bytes; returns how many matched before the first
    /// difference, and the comparison.
    fn feed(path: &Path, data: &[u8], piece: usize) -> (usize, StoredComparison) {
        let mut cmp = StoredComparison::open(path).unwrap();
        let mut fed = 0;
        for p in data.chunks(piece) {
            if !cmp.matches(p).unwrap() {
                break;
            }
            fed += p.len();
        }
        (fed, cmp)
    }

    #[test]
    fn equal_content_matches_across_windows_in_any_piece_size() {
        let data = content(2 * WINDOW as usize + 12345);
        let (_dir, path) = stored(&data);
        for piece in [1000, 65516, 3 << 20, data.len()] {
            let (fed, cmp) = feed(&path, &data, piece);
            assert_eq!(fed, data.len());
            assert!(cmp.complete());
            assert_eq!(hash_of_matched(&cmp), Sha256::digest(&data).to_vec());
        }
    }

    #[test]
    fn a_difference_stops_at_the_piece_and_the_prefix_hash_is_of_the_content() {
        let data = content(WINDOW as usize + 70_000);
        let (_dir, path) = stored(&data);
        for at in [
            0,
            65515,
            65516,
            WINDOW as usize - 1,
            WINDOW as usize,
            data.len() - 1,
        ] {
            let mut other = data.clone();
            other[at] ^= 1;
            let (fed, cmp) = feed(&path, &other, 65516);
            assert_eq!(fed, at - at % 65516, "difference at {at}");
            assert!(!cmp.complete());
            assert_eq!(
                hash_of_matched(&cmp),
                Sha256::digest(&other[..fed]).to_vec()
            );
        }
    }

    #[test]
    fn longer_or_shorter_content_is_not_complete() {
        let data = content(100_000);
        let (_dir, path) = stored(&data);
        let mut longer = data.clone();
        longer.push(0);
        let (fed, cmp) = feed(&path, &longer, 65516);
        assert_eq!(fed, 65516);
        assert!(!cmp.complete());
        let (fed, cmp) = feed(&path, &data[..99_999], 65516);
        assert_eq!(fed, 99_999);
        assert!(!cmp.complete());
        let (_empty_dir, empty) = stored(&[]);
        let (fed, cmp) = feed(&empty, &data, 65516);
        assert_eq!(fed, 0);
        assert!(!cmp.complete());
    }
}
