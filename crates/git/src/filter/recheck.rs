//! The index's version of a file being cleaned, so the clean can compare the content with
//! the stored object first (see [`super::clean::Recheck`]).

use std::cell::RefCell;

use crate::filter::clean;
use crate::filter::index_reader::{Ask, IndexReader, Indexed};
use crate::git_index::{Entry, IndexFile, ObjectFormat};
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
    /// git's index file, read by this process itself.
    pub index_file: &'a RefCell<IndexFileState>,
}

/// git's index file as this filter process read it, at the first re-clean that asks.
///
/// The on-disk index is what `git cat-file` reads too: a filter process serves one git
/// command, which writes its own index update only when it ends (through `index.lock`), so
/// for the process's life the file holds what the command started from. Read once, checked
/// at load (not replaced while read); anything this reader does not fully understand
/// (split or sparse index, another index file named by `GIT_INDEX_FILE`) leaves the
/// question to cat-file.
#[derive(Default)]
pub enum IndexFileState {
    #[default]
    NotRead,
    Read(IndexFile),
    Unusable,
}

/// What the index file says about a pointer at a path.
#[derive(Debug, PartialEq, Eq)]
enum Holds {
    /// The stage-0 entry is this pointer's blob, byte for byte.
    Exactly,
    /// There is no entry for the path.
    Nothing,
    /// Something else (maybe the same pointer written differently), a conflict, or an
    /// index this process cannot read: cat-file decides.
    Unknown,
}

impl IndexFileState {
    fn holds(&mut self, repo: &Repo, pathname: &str, pointer: &Pointer) -> Holds {
        if matches!(self, IndexFileState::NotRead) {
            *self = match load(repo) {
                Ok(index) => IndexFileState::Read(index),
                Err(why) => {
                    tracing::debug!("asking git cat-file instead of the index file: {why}");
                    IndexFileState::Unusable
                }
            };
        }
        let IndexFileState::Read(index) = self else {
            return Holds::Unknown;
        };
        match index.get(pathname.as_bytes()) {
            None => Holds::Nothing,
            Some(Entry::Blob(id)) if *id == index.format.blob_id(pointer.to_text().as_bytes()) => {
                Holds::Exactly
            }
            Some(_) => Holds::Unknown,
        }
    }
}

impl IndexFileState {
    /// Whether the index's entry for `pathname` is this pointer, as this reader can tell: a
    /// clean of content git already stores there (a re-check), not a new version.
    pub fn has_exactly(&mut self, repo: &Repo, pathname: &str, pointer: &Pointer) -> bool {
        self.holds(repo, pathname, pointer) == Holds::Exactly
    }
}

fn load(repo: &Repo) -> Result<IndexFile, String> {
    if std::env::var_os("GIT_INDEX_FILE").is_some() {
        return Err("GIT_INDEX_FILE names another index".into());
    }
    let format = repo
        .config()
        .get(None, "extensions.objectformat")
        .map_err(|e| e.to_string())?;
    let format = ObjectFormat::from_config(format.as_deref())
        .ok_or_else(|| format!("unknown object format {format:?}"))?;
    IndexFile::load(&repo.git_dir.join("index"), format).map_err(|e| e.to_string())
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
    ///
    /// The index file answers first (in memory); the chunk store is checked without
    /// refreshing recency (the checkout that wrote the file used the chunks).
    fn in_chunk_store(&self, oid: &Oid, size: u64) -> bool {
        let Some(chunks) = self.chunks else {
            return false;
        };
        let pointer = Pointer::new(*oid, size);
        let holds = self
            .index_file
            .borrow_mut()
            .holds(self.repo, self.pathname, &pointer);
        if holds == Holds::Nothing || !chunks.holds(&oid.0, size) {
            return false;
        }
        holds == Holds::Exactly
            || self
                .pointer(Ask::Contents)
                .is_some_and(|p| p.oid == *oid && p.size == size)
    }
}
