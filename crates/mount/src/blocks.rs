//! Range reads of LFS objects in aligned blocks. A block is fetched once however many
//! readers want it at the same time (single flight: the first starts the fetch, the others
//! wait for it), kept in a memory LRU of bounded size, and the blocks after it are fetched
//! ahead when reads of a file are sequential. A failed fetch is not kept: the next read
//! asks again (a server that comes back serves it). Under the blocks, the client's chunk
//! cache on disk keeps xorb ranges across blocks and mounts (its own size bound, LRU).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::block_data::{Block, Data, Pool};
use crate::MountError;
use filler::Filler;
use git_xet_core::lfs::pointer::Pointer;

/// 128 KiB, a FUSE read (max_read): a read at a random offset fetches little more than it
/// asks (two or three chunks), so that one tensor read through a map costs about its size.
/// Read-ahead fetches runs of blocks, one range each (`blocks_ahead.rs`).
pub const BLOCK_SIZE: u64 = 128 << 10;
/// Blocks kept in memory (192 MiB): the read-ahead and what readers are reading.
pub const MEMORY_BLOCKS: usize = (192 << 20) / BLOCK_SIZE as usize;
/// A stream of reads is sequential once it has read this much without a jump.
pub const SEQUENTIAL_AFTER: u64 = 2 * BLOCK_SIZE;
/// Readers of one object told apart (a data loader's workers each read their own way).
const STREAMS: usize = 16;

/// Where a streaming fetch puts its bytes: `(offset from the fetch's start, bytes)`, in
/// order, except that a piece's first bytes may come after the rest of it (the gap is
/// filled later); a fetch that is retried starts again at offset 0.
pub type Sink = Box<dyn FnMut(u64, &[u8]) + Send>;

/// Where blocks come from: `len` bytes of the object at `start` (fewer only at its end);
/// `len` is one block or a run of them.
pub trait RangeSource: Send + Sync + 'static {
    fn fetch(&self, object: &Pointer, start: u64, len: u64) -> Result<Vec<u8>, MountError>;

    /// As [`fetch`](Self::fetch), handing the bytes to `sink` as they arrive, so that the
    /// first blocks of a long run are read before its end is fetched. By default at once.
    fn fetch_streaming(
        &self,
        object: &Pointer,
        start: u64,
        len: u64,
        mut sink: Sink,
    ) -> Result<(), MountError> {
        let data = self.fetch(object, start, len)?;
        sink(0, &data);
        Ok(())
    }
}

#[path = "blocks_ahead.rs"]
mod ahead;
#[path = "blocks_filler.rs"]
mod filler;
pub use ahead::{ahead_of, window_of, CAREFUL_RUN, MAX_WINDOW, READ_AHEAD};

type Key = ([u8; 32], u64);

#[derive(Default)]
struct Slot {
    /// None while the fetch runs.
    result: Mutex<Option<Result<Arc<Block>, MountError>>>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    slots: HashMap<Key, (Arc<Slot>, u64)>,
    /// Recency clock for the LRU.
    tick: u64,
    /// Per object, its streams of reads: (where the last read ended, bytes read in a row).
    streams: HashMap<[u8; 32], Vec<(u64, u64)>>,
}

/// Blocks of LFS objects, shared by every reader of a mount.
pub struct BlockCache<S: RangeSource> {
    source: Arc<S>,
    state: Arc<Mutex<State>>,
    timeout: Duration,
    memory_blocks: usize,
    pool: Arc<Pool>,
}

