//! The index's version of a file being cleaned, so the clean can compare the content with
//! the stored object first (see [`super::clean::Recheck`]).

use std::cell::RefCell;

use crate::filter::clean;
use crate::filter::index_reader::{Ask, IndexReader, Indexed};
use crate::repo::Repo;
use git_xet_client::store::ChunkStore;
use git_xet_lfs::pointer::{Oid, Pointer, MAX_POINTER_SIZE};

/// A path's version in git's index (see [`clean::Recheck`]).
pub struct IndexRecheck<'a> {
    pub repo: &'a Repo,
    pub pathname: &'a str,
    /// The chunk store, when whole objects it holds are not kept (`xet.keepObjects` off).
    pub chunks: Option<&'a ChunkStore>,
    /// Asks the index without a git command per file.
    pub index: &'a RefCell<IndexReader>,
}

impl IndexRecheck<'_> {
    fn pointer(&self, how: Ask) -> Option<Pointer> {
        match self
            .index
            .borrow_mut()
            .pointer(self.repo, self.pathname, how)
        {
            Indexed::Pointer(p) => return Some(p),
            Indexed::Other => return None,
            Indexed::Unknown => {} // asked the slow way below
        }
        // `:0:` names the index's entry; what follows is the path, taken literally.
        let spec = format!(":0:{}", self.pathname);
        let git = self.repo.git();
        let size: usize = git
            .try_run(["cat-file", "-s", &spec])
            .ok()??
            .trim()
            .parse()
            .ok()?;
        if size > MAX_POINTER_SIZE {
            return None; // not a pointer: the file is not in LFS in the index
        }
        let text = git.try_run(["cat-file", "blob", &spec]).ok()??;
        // git's output comes back without its final newline.
        Pointer::parse(format!("{text}\n").as_bytes()).ok()
    }
}

impl clean::Recheck for IndexRecheck<'_> {
    fn indexed_pointer(&self) -> Option<Pointer> {
        self.pointer(Ask::SizeFirst)
    }

    fn work_tree_file(&self) -> Option<std::path::PathBuf> {
        Some(self.repo.work_tree.as_ref()?.join(self.pathname))
    }

    /// Only for the content the index already holds for this path (a re-clean after a
    /// checkout): new content stays whole even when the store has it (pushed from another
    /// clone), since this clone's push reads it from `.git/lfs/objects`.
    fn in_chunk_store(&self, oid: &Oid, size: u64) -> bool {
        self.chunks.is_some_and(|c| c.has(&oid.0, size))
            && self
                .pointer(Ask::Contents)
                .is_some_and(|p| p.oid == *oid && p.size == size)
    }
}
