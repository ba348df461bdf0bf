//! The clean side (`git add`, `git status` on a modified file): content in, pointer out,
//! with the content stored in git-lfs's object store so a later push can send it.
//!
//! Byte-compatible with `git lfs clean`: the same canonical pointer, an empty file stays
//! empty, and content that already is a pointer passes through unchanged. The content is
//! hashed as it arrives (SHA-NI where the CPU has it) and written once, to a temp file that
//! becomes the object.
//!
//! Most cleans of large files are git re-checking a file it just checked out ("racily
//! clean": written in the same second as the index), whose object is already stored. For
//! those the content is only hashed, not written again: once a file passes
//! [`RECHECK_MIN`], a [`Recheck`] probe asks whether the index entry's stat data still
//! matches the file and its object is local. If the hash then turns out different after all,
//! the object is stored from the work tree file, which must hash the same as what git sent.
//!
//! While a large object is stored, it is also chunked on two other threads (a
//! [`ChunkFeed`]), and its chunk list is saved for the push: pushing a new version of a
//! large file then reads only its new chunks instead of chunking the whole file again.

use std::io::{BufWriter, Read, Write};

use sha2::{Digest, Sha256};

use crate::client::chunk_lists::{ChunkList, ChunkListStore};
use crate::git::filter::pktline::PktReader;
use crate::git::filter::store::{LfsStore, TempGuard};
use crate::git::GitError;
use crate::lfs::pointer::{Oid, Pointer, MAX_POINTER_SIZE};
use crate::xet::pipeline::ChunkFeed;

/// Files smaller than this are always written: probing the index costs two git commands.
pub const RECHECK_MIN: u64 = 16 << 20;

/// Answers, for the file being cleaned, "is git re-checking an unchanged file whose object
/// is stored?" with that object's pointer; and gives the work tree file to store from.
pub trait Recheck {
    fn unchanged_pointer(&self) -> Option<Pointer>;
    fn work_tree_file(&self) -> Option<std::path::PathBuf>;
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
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut spool: Option<BufWriter<std::fs::File>> = None;
    let mut guard = TempGuard(None);
    // Set when the probe said the object is stored: from then on, hash only.
    let mut expected: Option<Pointer> = None;
    let mut probed = false;
    let mut feed = ChunkFeed::new();
    let read = input.read_content(|data| {
        if head.len() <= MAX_POINTER_SIZE {
            let take = data.len().min(MAX_POINTER_SIZE + 1 - head.len());
            head.extend_from_slice(&data[..take]);
        }
        hasher.update(data);
        size += data.len() as u64;
        if expected.is_some() {
            return Ok(());
        }
        if !probed && size >= RECHECK_MIN {
            probed = true;
            expected = recheck.unchanged_pointer();
            if expected.is_some() {
                tracing::debug!("git is re-checking an unchanged file: hashing only");
                spool = None;
                feed = ChunkFeed::new();
                drop(guard.0.take().map(std::fs::remove_file));
                return Ok(());
            }
        }
        if spool.is_none() {
            let (file, path) = store.temp_file("clean")?;
            guard.0 = Some(path);
            spool = Some(BufWriter::with_capacity(1 << 20, file));
        }
        let out = spool.as_mut().expect("spool was just created");
        feed.feed(data);
        out.write_all(data)
            .map_err(|e| GitError::io("writing the new LFS object", e))
    })?;
    if let Err(e) = read {
        return Ok(Err(e));
    }
    if size == 0 {
        return Ok(Ok(Vec::new()));
    }
    if head.len() <= MAX_POINTER_SIZE && Pointer::detect(&head).is_some() {
        // Already a pointer (e.g. a file checked out with smudging skipped): keep it.
        return Ok(Ok(head));
    }
    let oid = Oid(hasher.finalize().into());
    if let Some(expected) = expected {
        let pointer = Pointer::new(oid, size);
        if expected.oid == oid && expected.size == size && store.find(&oid, size).is_some() {
            return Ok(Ok(pointer.to_text().into_bytes()));
        }
        // Not the stored object after all: store it from the work tree.
        return Ok(
            store_from_work_tree(recheck, store, &pointer).map(|()| pointer.to_text().into_bytes())
        );
    }
    let spool = spool.expect("non-empty content was spooled");
    let file = match spool.into_inner() {
        Ok(f) => f,
        Err(e) => {
            return Ok(Err(GitError::io(
                "writing the new LFS object",
                e.into_error(),
            )))
        }
    };
    drop(file);
    let temp = guard.0.take().expect("spool has a path");
    if let Err(e) = store.commit(&temp, &oid) {
        return Ok(Err(e));
    }
    if let Some(chunked) = feed.finish().filter(|c| c.summary.size == size) {
        let list = ChunkList {
            sha256: oid.0,
            file_hash: chunked.summary.file_hash,
            chunks: chunked.chunks,
        };
        if let Err(e) = chunk_lists.save(&list) {
            tracing::warn!("could not save the chunk list of {oid} (the push will chunk it): {e}");
        }
        // A push removes the lists it used; lists of objects that left the store without
        // being pushed (`git lfs prune`) go here.
        chunk_lists.prune(|sha| store.path(&Oid(*sha)).exists());
    }
    Ok(Ok(Pointer::new(oid, size).to_text().into_bytes()))
}

/// Stores `pointer`'s object from the work tree file, which must have exactly the content
/// git sent (same size and sha256).
fn store_from_work_tree(
    recheck: &dyn Recheck,
    store: &LfsStore,
    pointer: &Pointer,
) -> Result<(), GitError> {
    let changed = |path: &std::path::Path| {
        GitError::Failed(format!(
            "{} changed while git was reading it; run the command again",
            path.display()
        ))
    };
    let path = recheck
        .work_tree_file()
        .ok_or_else(|| GitError::Failed("no work tree file to store the object from".into()))?;
    let mut source = std::fs::File::open(&path)
        .map_err(|e| GitError::io(format!("reading {}", path.display()), e))?;
    let (file, temp) = store.temp_file("clean")?;
    let mut guard = TempGuard(Some(temp.clone()));
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(GitError::io(format!("reading {}", path.display()), e)),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| GitError::io("writing the new LFS object", e))?;
        size += n as u64;
    }
    out.into_inner()
        .map_err(|e| GitError::io("writing the new LFS object", e.into_error()))?;
    if size != pointer.size || Oid(hasher.finalize().into()) != pointer.oid {
        return Err(changed(&path));
    }
    guard.0 = None;
    store.commit(&temp, &pointer.oid).map(|_| ())
}
