//! A streaming fetch's bytes cut into the blocks of its run.

use std::sync::Arc;

use super::{Slot, BLOCK_SIZE};
use crate::block_data::{Block, Pool};
use crate::MountError;
use git_xet_core::lfs::pointer::Pointer;

/// Cuts the bytes of a streaming fetch into the blocks of its run. Bytes come in order,
/// except that a piece's first bytes may come after the rest of it (they wait for the
/// read before it, `crate::edges`): the gap is held as a hole and its block is filled once
/// the hole is, while the blocks after it are filled as their bytes arrive.
pub(super) struct Filler {
    run: Vec<(u64, Arc<Slot>)>,
    /// Per block of the run: its bytes so far, while it is not filled.
    bufs: Vec<Option<Vec<u8>>>,
    pub(super) filled: Vec<bool>,
    /// Bytes of the run taken so far from its start, holes included.
    received: u64,
    /// Ranges `start..end` below `received` whose bytes come later (zeros until then).
    holes: Vec<(u64, u64)>,
    /// Bytes the run should get.
    len: u64,
    pool: Arc<Pool>,
}

impl Filler {
    pub(super) fn new(run: Vec<(u64, Arc<Slot>)>, len: u64, pool: Arc<Pool>) -> Filler {
        let n = run.len();
        Filler {
            run,
            bufs: (0..n).map(|_| None).collect(),
            filled: vec![false; n],
            received: 0,
            holes: Vec::new(),
            len,
            pool,
        }
    }

    pub(super) fn push(&mut self, at: u64, data: &[u8]) {
        let end = (at + data.len() as u64).min(self.len);
        if end <= at {
            return;
        }
        // Below `received`: only the holes take bytes (the rest is a retry's repetition).
        let mut i = 0;
        while i < self.holes.len() {
            let (hs, he) = self.holes[i];
            let (s, e) = (hs.max(at), he.min(end));
            if s >= e {
                i += 1;
                continue;
            }
            self.holes.remove(i);
            for part in [(hs, s), (e, he)] {
                if part.0 < part.1 {
                    self.holes.insert(i, part);
                    i += 1;
                }
            }
            self.put(s, Some(&data[(s - at) as usize..(e - at) as usize]), e - s);
        }
        if end <= self.received {
            return;
        }
        if at > self.received {
            let gap = at - self.received;
            self.holes.push((self.received, at));
            self.put(self.received, None, gap);
        }
        let from = self.received.max(at);
        self.put(
            from,
            Some(&data[(from - at) as usize..(end - at) as usize]),
            end - from,
        );
    }

    /// Bytes `data` (None: `len` zeros, a hole) at `pos` of the run: appended past
    /// `received`, written in place below it; fills the blocks that became whole.
    fn put(&mut self, mut pos: u64, data: Option<&[u8]>, len: u64) {
        let mut done = 0u64;
        while done < len {
            let b = (pos / BLOCK_SIZE) as usize;
            let o = (pos % BLOCK_SIZE) as usize;
            let n = (BLOCK_SIZE - pos % BLOCK_SIZE).min(len - done) as usize;
            if self.filled[b] {
                (pos, done) = (pos + n as u64, done + n as u64);
                continue;
            }
            let pool = &self.pool;
            let buf = self.bufs[b].get_or_insert_with(|| pool.take(BLOCK_SIZE as usize));
            let part = data.map(|d| &d[done as usize..done as usize + n]);
            match part {
                Some(p) if o < buf.len() => buf[o..o + n].copy_from_slice(p),
                Some(p) => buf.extend_from_slice(p),
                None => buf.resize(o + n, 0),
            }
            (pos, done) = (pos + n as u64, done + n as u64);
            self.received = self.received.max(pos);
            self.fill_if_whole(b);
        }
    }

    fn fill_if_whole(&mut self, b: usize) {
        let start = b as u64 * BLOCK_SIZE;
        let end = (start + BLOCK_SIZE).min(self.len);
        let whole = self.bufs[b]
            .as_ref()
            .is_some_and(|buf| buf.len() as u64 == end - start);
        if !whole || self.holes.iter().any(|&(s, e)| s < end && start < e) {
            return;
        }
        let buf = self.bufs[b].take().expect("checked above");
        let block = Arc::new(Block::new(buf, &self.pool));
        let slot = &self.run[b].1;
        *slot.result.lock().expect("slot") = Some(Ok(block));
        slot.done.notify_all();
        self.filled[b] = true;
    }

