//! The clean side (`git add`, `git status` on a modified file): content in, pointer out,
//! with the content stored in git-lfs's object store so a later push can send it.
//!
//! Byte-compatible with `git lfs clean`: the same canonical pointer, an empty file stays
//! empty, and content that already is a pointer passes through unchanged. The content is
//! hashed as it arrives (SHA-NI where the CPU has it) and written once, to a temp file that
//! becomes the object (a small file only when it is not stored already).
//!
//! Most cleans of large files are of content the store already holds: git re-checking a
//! file it just checked out ("racily clean": written in the same second as the index), or a
//! file that was only touched. So when the work tree file is at least [`RECHECK_MIN`] and
//! the index's version of it (a [`Recheck`] probe) is stored with the same size, the content
//! is first compared with that object (see `StoredComparison`): equal content is neither
//! hashed nor written again. At the first difference, the equal prefix is taken from the
//! stored copy and the clean goes on as for new content, so an edited file costs only that
//! extra read of what it shares with its previous version. (Content that then hashes to the
//! stored object's own oid means the stored copy is damaged: it is replaced.)
//!
//! While a large object is stored, it is also chunked on two other threads (a
//! [`ChunkFeed`]), and its chunk list is saved for the push: pushing a new version of a
//! large file then reads only its new chunks instead of chunking the whole file again.

use std::io::{BufWriter, Read, Write};

use sha2::{Digest, Sha256};

use crate::filter::compare::StoredComparison;
use crate::filter::pktline::PktReader;
use crate::GitError;
use git_xet_client::chunk_lists::{ChunkList, ChunkListStore};
use git_xet_io::pipeline::ChunkFeed;
use git_xet_lfs::pointer::{Oid, Pointer, MAX_POINTER_SIZE};
use git_xet_lfs::store::{LfsStore, TempGuard};

/// Smaller content is hashed and stored again, never compared (nor the work tree file
/// looked at: the probe waits until this much content came). The probe is a stat and one
/// round trip on the filter's `git cat-file --batch-command`
/// (crates/git/src/filter/index_reader.rs; two git commands only in its fallback): lowered
/// from 16 MiB, `git status` re-cleaning 200 touched 2 MiB files took 0.44x the time, and
/// `git add` of new files no longer (scripts/bench_filter.sh, status step).
pub const RECHECK_MIN: u64 = 1 << 20;

/// Where the clean looks for the content's previous version: the pointer git's index holds
/// for the path, and the work tree file.
pub trait Recheck {
    fn indexed_pointer(&self) -> Option<Pointer>;
    fn work_tree_file(&self) -> Option<std::path::PathBuf>;
    /// Whether this content is kept as chunks in the chunk store (so its whole copy need not
    /// enter `.git/lfs/objects`: the file git re-cleans after a checkout is one it smudged).
    fn in_chunk_store(&self, _oid: &Oid, _size: u64) -> bool {
        false
    }
}

/// What the clean does with the content as it arrives.
enum Mode {
    /// Compare with the stored object, which then gives the oid.
    Compare(StoredComparison, Pointer),
    /// New content: hash it, write it to a temp file and chunk it.
    Store(Spool),
}

/// Content up to this size is held in memory, not spooled to a temp file: most cleans of
/// small files are git re-checking what it just checked out (every file of a checkout
/// written in the second its index was written), whose object is already stored, and a temp
/// file written and deleted per file was most of their cost.
const HELD_MAX: usize = 1 << 20;
// Content held before the probe becomes a spool's held content.
const _: () = assert!(RECHECK_MIN as usize <= HELD_MAX);
// Held content is fed to the chunker only once it spills: a ChunkFeed keeps no chunk list
// for less than one block, so feeding what stays held would be copied for nothing.
const _: () = assert!(HELD_MAX < git_xet_io::pipeline::READ_BUFFER_SIZE);

/// New content on its way into the store.
struct Spool {
    hasher: Sha256,
    /// The content while it is at most [`HELD_MAX`] and no temp file was opened.
    held: Vec<u8>,
    out: Option<BufWriter<std::fs::File>>,
    guard: TempGuard,
    feed: ChunkFeed,
    /// The stored object the content was found to differ from: if the content turns out to
    /// have its oid after all, that stored copy is damaged and is replaced.
    differs_from: Option<Oid>,
}

impl Spool {
    fn new() -> Spool {
        Spool {
            hasher: Sha256::new(),
            held: Vec::new(),
            out: None,
            guard: TempGuard(None),
            feed: ChunkFeed::new(),
            differs_from: None,
        }
    }

    /// A spool of content already in memory (at most [`HELD_MAX`]).
    fn holding(content: Vec<u8>) -> Spool {
        let mut spool = Spool::new();
        spool.hasher.update(&content);
        spool.held = content;
        spool
    }

