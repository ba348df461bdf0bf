//! Chunks at the edges of ranges read, kept so that adjacent ranges never fetch the same
//! chunk twice. Two ranges that meet inside a chunk both need it whole (a chunk is fetched
//! and checked as a unit); the first read keeps it decoded with the length of its record in
//! the xorb (from its header), and the second takes it out of its own fetch: its xorb
//! range then begins (or ends) that many bytes further in. A read never fetches an edge
//! chunk another read is fetching: when that read fetches it at the other end of its range
//! (its last chunk is this read's first, or its first this read's last), this read leaves
//! the chunk out of its fetch at once and takes its bytes once the other read kept it; in
//! the rare other cases it waits for that read before fetching.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::MerkleHash;

/// A chunk: its xorb and index.
pub type ChunkKey = (MerkleHash, u32);
/// A chunk's bytes and the length of its record in the xorb (header included).
pub type Edge = (Arc<Vec<u8>>, u32);

/// Edge chunks kept in memory, oldest dropped first (a few hundred chunks).
const EDGE_BYTES: usize = 16 << 20;

/// What a read fetching a chunk as its first or last one says of it, so that the read of
/// the bytes next to it can leave the chunk out of its own xorb range at once rather than
/// wait: for a last chunk where its record ends in the xorb and where the chunk ends in the
/// file (both exclusive), for a first chunk where both begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub record: u64,
    pub file: u64,
}

/// The first and last chunk of a read.
pub const FIRST: usize = 0;
pub const LAST: usize = 1;

#[derive(Default)]
struct State {
    kept: HashMap<ChunkKey, Edge>,
    order: VecDeque<ChunkKey>,
    bytes: usize,
    /// Edge chunks reads in flight are fetching: as their first or last chunk, and where
    /// it begins or ends.
    busy: HashMap<ChunkKey, (usize, Option<Pending>)>,
}

/// What [`Edges::claim`] found for a read's first and last chunk.
#[derive(Debug, Default)]
pub struct Claimed {
    pub kept: [Option<Edge>; 2],
    /// The first chunk is another read's last, or the last chunk another read's first, in
    /// flight.
    pub pending: [Option<Pending>; 2],
    /// Chunks the caller now fetches for others (to [`release`](Edges::release)).
    pub marked: Vec<ChunkKey>,
}

#[derive(Default)]
pub struct Edges {
    state: Mutex<State>,
    done: Condvar,
}

impl Edges {
    /// The kept chunks among `keys` (first and last chunk of a read), once no other read
    /// is fetching them (or at `deadline`: then the read fetches them too), except a first
    /// chunk another read is fetching as its last, or a last chunk another read is fetching
    /// as its first: that is said (`pending`) and not waited for. Those neither kept nor
    /// pending are marked as being fetched by the caller, with `ends` (where its first
    /// chunk begins, where its last ends); the caller must [`release`](Self::release) them.
    pub fn claim(
        &self,
        keys: [Option<ChunkKey>; 2],
        ends: [Option<Pending>; 2],
        deadline: Instant,
    ) -> Claimed {
        let mut state = self.state.lock().expect("edges");
        // A chunk the other end of another read: its first for our last and the other way.
        let pending = |state: &State, i: usize| {
            keys[i].and_then(|k| match state.busy.get(&k) {
                Some((end, Some(p))) if *end != i && keys[1] != keys[0] => Some(*p),
                _ => None,
            })
        };
        loop {
            let waiting = keys.iter().enumerate().any(|(i, k)| {
                k.is_some_and(|k| {
                    state.busy.contains_key(&k)
                        && !state.kept.contains_key(&k)
                        && pending(&state, i).is_none()
                })
            });
            let left = deadline.saturating_duration_since(Instant::now());
            if !waiting || left.is_zero() {
                break;
            }
            state = self.done.wait_timeout(state, left).expect("edges").0;
        }
        let mut out = Claimed {
            kept: keys.map(|k| k.and_then(|k| state.kept.get(&k).cloned())),
            ..Default::default()
        };
        for i in [FIRST, LAST] {
            if out.kept[i].is_none() {
                out.pending[i] = pending(&state, i);
            }
        }
        for (i, key) in keys.iter().enumerate() {
            let Some(k) = key else { continue };
            if out.kept[i].is_some() || out.pending[i].is_some() {
                continue;
            }
            if !state.busy.contains_key(k) {
                state.busy.insert(*k, (i, ends[i]));
                out.marked.push(*k);
            }
        }
        out
    }

