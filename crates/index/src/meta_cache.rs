//! Stored xorb layouts kept in memory. A stored object never changes on the directory
//! store, but the index's record of it can: a layout recorded from an object that a racing
//! writer then replaced on S3 (Garage has no conditional PUT), or a wrong layout left by an
//! older server, is corrected by the next registration (`crate::cas::stored_xorb`), maybe in
//! another process. So an entry is trusted for [`META_CACHE_TTL`] only, then read again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::XorbMeta;
use git_xet_core::MerkleHash;

/// Total chunks of cached xorb layouts (about 40 bytes each).
const META_CACHE_CHUNKS: usize = 1 << 20;

/// How long a cached layout is used before the index is asked again.
pub(crate) const META_CACHE_TTL: Duration = Duration::from_secs(300);

/// The cache, shared by an index's threads (it locks itself).
#[derive(Default)]
pub(crate) struct MetaCache {
    layouts: Mutex<Layouts>,
}

#[derive(Default)]
struct Layouts {
    map: HashMap<MerkleHash, (Arc<XorbMeta>, Instant)>,
    chunks: usize,
}

impl MetaCache {
    pub fn get(&self, hash: &MerkleHash) -> Option<Arc<XorbMeta>> {
        let mut layouts = self.lock();
        let (meta, at) = layouts.map.get(hash)?;
        if at.elapsed() < META_CACHE_TTL {
            return Some(meta.clone());
        }
        layouts.drop_entry(hash);
        None
    }

    /// Caches a layout, replacing any other of the same xorb.
    pub fn insert(&self, meta: Arc<XorbMeta>) {
        let mut layouts = self.lock();
        layouts.drop_entry(&meta.hash());
        if layouts.chunks + meta.num_chunks() > META_CACHE_CHUNKS {
            layouts.map.clear();
            layouts.chunks = 0;
        }
        layouts.chunks += meta.num_chunks();
        layouts.map.insert(meta.hash(), (meta, Instant::now()));
    }

    /// Drops a layout (its xorb was collected, perhaps by another process).
    pub fn remove(&self, hash: &MerkleHash) {
        self.lock().drop_entry(hash);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Layouts> {
        self.layouts.lock().expect("meta cache")
    }
}

impl Layouts {
    fn drop_entry(&mut self, hash: &MerkleHash) {
        if let Some((meta, _)) = self.map.remove(hash) {
            self.chunks = self.chunks.saturating_sub(meta.num_chunks());
        }
    }
}
