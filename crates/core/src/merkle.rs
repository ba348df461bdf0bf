//! The aggregated hash tree with variable fan-out (docs/formats.md, "Merkle tree").
//!
//! Each level groups consecutive nodes: a group ends after a node whose hash's last word is a
//! multiple of 4 once the group has at least 3 nodes, after 9 nodes, or at the end of the level.
//! Because a group's end depends only on nodes already seen, levels can be built as the
//! chunks stream in; [`MerkleBuilder`] keeps at most 9 pending nodes per level, so a file of any
//! size hashes in a few kilobytes.

use crate::constants::{INTERNAL_NODE_KEY, MAX_CHILDREN, MEAN_BRANCHING_FACTOR};
use crate::hash::MerkleHash;

/// Hash of an internal node over its children, as lines `"{hash} : {size}\n"`.
///
/// The lines are written into one buffer and hashed with one call: a call per line and a
/// `String` per size made this a third of a 1 GiB file hash (3.3 ms for 16,384 chunks).
pub fn internal_node_hash(children: &[(MerkleHash, u64)]) -> (MerkleHash, u64) {
    const LINE_MAX: usize = 64 + 3 + 20 + 1;
    let mut hasher = blake3::Hasher::new_keyed(&INTERNAL_NODE_KEY);
    let mut total = 0u64;
    let mut buf = [0u8; LINE_MAX * MAX_CHILDREN];
    let mut len = 0;
    for group in children.chunks(MAX_CHILDREN) {
        for (hash, size) in group {
            let mut hex = [0u8; 64];
            hash.write_hex(&mut hex);
            buf[len..len + 64].copy_from_slice(&hex);
            buf[len + 64..len + 67].copy_from_slice(b" : ");
            len += 67;
            len += write_decimal(*size, &mut buf[len..]);
            buf[len] = b'\n';
            len += 1;
            total += size;
        }
        hasher.update(&buf[..len]);
        len = 0;
    }
    (MerkleHash::from_bytes(*hasher.finalize().as_bytes()), total)
}

/// Writes `n` in decimal at the start of `out` (room for 20 digits); returns the length.
fn write_decimal(mut n: u64, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    out[..len].copy_from_slice(&digits[i..]);
    len
}

/// One level of the tree under construction: the open group and how many nodes it ever held.
#[derive(Default, Clone)]
struct Level {
    group: Vec<(MerkleHash, u64)>,
    total: u64,
}

/// Streaming Merkle root computation.
#[derive(Default, Clone)]
pub struct MerkleBuilder {
    levels: Vec<Level>,
}

impl MerkleBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of leaves pushed so far.
    pub fn len(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.total)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, hash: MerkleHash, size: u64) {
        self.push_at(0, (hash, size));
    }

    fn push_at(&mut self, level: usize, node: (MerkleHash, u64)) {
        if self.levels.len() == level {
            self.levels.push(Level::default());
        }
        let lvl = &mut self.levels[level];
        lvl.group.push(node);
        lvl.total += 1;
        let n = lvl.group.len();
        let cut = (n >= 3 && node.0.last_word() % MEAN_BRANCHING_FACTOR == 0) || n == MAX_CHILDREN;
        if cut {
            let merged = internal_node_hash(&lvl.group);
            lvl.group.clear();
            self.push_at(level + 1, merged);
        }
    }

    /// The root: 32 zero bytes for no leaves, the leaf itself for one.
    pub fn finish(mut self) -> MerkleHash {
        let mut level = 0;
        loop {
            let Some(lvl) = self.levels.get_mut(level) else {
                return MerkleHash::ZERO;
            };
            if lvl.total <= 1 {
                // A level that only ever held one node holds the root.
                return lvl.group.first().map_or(MerkleHash::ZERO, |n| n.0);
            }
            if !lvl.group.is_empty() {
                let merged = internal_node_hash(&lvl.group);
                lvl.group.clear();
                self.push_at(level + 1, merged);
            }
            level += 1;
        }
    }
}

/// Merkle root of a complete list of (hash, size) leaves.
pub fn merkle_root(leaves: &[(MerkleHash, u64)]) -> MerkleHash {
    let mut builder = MerkleBuilder::new();
    for &(hash, size) in leaves {
        builder.push(hash, size);
    }
    builder.finish()
}