impl<S: RangeSource> BlockCache<S> {
    /// `timeout`: how long a read waits for a block before it fails (EIO).
    pub fn new(source: S, timeout: Duration) -> Self {
        BlockCache {
            source: Arc::new(source),
            state: Default::default(),
            timeout,
            memory_blocks: MEMORY_BLOCKS,
            pool: Default::default(),
        }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// Bytes `offset..offset + size` of `object` (fewer at its end): a part of one block,
    /// or a copy when the range spans blocks.
    pub fn read(&self, object: &Pointer, offset: u64, size: u32) -> Result<Data, MountError> {
        let end = object.size.min(offset.saturating_add(u64::from(size)));
        if offset >= end {
            return Ok(Data::Owned(Vec::new()));
        }
        let first = offset / BLOCK_SIZE;
        let last = (end - 1) / BLOCK_SIZE;
        let sequential = {
            let mut state = self.state.lock().expect("block state");
            let streams = state.streams.entry(object.oid.0).or_default();
            // The stream this read continues, moved to the front (most recent).
            let run = match streams.iter().position(|&(e, _)| e == offset) {
                Some(i) => streams.remove(i).1,
                None => 0,
            } + (end - offset);
            streams.insert(0, (end, run));
            streams.truncate(STREAMS);
            (run > SEQUENTIAL_AFTER).then_some(run)
        };
        let slots = self.start(object, first, last);
        if let Some(run) = sequential {
            self.read_ahead(object, last, run);
        }
        let mut parts = Vec::with_capacity(slots.len());
        let mut got = 0u64;
        for (b, slot) in (first..=last).zip(slots) {
            let data = self.wait(&slot, object, b)?;
            let block_start = b * BLOCK_SIZE;
            let from = offset.max(block_start) - block_start;
            let to = (end - block_start).min(data.len() as u64);
            if from > to {
                return Err(MountError::Short {
                    oid: object.oid.to_string(),
                    offset: block_start + data.len() as u64,
                });
            }
            got += to - from;
            parts.push(Data::Block(data, from as usize..to as usize));
        }
        if got < end - offset {
            return Err(MountError::Short {
                oid: object.oid.to_string(),
                offset: offset + got,
            });
        }
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part"));
        }
        let mut out = Vec::with_capacity(got as usize);
        for part in parts {
            out.extend_from_slice(&part);
        }
        Ok(Data::Owned(out))
    }

    /// Read-ahead after block `last` for a stream that has read `run` bytes in a row
    /// ([`ahead_of`] bytes, in blocks), refilled once half of it was read, in runs of
    /// [`window_of`] fetched in parallel, each streamed into its blocks as it arrives.
    fn read_ahead(&self, object: &Pointer, last: u64, run: u64) {
        let last_block = (object.size - 1) / BLOCK_SIZE;
        let ahead = ahead_of(run).div_ceil(BLOCK_SIZE);
        let have = {
            let state = self.state.lock().expect("block state");
            (last + 1..=last + ahead)
                .take_while(|b| state.slots.contains_key(&(object.oid.0, *b)))
                .count() as u64
        };
        if have * 2 > ahead {
            return;
        }
        let to = (last + ahead).min(last_block);
        let window = window_of(ahead * BLOCK_SIZE) / BLOCK_SIZE;
        let mut b = last + 1 + have;
        while b <= to {
            let piece_end = (b + window - 1).min(to);
            self.start(object, b, piece_end);
            b = piece_end + 1;
        }
    }

    /// The slots of blocks `first..=last`, starting the fetch of those neither cached nor
    /// in flight: one fetch per run of consecutive missing blocks.
    fn start(&self, object: &Pointer, first: u64, last: u64) -> Vec<Arc<Slot>> {
        let mut state = self.state.lock().expect("block state");
        let mut slots = Vec::new();
        let mut runs: Vec<Vec<(u64, Arc<Slot>)>> = Vec::new();
        for b in first..=last {
            let key = (object.oid.0, b);
            state.tick += 1;
            let tick = state.tick;
            if let Some((slot, used)) = state.slots.get_mut(&key) {
                *used = tick;
                slots.push(slot.clone());
                continue;
            }
            let slot = Arc::new(Slot::default());
            state.slots.insert(key, (slot.clone(), tick));
            match runs.last_mut() {
                Some(run) if run.last().is_some_and(|(p, _)| p + 1 == b) => {
                    run.push((b, slot.clone()))
                }
                _ => runs.push(vec![(b, slot.clone())]),
            }
            slots.push(slot);
        }
        evict(&mut state, self.memory_blocks);
        drop(state);
        for run in runs {
            self.spawn_fetch(object, run);
        }
        slots
    }

