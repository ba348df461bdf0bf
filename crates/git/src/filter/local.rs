//! The filter and the per-user chunk store (docs/store.md): objects rebuilt from local
//! chunks with no network, and whole copies that leave `.git/lfs/objects` once git has them.

use std::path::PathBuf;

use super::Filter;
use git_xet_client::store::{ChunkStore, Rebuilt};
use git_xet_lfs::pointer::Pointer;

impl Filter {
    pub(super) fn chunks(&mut self) -> Option<&ChunkStore> {
        let repo = &self.repo;
        self.chunk_store
            .get_or_insert_with(|| crate::store::open(repo))
            .as_ref()
    }

    /// The object rebuilt from the chunk store into a temporary file (verified chunk by
    /// chunk and against its oid), when the store holds all of it: no network.
    pub(super) fn rebuild_local(&mut self, pointer: &Pointer) -> Option<PathBuf> {
        let lfs = self.store.clone();
        let store = self.chunks()?;
        lfs.create_tmp_dir().ok()?;
        let tmp = lfs.temp_path("rebuild");
        match store.rebuild(&pointer.oid.0, pointer.size, &tmp) {
            Ok(Rebuilt::Done) => Some(tmp),
            Ok(Rebuilt::Missing) => None,
            Ok(Rebuilt::Damaged(why)) => {
                tracing::warn!("{why}; fetching {} again", pointer.oid);
                None
            }
            Err(e) => {
                tracing::warn!("rebuilding {} from the chunk store: {e}", pointer.oid);
                None
            }
        }
    }

    /// Whether the whole copy of a fetched object may leave `.git/lfs/objects` once git has
    /// it: the chunk store can rebuild it, and `xet.keepObjects` is off.
    pub(super) fn drop_whole(&mut self, pointer: &Pointer) -> bool {
        !self.keep_objects
            && self
                .chunks()
                .is_some_and(|s| s.has(&pointer.oid.0, pointer.size))
    }
}
