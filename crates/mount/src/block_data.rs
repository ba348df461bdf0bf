//! The bytes of blocks and of reads. A block's buffer goes back to a small pool when the
//! last reader lets go of it, so that a long read does not fault in fresh pages for every
//! block (a third of a cold read's copying cost); a read inside one block is answered from
//! the block itself, with no copy.

use std::ops::{Deref, Range};
use std::sync::{Arc, Mutex, Weak};

/// Idle buffers kept for the next blocks (16 MiB of them, each
/// [`BLOCK_SIZE`](crate::blocks::BLOCK_SIZE)).
const POOLED: usize = (16 << 20) / crate::blocks::BLOCK_SIZE as usize;

/// Spare block buffers.
#[derive(Default)]
pub struct Pool(Mutex<Vec<Vec<u8>>>);

impl Pool {
    /// An empty buffer of at least `capacity` bytes.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let spare = self.0.lock().expect("block pool").pop();
        match spare {
            Some(mut buf) if buf.capacity() >= capacity => {
                buf.clear();
                buf
            }
            _ => Vec::with_capacity(capacity),
        }
    }

    fn give(&self, buf: Vec<u8>) {
        let mut spare = self.0.lock().expect("block pool");
        if spare.len() < POOLED {
            spare.push(buf);
        }
    }
}

/// A block's bytes; its buffer returns to the pool when dropped.
pub struct Block {
    data: Vec<u8>,
    pool: Weak<Pool>,
}

impl Block {
    pub fn new(data: Vec<u8>, pool: &Arc<Pool>) -> Block {
        Block {
            data,
            pool: Arc::downgrade(pool),
        }
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.give(std::mem::take(&mut self.data));
        }
    }
}

/// The bytes of a read: its own, or a part of one block.
pub enum Data {
    Owned(Vec<u8>),
    Block(Arc<Block>, Range<usize>),
}

impl Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Owned(v) => v,
            Data::Block(b, r) => &b[r.clone()],
        }
    }
}

impl From<Vec<u8>> for Data {
    fn from(v: Vec<u8>) -> Data {
        Data::Owned(v)
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Data({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_to_the_pool_once_no_reader_holds_them() {
        let pool = Arc::new(Pool::default());
        let mut buf = pool.take(100);
        buf.extend_from_slice(&[1, 2, 3]);
        let at = buf.as_ptr();
        let block = Arc::new(Block::new(buf, &pool));
        let read = Data::Block(block.clone(), 1..3);
        drop(block);
        assert_eq!(&*read, &[2, 3]);
        assert!(pool.0.lock().unwrap().is_empty(), "a reader still holds it");
        drop(read);
        let again = pool.take(100);
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
        // Too small for what is asked: a new buffer.
        drop(Block::new(again, &pool));
        assert!(pool.take(1000).capacity() >= 1000);
    }
}