    fn add(&mut self, store: &LfsStore, data: &[u8]) -> Result<(), GitError> {
        self.hasher.update(data);
        if self.out.is_none() && self.held.len() + data.len() <= HELD_MAX {
            self.held.extend_from_slice(data);
            return Ok(());
        }
        let out = match &mut self.out {
            Some(out) => out,
            None => {
                // Held content reaches the chunker only now: content small enough to stay
                // held is never chunked (see HELD_MAX), and copying it there anyway cost
                // git's re-check of 1,500 small files a tenth of its CPU time.
                self.feed.feed(&self.held);
                let (file, path) = store.temp_file("clean")?;
                self.guard.0 = Some(path);
                let out = self.out.insert(BufWriter::with_capacity(1 << 20, file));
                out.write_all(&std::mem::take(&mut self.held))
                    .map_err(|e| GitError::io("writing the new LFS object", e))?;
                out
            }
        };
        self.feed.feed(data);
        out.write_all(data)
            .map_err(|e| GitError::io("writing the new LFS object", e))
    }

    /// Moves the content into the store and saves its chunk list; returns its pointer.
    fn finish(
        self,
        store: &LfsStore,
        chunk_lists: &ChunkListStore,
        size: u64,
        recheck: &dyn Recheck,
    ) -> Result<Pointer, GitError> {
        let oid = Oid(self.hasher.finalize().into());
        let Spool {
            held,
            out,
            mut guard,
            feed,
            differs_from,
            ..
        } = self;
        let temp = match out {
            Some(out) => {
                drop(
                    out.into_inner()
                        .map_err(|e| GitError::io("writing the new LFS object", e.into_error()))?,
                );
                Some(guard.0.take().expect("spool has a path"))
            }
            None => None,
        };
        if differs_from == Some(oid) {
            tracing::warn!(
                "the stored copy of {oid} was damaged: replaced it with the file's content"
            );
            let temp = match temp {
                Some(temp) => temp,
                None => held_to_temp(store, &held)?,
            };
            store.replace(&temp, &oid)?;
        } else if recheck.in_chunk_store(&oid, size) {
            if let Some(temp) = temp {
                let _ = std::fs::remove_file(&temp);
            }
            return Ok(Pointer::new(oid, size));
        } else {
            match temp {
                Some(temp) => store.commit(&temp, &oid)?,
                // Stored already (as `commit` would find): nothing to write.
                None if store.path(&oid).exists() => store.path(&oid),
                None => store.commit(&held_to_temp(store, &held)?, &oid)?,
            };
        }
        if let Some(chunked) = feed.finish().filter(|c| c.summary.size == size) {
            let list = ChunkList {
                sha256: oid.0,
                file_hash: chunked.summary.file_hash,
                chunks: chunked.chunks,
            };
            if let Err(e) = chunk_lists.save(&list) {
                tracing::warn!(
                    "could not save the chunk list of {oid} (the push will chunk it): {e}"
                );
            }
            // A push removes the lists it used; lists of objects that left the store without
            // being pushed (`git lfs prune`) go here.
            chunk_lists.prune(|sha| store.path(&Oid(*sha)).exists());
        }
        Ok(Pointer::new(oid, size))
    }
}

/// Reads one file's content from git and returns what git should store instead. The outer
/// error is fatal (the stream from git broke); the inner one fails only this file.
pub fn clean<R: Read>(
    input: &mut PktReader<R>,
    store: &LfsStore,
    chunk_lists: &ChunkListStore,
    recheck: &dyn Recheck,
) -> Result<Result<Vec<u8>, GitError>, GitError> {
    let mut head = Vec::with_capacity(MAX_POINTER_SIZE + 1);
    let mut size = 0u64;
    let mut mode = None;
    // Content before the mode is chosen: the probe (a stat of the work tree file) only
    // matters for content of at least RECHECK_MIN, so smaller content never pays for it.
    let mut early = Vec::new();
    let read = input.read_content(|data| {
        if head.len() <= MAX_POINTER_SIZE {
            let take = data.len().min(MAX_POINTER_SIZE + 1 - head.len());
            head.extend_from_slice(&data[..take]);
        }
        size += data.len() as u64;
        let mode = match &mut mode {
            Some(mode) => mode,
            None if size < RECHECK_MIN => {
                early.extend_from_slice(data);
                return Ok(());
            }
            None => {
                let mode = mode.insert(probe(recheck, store));
                take(mode, store, &std::mem::take(&mut early))?;
                mode
            }
        };
        take(mode, store, data)
    })?;
    if let Err(e) = read {
        return Ok(Err(e));
    }
    if size == 0 {
        return Ok(Ok(Vec::new()));
    }
    let mode = mode.unwrap_or_else(|| Mode::Store(Spool::holding(early)));
    if head.len() <= MAX_POINTER_SIZE && Pointer::detect(&head).is_some() {
        // Already a pointer (e.g. a file checked out with smudging skipped): keep it.
        return Ok(Ok(head));
    }
    let spool = match mode {
        Mode::Compare(cmp, pointer) if cmp.complete() => {
            if store.find(&pointer.oid, size).is_some() {
                return Ok(Ok(pointer.to_text().into_bytes()));
            }
            // Removed from the store meanwhile: store it again.
            spool_matched(&cmp, store, None)
        }
        // The content is a shorter prefix of the stored object.
        Mode::Compare(cmp, pointer) => spool_matched(&cmp, store, Some(pointer.oid)),
        Mode::Store(spool) => Ok(spool),
    };
    Ok(spool
        .and_then(|s| s.finish(store, chunk_lists, size, recheck))
        .map(|p| p.to_text().into_bytes()))
}

