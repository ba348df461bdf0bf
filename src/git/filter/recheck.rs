//! The index's view of a file being cleaned: when its stat data in the index still matches
//! the file and its object is stored, git is only re-checking a racily clean file, and the
//! clean can hash without storing (see [`super::clean::Recheck`]).

use crate::git::filter::clean;
use crate::git::filter::store::LfsStore;
use crate::git::repo::Repo;

/// The index's view of the file being cleaned (see [`clean::Recheck`]).
pub struct IndexRecheck<'a> {
    pub repo: &'a Repo,
    pub store: &'a LfsStore,
    pub pathname: &'a str,
}

impl clean::Recheck for IndexRecheck<'_> {
    fn unchanged_pointer(&self) -> Option<crate::lfs::pointer::Pointer> {
        use std::os::unix::fs::MetadataExt;
        let file = self.work_tree_file()?;
        let meta = std::fs::metadata(&file).ok()?;
        let listing = self
            .repo
            .git()
            .try_run([
                "--literal-pathspecs",
                "ls-files",
                "--debug",
                "-s",
                "--",
                self.pathname,
            ])
            .ok()??;
        let entry = IndexEntry::parse(&listing)?;
        // The index keeps 32 bits of size and inode.
        let unchanged = entry.size == meta.len() & 0xffff_ffff
            && entry.mtime == (meta.mtime(), meta.mtime_nsec())
            && entry.ino.is_none_or(|ino| ino == meta.ino() & 0xffff_ffff);
        if !unchanged {
            return None;
        }
        let text = self
            .repo
            .git()
            .try_run(["cat-file", "blob", &entry.blob])
            .ok()??;
        // git's output comes back without its final newline.
        let pointer = crate::lfs::pointer::Pointer::parse(format!("{text}\n").as_bytes()).ok()?;
        self.store.find(&pointer.oid, pointer.size)?;
        (pointer.size == meta.len()).then_some(pointer)
    }

    fn work_tree_file(&self) -> Option<std::path::PathBuf> {
        Some(self.repo.work_tree.as_ref()?.join(self.pathname))
    }
}

/// One entry of `git ls-files --debug -s`.
#[derive(Debug, PartialEq, Eq)]
struct IndexEntry {
    blob: String,
    mtime: (i64, i64),
    ino: Option<u64>,
    size: u64,
}

impl IndexEntry {
    fn parse(listing: &str) -> Option<IndexEntry> {
        let mut lines = listing.lines();
        let blob = lines.next()?.split_whitespace().nth(1)?.to_string();
        let (mut mtime, mut ino, mut size) = (None, None, None);
        for line in lines {
            for field in line.trim().split('\t') {
                let Some((key, value)) = field.split_once(": ") else {
                    continue;
                };
                match key {
                    "mtime" => {
                        let (s, ns) = value.split_once(':')?;
                        mtime = Some((s.parse().ok()?, ns.parse().ok()?));
                    }
                    "ino" => ino = value.parse().ok(),
                    "size" => size = value.parse().ok(),
                    _ => {}
                }
            }
        }
        Some(IndexEntry {
            blob,
            mtime: mtime?,
            ino: ino.filter(|&i| i != 0),
            size: size?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_entries_parse_from_ls_files_debug() {
        let listing = "100644 d6163e174d2344a545727ec990a79b4e5f825ebd 0\tdir/model bin\n  ctime: 1795261665:185642751\n  mtime: 1795261665:185642752\n  dev: 65024\tino: 10183081\n  uid: 0\tgid: 0\n  size: 1073741824\tflags: 0\n";
        assert_eq!(
            IndexEntry::parse(listing),
            Some(IndexEntry {
                blob: "d6163e174d2344a545727ec990a79b4e5f825ebd".into(),
                mtime: (1795261665, 185642752),
                ino: Some(10183081),
                size: 1073741824,
            })
        );
        assert_eq!(IndexEntry::parse(""), None);
        assert_eq!(
            IndexEntry::parse("100644 abc 0\tx\n  mtime: bad\n  size: 1\n"),
            None
        );
    }
}
