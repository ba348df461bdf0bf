//! Stored xorb layouts kept in memory. A layout never changes once stored (the key is its
//! content hash), so every index backend can cache them without invalidation.

use std::collections::HashMap;
use std::sync::Arc;

use crate::server::index::XorbMeta;
use crate::xet::MerkleHash;

/// Total chunks of cached xorb layouts (about 40 bytes each).
const META_CACHE_CHUNKS: usize = 1 << 20;

#[derive(Default)]
pub(crate) struct MetaCache {
    pub map: HashMap<MerkleHash, Arc<XorbMeta>>,
    chunks: usize,
}

impl MetaCache {
    pub fn insert(&mut self, meta: Arc<XorbMeta>) {
        if self.chunks + meta.num_chunks() > META_CACHE_CHUNKS {
            self.map.clear();
            self.chunks = 0;
        }
        self.chunks += meta.num_chunks();
        self.map.insert(meta.hash(), meta);
    }

    /// Drops a layout (its xorb was collected, perhaps by another process).
    pub fn remove(&mut self, hash: &MerkleHash) {
        if let Some(meta) = self.map.remove(hash) {
            self.chunks = self.chunks.saturating_sub(meta.num_chunks());
        }
    }
}