/// Takes one piece of content in `mode`; a comparison that fails turns into storing.
fn take(mode: &mut Mode, store: &LfsStore, data: &[u8]) -> Result<(), GitError> {
    if data.is_empty() {
        return Ok(());
    }
    match mode {
        Mode::Compare(cmp, pointer) => {
            let reading = |e| GitError::io("reading the stored LFS object", e);
            if cmp.matches(data).map_err(reading)? {
                return Ok(());
            }
            tracing::debug!("the file differs from its stored version: storing it");
            let mut spool = spool_matched(cmp, store, Some(pointer.oid))?;
            spool.add(store, data)?;
            *mode = Mode::Store(spool);
            Ok(())
        }
        Mode::Store(spool) => spool.add(store, data),
    }
}

/// Held content written to a temp file of the store, to be moved into place.
fn held_to_temp(store: &LfsStore, held: &[u8]) -> Result<std::path::PathBuf, GitError> {
    let (mut file, path) = store.temp_file("clean")?;
    let mut guard = TempGuard(Some(path));
    file.write_all(held)
        .map_err(|e| GitError::io("writing the new LFS object", e))?;
    Ok(guard.0.take().expect("the guard holds the path"))
}

/// Chooses the mode when the content starts: a large file whose version in the index is
/// stored with the same size is compared with it; anything else is stored.
fn probe(recheck: &dyn Recheck, store: &LfsStore) -> Mode {
    let size = recheck
        .work_tree_file()
        .and_then(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .filter(|&len| len >= RECHECK_MIN);
    let compare = size
        .and_then(|size| recheck.indexed_pointer().filter(|p| p.size == size))
        .and_then(|pointer| {
            let path = store.find(&pointer.oid, pointer.size)?;
            Some(Mode::Compare(StoredComparison::open(&path).ok()?, pointer))
        });
    match compare {
        Some(mode) => {
            tracing::debug!("comparing the file with its stored version");
            mode
        }
        None => Mode::Store(Spool::new()),
    }
}

/// A spool holding the content compared equal so far, read back from the stored object
/// (which the content differs from, if it does).
fn spool_matched(
    cmp: &StoredComparison,
    store: &LfsStore,
    differs_from: Option<Oid>,
) -> Result<Spool, GitError> {
    let mut spool = Spool::new();
    spool.differs_from = differs_from;
    let mut added = Ok(());
    cmp.each_matched(|piece| {
        added = spool.add(store, piece);
        added.is_ok()
    })
    .map_err(|e| GitError::io("reading the stored LFS object", e))?;
    added.map(|()| spool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Counts the probe's looks at the work tree file (each is a stat).
    struct Counting(Cell<usize>, std::path::PathBuf);

    impl Recheck for Counting {
        fn indexed_pointer(&self) -> Option<Pointer> {
            None
        }
        fn work_tree_file(&self) -> Option<std::path::PathBuf> {
            self.0.set(self.0.get() + 1);
            Some(self.1.clone())
        }
    }

    /// Content in pkt-lines of at most 65516 bytes, then a flush.
    fn packets(content: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in content.chunks(65516) {
            out.extend_from_slice(format!("{:04x}", piece.len() + 4).as_bytes());
            out.extend_from_slice(piece);
        }
        out.extend_from_slice(b"0000");
        out
    }

    /// Content below RECHECK_MIN never looks at the work tree file; larger content does,
    /// once; both give the pointer of their sha256 and are stored.
    #[test]
    fn the_work_tree_file_is_looked_at_only_for_content_of_recheck_min() {
        let dir = tempfile::tempdir().unwrap();
        let store = LfsStore::in_dir(&dir.path().join("lfs"));
        let lists = ChunkListStore::new(&dir.path().join("xet"));
        let file = dir.path().join("file");
        for (len, looks) in [(1, 0), (16 << 10, 0), (RECHECK_MIN as usize - 1, 0)]
            .into_iter()
            .chain([(RECHECK_MIN as usize, 1), (3 << 20, 1)])
        {
            let content: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
            std::fs::write(&file, &content).unwrap();
            let recheck = Counting(Cell::new(0), file.clone());
            let input = packets(&content);
            let out = clean(&mut PktReader::new(&input[..]), &store, &lists, &recheck)
                .unwrap()
                .unwrap();
            let oid = Oid(Sha256::digest(&content).into());
            assert_eq!(out, Pointer::new(oid, len as u64).to_text().into_bytes());
            assert_eq!(recheck.0.get(), looks, "{len} bytes");
            assert_eq!(std::fs::read(store.path(&oid)).unwrap(), content);
        }
    }
}
