//! Stored xorb layouts kept in memory. A layout never changes once stored (the key is its
//! content hash), so every index backend can cache them without invalidation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::server::index::XorbMeta;
use crate::xet::MerkleHash;

/// Total chunks of cached xorb layouts (about 40 bytes each).
const META_CACHE_CHUNKS: usize = 1 << 20;

/// The cache, shared by an index's threads (it locks itself).
#[derive(Default)]
pub(crate) struct MetaCache {
    layouts: Mutex<Layouts>,
}

#[derive(Default)]
struct Layouts {
    map: HashMap<MerkleHash, Arc<XorbMeta>>,
    chunks: usize,
}

impl MetaCache {
    pub fn get(&self, hash: &MerkleHash) -> Option<Arc<XorbMeta>> {
        self.lock().map.get(hash).cloned()
    }

    pub fn insert(&self, meta: Arc<XorbMeta>) {
        let mut layouts = self.lock();
        if layouts.chunks + meta.num_chunks() > META_CACHE_CHUNKS {
            layouts.map.clear();
            layouts.chunks = 0;
        }
        layouts.chunks += meta.num_chunks();
        layouts.map.insert(meta.hash(), meta);
    }

    /// Drops a layout (its xorb was collected, perhaps by another process).
    pub fn remove(&self, hash: &MerkleHash) {
        let mut layouts = self.lock();
        if let Some(meta) = layouts.map.remove(hash) {
            layouts.chunks = layouts.chunks.saturating_sub(meta.num_chunks());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Layouts> {
        self.layouts.lock().expect("meta cache")
    }
}