    /// The chunk `key` once a read in flight kept it; None at `deadline` (it failed).
    pub fn wait_kept(&self, key: ChunkKey, deadline: Instant) -> Option<Edge> {
        let mut state = self.state.lock().expect("edges");
        loop {
            if let Some(edge) = state.kept.get(&key) {
                return Some(edge.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !state.busy.contains_key(&key) || left.is_zero() {
                return None;
            }
            state = self.done.wait_timeout(state, left).expect("edges").0;
        }
    }

    /// Keeps the first chunk of a read as soon as it is decoded, before the read ends: a
    /// read waiting for it as its last chunk goes on at once.
    pub fn keep(&self, key: ChunkKey, edge: Edge) {
        self.release(&[], vec![(key, edge)]);
    }

    /// Keeps the edge chunks a read decoded and ends the marks of [`claim`](Self::claim).
    pub fn release(&self, marked: &[ChunkKey], decoded: Vec<(ChunkKey, Edge)>) {
        let mut state = self.state.lock().expect("edges");
        for (key, edge) in decoded {
            if state.kept.contains_key(&key) {
                continue;
            }
            state.bytes += edge.0.len();
            state.kept.insert(key, edge);
            state.order.push_back(key);
        }
        while state.bytes > EDGE_BYTES {
            let Some(old) = state.order.pop_front() else {
                break;
            };
            if let Some((data, _)) = state.kept.remove(&old) {
                state.bytes -= data.len();
            }
        }
        for k in marked {
            state.busy.remove(k);
        }
        drop(state);
        self.done.notify_all();
    }
}

/// The first and last chunk of a reconstruction's terms.
pub fn edge_keys(recon: &Reconstruction) -> [Option<ChunkKey>; 2] {
    let first = recon.terms.first().map(|t| (t.hash, t.range.start));
    let last = recon
        .terms
        .last()
        .filter(|t| !t.range.is_empty())
        .map(|t| (t.hash, t.range.end - 1));
    [first, last]
}

/// A read of bytes `s..=e` with its kept edge chunks taken out: `prefix`, then `middle`
/// (a reconstruction to fetch and the bytes it gives), then `suffix`.
#[derive(Debug, PartialEq)]
pub struct Trimmed {
    pub prefix: Vec<u8>,
    pub middle: Option<(Reconstruction, u64, u64)>,
    pub suffix: Vec<u8>,
}

/// Takes the kept chunks `first` and `last` out of a read of bytes `s..=e` through
/// `recon`, which must be sliced to them (its first term begins at the chunk `s` falls in,
/// `offset_into_first_range` into it). An edge that does not fit (another term uses the
/// chunk, no fetch entry begins or ends there, lengths disagree) stays in the fetch.
pub fn trim(
    recon: &Reconstruction,
    (s, e): (u64, u64),
    first: Option<&Edge>,
    last: Option<&Edge>,
) -> Trimmed {
    let mut out = Trimmed {
        prefix: Vec::new(),
        middle: None,
        suffix: Vec::new(),
    };
    let mut r = recon.clone();
    let (mut s2, mut e2) = (s, e);
    if let Some((data, stored)) = first {
        let (o, d) = (r.offset_into_first_range, data.len() as u64);
        if o < d {
            let take = (d - o).min(e - s + 1);
            if take == e - s + 1 {
                out.prefix = data[o as usize..(o + take) as usize].to_vec();
                return out;
            }
            if drop_edge(&mut r, FIRST, d, *stored) {
                out.prefix = data[o as usize..(o + take) as usize].to_vec();
                r.offset_into_first_range = 0;
                s2 = s + take;
            } else {
                r = recon.clone();
            }
        }
    }
    if let Some((data, stored)) = last {
        let d = data.len() as u64;
        let start = s2.checked_sub(r.offset_into_first_range);
        let at = start.and_then(|b| (b + r.terms_len()).checked_sub(d));
        match at {
            // The whole rest lies in the last chunk.
            Some(at)
                if at <= s2 && at + d > e2 && r.terms.len() == 1 && r.terms[0].range.len() == 1 =>
            {
                out.suffix = data[(s2 - at) as usize..=(e2 - at) as usize].to_vec();
                return out;
            }
            Some(at) if at > s2 && at <= e2 && at + d > e2 => {
                let before = r.clone();
                if drop_edge(&mut r, LAST, d, *stored) {
                    out.suffix = data[..=(e2 - at) as usize].to_vec();
                    e2 = at - 1;
                } else {
                    r = before;
                }
            }
            _ => {}
        }
    }
    out.middle = Some((r, s2, e2));
    out
}

/// Takes the chunk at `end` ([`FIRST`] or [`LAST`]; `d` bytes, a record of `stored`) out
/// of the term at that end of `r`, and its record out of the fetch entry that holds it.
fn drop_edge(r: &mut Reconstruction, end: usize, d: u64, stored: u32) -> bool {
    let n = r.terms.len();
    let i_term = if end == FIRST { 0 } else { n.saturating_sub(1) };
    let Some(t) = r.terms.get(i_term).cloned() else {
        return false;
    };
    let Some(k) = (if end == FIRST {
        Some(t.range.start)
    } else {
        t.range.end.checked_sub(1)
    }) else {
        return false;
    };
    let single = t.range.len() == 1;
    let fits = if single {
        u64::from(t.unpacked_length) == d && n > 1
    } else {
        u64::from(t.unpacked_length) > d
    };
    if !fits || used_elsewhere(r, i_term, t.hash, k) {
        return false;
    }
    let Some(entries) = r.fetch_info.get_mut(&t.hash) else {
        return false;
    };
    let at_end = |f: &git_xet_core::reconstruction::FetchInfo| {
        if end == FIRST {
            f.range.start == k
        } else {
            f.range.end == t.range.end
        }
    };
    let Some(i) = entries.iter().position(at_end) else {
        return false;
    };
    let f = &mut entries[i];
    if f.range.len() == 1 {
        if f.url_range.len() != u64::from(stored) {
            return false;
        }
        entries.remove(i);
    } else if f.url_range.len() <= u64::from(stored) {
        return false;
    } else if end == FIRST {
        f.range.start += 1;
        f.url_range.start += u64::from(stored);
    } else {
        f.range.end -= 1;
        f.url_range.end -= u64::from(stored);
    }
    if single {
        r.terms.remove(i_term);
    } else {
        let t = &mut r.terms[i_term];
        if end == FIRST {
            t.range.start += 1;
        } else {
            t.range.end -= 1;
        }
        t.unpacked_length -= d as u32;
    }
    true
}

/// Whether a term other than `skip` reads chunk `k` of `xorb`.
fn used_elsewhere(r: &Reconstruction, skip: usize, xorb: MerkleHash, k: u32) -> bool {
    r.terms
        .iter()
        .enumerate()
        .any(|(i, t)| i != skip && t.hash == xorb && t.range.start <= k && k < t.range.end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;
    use git_xet_core::reconstruction::{ChunkRange, FetchInfo, HttpRange, ReconstructionTerm};

    /// A xorb of 10 chunks of 100 bytes, records of 110; a read of chunks `a..b`.
    fn recon(a: u32, b: u32, offset: u64) -> Reconstruction {
        let x = chunk_hash(b"x");
        Reconstruction {
            offset_into_first_range: offset,
            terms: vec![ReconstructionTerm {
                hash: x,
                unpacked_length: (b - a) * 100,
                range: ChunkRange::new(a, b),
            }],
            fetch_info: [(
                x,
                vec![FetchInfo {
                    range: ChunkRange::new(a, b),
                    url: "u".into(),
                    url_range: HttpRange {
                        start: u64::from(a) * 110,
                        end: u64::from(b) * 110 - 1,
                    },
                }],
            )]
            .into(),
        }
    }

    fn chunk(i: u32) -> Edge {
        (Arc::new(vec![i as u8; 100]), 110)
    }

    #[test]
    fn kept_edges_leave_the_fetch_and_fill_the_bytes() {
        // Bytes 250..=649 of the file (chunks 2..7, starting 50 into chunk 2).
        let r = recon(2, 7, 50);
        let t = trim(&r, (250, 649), Some(&chunk(2)), Some(&chunk(6)));
        assert_eq!(t.prefix, vec![2u8; 50]);
        assert_eq!(t.suffix, vec![6u8; 50]);
        let (m, s, e) = t.middle.unwrap();
        assert_eq!((s, e), (300, 599));
        assert_eq!(m.offset_into_first_range, 0);
        assert_eq!(m.terms[0].range, ChunkRange::new(3, 6));
        assert_eq!(m.terms[0].unpacked_length, 300);
        let f = &m.fetch_info.values().next().unwrap()[0];
        assert_eq!(
            (f.range, f.url_range),
            (
                ChunkRange::new(3, 6),
                HttpRange {
                    start: 330,
                    end: 659
                }
            )
        );
        // Without kept edges: unchanged.
        let t = trim(&r, (250, 649), None, None);
        assert_eq!(t.middle, Some((r.clone(), 250, 649)));
        // A range inside one kept chunk: nothing to fetch.
        let t = trim(&recon(4, 5, 10), (410, 419), Some(&chunk(4)), None);
        assert_eq!((t.prefix, t.middle), (vec![4u8; 10], None));
        // A record length that disagrees with the fetch entry: stays in the fetch.
        let t = trim(
            &recon(2, 4, 50),
            (250, 399),
            Some(&(Arc::new(vec![2; 100]), 400)),
            None,
        );
        assert!(t.prefix.is_empty());
    }

    #[test]
    fn a_read_waits_for_an_edge_another_is_fetching() {
        let edges = Arc::new(Edges::default());
        let key = (chunk_hash(b"x"), 3);
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let c = edges.claim([Some(key), None], [None, None], far);
        assert_eq!(
            (c.kept, c.pending, c.marked.clone()),
            ([None, None], [None, None], vec![key])
        );
        let other = edges.clone();
        let waiter = std::thread::spawn(move || other.claim([None, Some(key)], [None; 2], far));
        std::thread::sleep(std::time::Duration::from_millis(100));
        edges.release(&c.marked, vec![(key, chunk(3))]);
        let c = waiter.join().unwrap();
        assert_eq!((c.kept[1].clone(), c.marked), (Some(chunk(3)), vec![]));
        // A first chunk another read fetches as its last: said, not waited for.
        let next = (key.0, 9);
        let p = Pending {
            record: 1100,
            file: 1000,
        };
        let a = edges.claim([Some(key), Some(next)], [None, Some(p)], far);
        assert_eq!(a.marked, vec![next]);
        let started = Instant::now();
        let b = edges.claim([Some(next), None], [None; 2], far);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!((b.pending, b.marked), ([Some(p), None], vec![]));
        let other = edges.clone();
        let waiter = std::thread::spawn(move || other.wait_kept(next, far));
        edges.release(&a.marked, vec![(next, chunk(9))]);
        assert_eq!(waiter.join().unwrap(), Some(chunk(9)));
        // And the other way: a last chunk another read fetches as its first.
        let third = (key.0, 12);
        let q = Pending {
            record: 1320,
            file: 1200,
        };
        let a = edges.claim([Some(third), None], [Some(q), None], far);
        assert_eq!(a.marked, vec![third]);
        let started = Instant::now();
        let b = edges.claim([Some(key), Some(third)], [None; 2], far);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(
            (b.kept[0].is_some(), b.pending, b.marked),
            (true, [None, Some(q)], vec![])
        );
    }
}
