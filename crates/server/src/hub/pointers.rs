//! Which small blobs of a hosted repository are LFS pointers, remembered: a blob never
//! changes (its id is its content's hash), and the Hub's listings would otherwise read
//! every small blob again at each request. Kept per repository directory (a blob id of
//! one repository says nothing about another's), bounded by [`MAX_CACHED_BLOBS`] in all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use git_xet_core::lfs::pointer::Pointer;

/// Blobs remembered in all (each some 100 bytes); past it the cache starts over.
pub const MAX_CACHED_BLOBS: usize = 1 << 17;

#[derive(Default)]
struct Known {
    /// Per repository directory: blob id → its pointer, or `None` for a blob that is not one.
    repos: HashMap<PathBuf, HashMap<String, Option<Pointer>>>,
    count: usize,
}

fn known() -> &'static Mutex<Known> {
    static KNOWN: OnceLock<Mutex<Known>> = OnceLock::new();
    KNOWN.get_or_init(Mutex::default)
}

fn lock() -> std::sync::MutexGuard<'static, Known> {
    known().lock().unwrap_or_else(|p| p.into_inner())
}

/// What is known of `oid` in `dir`: `Some(pointer or None)` when it was read before.
pub fn lookup(dir: &Path, oid: &str) -> Option<Option<Pointer>> {
    lock().repos.get(dir)?.get(oid).cloned()
}

/// Remembers what the blobs `read` of `dir` hold.
pub fn remember(dir: &Path, read: impl IntoIterator<Item = (String, Option<Pointer>)>) {
    let mut known = lock();
    for (oid, pointer) in read {
        if known.count >= MAX_CACHED_BLOBS {
            known.repos.clear();
            known.count = 0;
        }
        let blobs = known.repos.entry(dir.to_path_buf()).or_default();
        if blobs.insert(oid, pointer).is_none() {
            known.count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_remembered_per_repository() {
        let (a, b) = (
            Path::new("/test/pointers/a.git"),
            Path::new("/test/pointers/b.git"),
        );
        let pointer = Pointer::new(git_xet_core::lfs::pointer::Oid([7; 32]), 12);
        remember(
            a,
            [
                ("1".repeat(40), Some(pointer.clone())),
                ("2".repeat(40), None),
            ],
        );
        assert_eq!(lookup(a, &"1".repeat(40)), Some(Some(pointer)));
        assert_eq!(lookup(a, &"2".repeat(40)), Some(None));
        assert_eq!(lookup(a, &"3".repeat(40)), None);
        assert_eq!(
            lookup(b, &"1".repeat(40)),
            None,
            "another repository's blob"
        );
    }
}