    /// The blocks not filled (all of them filled after a fetch that succeeded).
    pub(super) fn unfilled(&self) -> impl Iterator<Item = &(u64, Arc<Slot>)> {
        self.run
            .iter()
            .zip(&self.filled)
            .filter(|(_, f)| !**f)
            .map(|(r, _)| r)
    }

    /// After a fetch that succeeded: every block must have been filled.
    pub(super) fn finish(&mut self, object: &Pointer) -> Result<(), MountError> {
        match self.filled.iter().position(|f| !f) {
            None => Ok(()),
            Some(b) => Err(MountError::Short {
                oid: object.oid.to_string(),
                offset: (self.run[0].0 + b as u64) * BLOCK_SIZE,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte(i: u64) -> u8 {
        (i.wrapping_mul(31) ^ (i >> 11)) as u8
    }

    fn bytes(r: std::ops::Range<u64>) -> Vec<u8> {
        r.map(byte).collect()
    }

    fn filler(blocks: u64, len: u64) -> Filler {
        let run = (10..10 + blocks).map(|b| (b, Arc::default())).collect();
        Filler::new(run, len, Arc::default())
    }

    /// Per block: its bytes once filled.
    fn blocks(f: &Filler) -> Vec<Option<Vec<u8>>> {
        f.run
            .iter()
            .map(|(_, slot)| {
                let r = slot.result.lock().unwrap();
                r.as_ref().map(|b| b.as_ref().unwrap().to_vec())
            })
            .collect()
    }

    fn push_in_pieces(f: &mut Filler, r: std::ops::Range<u64>) {
        let mut at = r.start;
        while at < r.end {
            let to = (at + 65_000).min(r.end);
            f.push(at, &bytes(at..to));
            at = to;
        }
    }

    #[test]
    fn a_piece_s_first_bytes_after_the_rest_fill_their_block_last() {
        let len = 2 * BLOCK_SIZE + 1000;
        let mut f = filler(3, len);
        // The first 5000 bytes wait for the read before: the blocks after theirs do not.
        push_in_pieces(&mut f, 5000..len);
        let got = blocks(&f);
        assert!(got[0].is_none(), "block 0 has a hole");
        assert_eq!(
            got[1].as_deref(),
            Some(&bytes(BLOCK_SIZE..2 * BLOCK_SIZE)[..])
        );
        assert_eq!(got[2].as_deref(), Some(&bytes(2 * BLOCK_SIZE..len)[..]));
        assert!(f
            .finish(&Pointer::new(git_xet_core::lfs::pointer::Oid([7; 32]), len))
            .is_err());
        f.push(0, &bytes(0..5000));
        assert_eq!(blocks(&f)[0].as_deref(), Some(&bytes(0..BLOCK_SIZE)[..]));
        assert!(f
            .finish(&Pointer::new(git_xet_core::lfs::pointer::Oid([7; 32]), len))
            .is_ok());
    }

    #[test]
    fn a_hole_across_a_block_boundary_holds_both_blocks_and_a_retry_changes_nothing() {
        let len = 3 * BLOCK_SIZE;
        let mut f = filler(3, len);
        let hole = BLOCK_SIZE - 100..BLOCK_SIZE + 100;
        push_in_pieces(&mut f, 0..hole.start);
        // A retry starts again at 0: what was taken is not taken twice.
        f.push(0, &bytes(0..1000));
        push_in_pieces(&mut f, hole.end..len);
        let got = blocks(&f);
        assert!(got[0].is_none() && got[1].is_none());
        assert_eq!(got[2].as_deref(), Some(&bytes(2 * BLOCK_SIZE..len)[..]));
        // The hole's bytes in two parts, with bytes around them that are repetitions.
        f.push(hole.start - 10, &bytes(hole.start - 10..hole.start + 150));
        assert!(blocks(&f)[0].is_some() && blocks(&f)[1].is_none());
        f.push(hole.start + 150, &bytes(hole.start + 150..hole.end + 10));
        let got = blocks(&f);
        for (b, block) in got.iter().enumerate() {
            let b = b as u64;
            let want = bytes(b * BLOCK_SIZE..(b + 1) * BLOCK_SIZE);
            assert_eq!(block.as_deref(), Some(&want[..]), "block {b}");
        }
    }
}