    /// Fetches a run of consecutive blocks as one range, filling each block's slot as soon
    /// as its bytes arrived.
    fn spawn_fetch(&self, object: &Pointer, run: Vec<(u64, Arc<Slot>)>) {
        let (source, shared, object) = (self.source.clone(), self.state.clone(), object.clone());
        let pool = self.pool.clone();
        std::thread::spawn(move || {
            let start = run[0].0 * BLOCK_SIZE;
            let end = ((run[run.len() - 1].0 + 1) * BLOCK_SIZE).min(object.size);
            let filler = Arc::new(Mutex::new(Filler::new(run, end - start, pool)));
            let into = filler.clone();
            let sink: Sink = Box::new(move |at, data| into.lock().expect("filler").push(at, data));
            let result = source.fetch_streaming(&object, start, end - start, sink);
            let mut filler = filler.lock().expect("filler");
            let result = result.and_then(|()| filler.finish(&object));
            if let Err(e) = result {
                // Not kept: the next read fetches again.
                let failed: Vec<_> = filler.unfilled().cloned().collect();
                let mut state = shared.lock().expect("block state");
                for (b, slot) in &failed {
                    let key = (object.oid.0, *b);
                    if state
                        .slots
                        .get(&key)
                        .is_some_and(|(s, _)| Arc::ptr_eq(s, slot))
                    {
                        state.slots.remove(&key);
                    }
                }
                drop(state);
                for (_, slot) in &failed {
                    *slot.result.lock().expect("slot") = Some(Err(e.clone()));
                    slot.done.notify_all();
                }
                filler.filled.iter_mut().for_each(|f| *f = true);
            }
        });
    }

    fn wait(&self, slot: &Slot, object: &Pointer, b: u64) -> Result<Arc<Block>, MountError> {
        let deadline = Instant::now() + self.timeout;
        let mut result = slot.result.lock().expect("slot");
        loop {
            if let Some(r) = result.as_ref() {
                return r.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MountError::Timeout {
                    oid: object.oid.to_string(),
                    offset: b * BLOCK_SIZE,
                    seconds: self.timeout.as_secs(),
                });
            }
            result = slot.done.wait_timeout(result, left).expect("slot").0;
        }
    }
}

/// Drops the least recently used finished blocks beyond `max` (blocks in flight stay), and
/// a sixteenth of `max` more: one scan of the blocks per many dropped, not one per block.
fn evict(state: &mut State, max: usize) {
    if state.slots.len() <= max {
        return;
    }
    let drop_count = state.slots.len() - max + max / 16;
    let mut finished: Vec<(u64, Key)> = state
        .slots
        .iter()
        .filter(|(_, (slot, _))| slot.result.try_lock().is_ok_and(|r| r.is_some()))
        .map(|(k, (_, used))| (*used, *k))
        .collect();
    if finished.len() > drop_count {
        finished.select_nth_unstable(drop_count);
        finished.truncate(drop_count);
    }
    for (_, k) in finished {
        state.slots.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::lfs::pointer::Oid;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The object's bytes are a function of their offset; counts and can fail fetches.
    struct Counting {
        fetches: Mutex<Vec<u64>>,
        failing: std::sync::atomic::AtomicBool,
        delay: Duration,
        calls: AtomicUsize,
    }

    fn byte(i: u64) -> u8 {
        (i.wrapping_mul(31) ^ (i >> 11)) as u8
    }

    impl RangeSource for Counting {
        fn fetch(&self, object: &Pointer, start: u64, len: u64) -> Result<Vec<u8>, MountError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            if self.failing.load(Ordering::SeqCst) {
                return Err(MountError::Unavailable("test: server down".into()));
            }
            assert!(start + len <= object.size);
            let blocks = start / BLOCK_SIZE..=(start + len - 1) / BLOCK_SIZE;
            self.fetches.lock().unwrap().extend(blocks);
            Ok((start..start + len).map(byte).collect())
        }
    }

    fn cache(delay_ms: u64) -> BlockCache<Counting> {
        BlockCache::new(
            Counting {
                fetches: Mutex::new(Vec::new()),
                failing: false.into(),
                delay: Duration::from_millis(delay_ms),
                calls: AtomicUsize::new(0),
            },
            Duration::from_secs(5),
        )
    }

    fn object(size: u64) -> Pointer {
        Pointer::new(Oid([7; 32]), size)
    }

    #[test]
    fn ranges_across_blocks_and_the_end_are_exact() {
        let c = cache(0);
        let obj = object(3 * BLOCK_SIZE + 5);
        for (offset, size) in [
            (0, 10),
            (BLOCK_SIZE - 3, 7),
            (2 * BLOCK_SIZE - 1, (BLOCK_SIZE + 2) as u32),
            (3 * BLOCK_SIZE, 100),
            (3 * BLOCK_SIZE + 5, 10),
        ] {
            let got = c.read(&obj, offset, size).unwrap().to_vec();
            let end = (offset + u64::from(size)).min(obj.size);
            let want: Vec<u8> = (offset..end).map(byte).collect();
            assert_eq!(got, want, "{offset}+{size}");
        }
    }

    /// Concurrent readers of the same block: one fetch.
    #[test]
    fn concurrent_readers_share_one_fetch() {
        let c = Arc::new(cache(200));
        let obj = object(4 * BLOCK_SIZE);
        let readers: Vec<_> = (0..8)
            .map(|i| {
                let (c, obj) = (c.clone(), obj.clone());
                std::thread::spawn(move || c.read(&obj, BLOCK_SIZE + i * 1000, 4096).unwrap())
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(*c.source().fetches.lock().unwrap(), vec![1]);
        assert_eq!(c.source().calls.load(Ordering::SeqCst), 1);
    }

    /// The blocks fetched so far, sorted, and forgotten.
    fn take_fetched(c: &BlockCache<Counting>) -> Vec<u64> {
        std::thread::sleep(Duration::from_millis(300));
        let mut fetched = std::mem::take(&mut *c.source().fetches.lock().unwrap());
        fetched.sort();
        fetched
    }

    /// `len` bytes at `offset` in reads of `piece` bytes, in order.
    fn read_in_order(c: &BlockCache<Counting>, obj: &Pointer, offset: u64, len: u64, piece: u64) {
        let mut at = offset;
        while at < offset + len {
            let n = piece.min(offset + len - at);
            assert_eq!(c.read(obj, at, n as u32).unwrap().len() as u64, n);
            at += n;
        }
    }

    #[test]
    fn sequential_reads_fetch_ahead_and_random_ones_do_not() {
        let c = cache(0);
        let obj = object(400 * BLOCK_SIZE);
        let piece = 128 * 1024;
        // A random read of two blocks, in reads of 128 KiB (as the kernel sends them): no
        // read-ahead.
        read_in_order(&c, &obj, 5 * BLOCK_SIZE, 2 * BLOCK_SIZE, piece);
        assert_eq!(take_fetched(&c), vec![5, 6], "a random read");
        // A sequential reader, interleaved with another: past SEQUENTIAL_AFTER in a row, the
        // next block is fetched ahead of it.
        let mut offset = 100 * BLOCK_SIZE;
        while offset < 104 * BLOCK_SIZE {
            c.read(&obj, offset, piece as u32).unwrap();
            c.read(&obj, 300 * BLOCK_SIZE + offset % 7 * 4096, 10)
                .unwrap();
            offset += piece;
        }
        assert_eq!(take_fetched(&c), vec![100, 101, 102, 103, 104, 300]);
        // Never past the end.
        let small = Pointer::new(Oid([9; 32]), 40 * BLOCK_SIZE);
        read_in_order(&c, &small, 30 * BLOCK_SIZE, 10 * BLOCK_SIZE, piece);
        assert_eq!(take_fetched(&c), (30..40).collect::<Vec<_>>());
        // A long sequential read: the read-ahead grows to an eighth of the run, in runs.
        let big = Pointer::new(Oid([8; 32]), 4000 * BLOCK_SIZE);
        let calls = c.source().calls.load(Ordering::SeqCst);
        read_in_order(&c, &big, 0, 2400 * BLOCK_SIZE, piece);
        let fetched = take_fetched(&c);
        let calls = c.source().calls.load(Ordering::SeqCst) - calls;
        assert!(
            calls < 2400 / 4,
            "{calls} fetches for 2400 blocks: not one per block"
        );
        let furthest = fetched.iter().copied().max().unwrap();
        let bound = 2400 + ahead_of(2400 * BLOCK_SIZE) / BLOCK_SIZE;
        assert!(furthest <= bound, "{furthest} > {bound}");
        assert!(furthest > 2400 + 8, "{furthest}: no read-ahead");
    }

    /// A tensor read through a map: its pages' reads in order, from an offset inside a
    /// block, after a read of the file's header. The blocks fetched are its own, and few
    /// past its end.
    #[test]
    fn a_tensor_read_in_order_fetches_little_past_its_end() {
        let c = cache(0);
        let obj = object(4000 * BLOCK_SIZE);
        for (mib, within) in [(4u64, 0.10), (8, 0.06), (16, 0.09), (64, 0.14)] {
            let offset = 3 * mib * (1 << 20) + 12345 * 4096 % BLOCK_SIZE;
            let len = mib << 20;
            c.read(&obj, 0, 4096).unwrap();
            read_in_order(&c, &obj, offset, len, 128 * 1024);
            let fetched = take_fetched(&c).len() as u64 * BLOCK_SIZE;
            let ratio = fetched as f64 / len as f64;
            assert!(ratio <= 1.0 + within, "{mib} MiB: {ratio:.3}x fetched");
        }
    }

    #[test]
    fn a_failed_fetch_is_an_error_then_retried() {
        let c = cache(0);
        let obj = object(BLOCK_SIZE);
        c.source().failing.store(true, Ordering::SeqCst);
        assert!(matches!(
            c.read(&obj, 0, 10),
            Err(MountError::Unavailable(_))
        ));
        c.source().failing.store(false, Ordering::SeqCst);
        assert_eq!(*c.read(&obj, 0, 3).unwrap(), [byte(0), byte(1), byte(2)]);
        assert_eq!(c.source().calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_hung_fetch_times_out() {
        let mut c = cache(2000);
        c.timeout = Duration::from_millis(200);
        let started = Instant::now();
        assert!(matches!(
            c.read(&object(BLOCK_SIZE), 0, 10),
            Err(MountError::Timeout { .. })
        ));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn memory_is_bounded_least_recently_used_first() {
        let mut c = cache(0);
        c.memory_blocks = 3;
        let obj = object(10 * BLOCK_SIZE);
        for b in [0, 2, 4] {
            c.read(&obj, b * BLOCK_SIZE, 1).unwrap();
        }
        c.read(&obj, 0, 1).unwrap(); // 0 is now the most recent
        c.read(&obj, 6 * BLOCK_SIZE, 1).unwrap(); // evicts 2
        c.read(&obj, 0, 1).unwrap();
        c.read(&obj, 2 * BLOCK_SIZE, 1).unwrap();
        assert_eq!(*c.source().fetches.lock().unwrap(), vec![0, 2, 4, 6, 2]);
    }
}
