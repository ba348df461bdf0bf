//! Deciding, chunk by chunk, whether a chunk is already stored somewhere or must be packed
//! into a new xorb, and building each file's reconstruction terms as it goes.
//!
//! Dedup sources are tried in order: this session's new xorbs, the local shard cache, then
//! (for eligible chunks only) the server's global dedup query. A run of deduplicated chunks
//! is accepted only once it is long enough ([`MIN_RUN_CHUNKS`] or [`MIN_RUN_BYTES`]) or when
//! the file ends with it; a shorter run is packed again as new data, so that a file is not
//! scattered over many xorbs for a small saving.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{ClientError, Result};
use crate::records::ChunkLog;
use crate::shard_cache::{CachedChunk, ShardIndex};
use crate::stats::{DedupSource, DedupStats};
use crate::upload::packer::{PackSink, PackerMsg, SourceRef};
use crate::upload::uploader::ShardUpload;
use git_xet_core::constants::{MAX_XORB_CHUNKS, MAX_XORB_SIZE};
use git_xet_core::hash::{chunk_hash, is_global_dedup_eligible, xorb_hash, VerificationHasher};
use git_xet_core::shard::{FooterOptions, Shard, XorbBlock};
use git_xet_core::xorb::{XorbFooter, CHUNK_HEADER_LEN};
use git_xet_core::MerkleHash;
use git_xet_io::pipeline::HashedChunk;

/// A dedup run shorter than this (and than [`MIN_RUN_BYTES`]) is not worth a new term.
pub const MIN_RUN_CHUNKS: usize = 8;
pub const MIN_RUN_BYTES: u64 = 1024 * 1024;
/// Within one file, global dedup queries are at least this many bytes apart.
pub const MIN_QUERY_SPACING: u64 = 4 * 1024 * 1024;
/// The session's chunk index stops growing here (about 16 GiB of new data, ~12 MiB of
/// memory), to keep memory bounded; a chunk first seen later is packed again if repeated.
const MAX_SESSION_INDEX: usize = 1 << 18;

/// A xorb a term points into: one of this session's (hash known once it is closed) or an
/// existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XorbRef {
    Slot(u32),
    Known(MerkleHash),
}

/// One reconstruction term of a planned file.
#[derive(Debug, Clone)]
pub struct PlannedTerm {
    pub xorb: XorbRef,
    pub start: u32,
    pub end: u32,
    pub bytes: u32,
    pub verification: MerkleHash,
}

/// A file whose chunks have all been planned.
pub struct PlannedFile {
    pub terms: Vec<PlannedTerm>,
    pub stats: DedupStats,
    /// Every chunk's (hash, size), for the local reconstruction record.
    pub chunks: Option<ChunkLog>,
}

/// A xorb this session is building.
#[derive(Debug, Default)]
struct Slot {
    chunks: Vec<(MerkleHash, u32)>,
    /// Serialized size if no chunk compresses (an upper bound), footer included.
    bound: usize,
    hash: Option<MerkleHash>,
    /// Registered by an intermediate shard; its chunk list was dropped.
    flushed: bool,
}

/// Where a run of deduplicated chunks continues.
#[derive(Debug, Clone)]
enum Cursor {
    Slot { slot: u32, index: u32 },
    Cached(CachedChunk),
}

#[derive(Debug)]
struct Run {
    source: DedupSource,
    cursor: Cursor,
    /// Chunks of a run not yet accepted, with their locations.
    pending: Vec<(HashedChunk, u64, XorbRef, u32)>,
    pending_bytes: u64,
    accepted: bool,
}

/// Asks the server's global dedup for a chunk; returns the answer shard, if any.
pub type GlobalQuery<'a> = &'a mut dyn FnMut(&MerkleHash) -> Result<Option<Bytes>>;

/// Session-wide planning state, shared by the files of a session (one at a time).
pub struct SessionPlanner {
    slots: Vec<Slot>,
    open: Option<u32>,
    index: HashMap<MerkleHash, (u32, u32)>,
    pub shards: ShardIndex,
    sink: Box<dyn PackSink>,
    pub global_dedup: bool,
    keep_chunk_lists: bool,
    /// Closed xorbs not yet in a shard, and their chunk count.
    unflushed: Vec<u32>,
    unflushed_chunks: usize,
    flush_chunks: usize,
}

/// Per-file planning state.
pub struct FilePlanner<'s> {
    session: &'s mut SessionPlanner,
    source: Option<Arc<File>>,
    /// Offset of the chunk being planned.
    at: u64,
    terms: Vec<PlannedTerm>,
    verifier: VerificationHasher,
    run: Option<Run>,
    chunk_no: u64,
    offset: u64,
    last_query: Option<u64>,
    stats: DedupStats,
    chunks: Option<ChunkLog>,
    /// Set when chunk hashes come from a list rather than from the data: new chunks are then
    /// hashed before being packed. Holds the file's name for the error.
    check_new: Option<String>,
}

fn record_bound(len: usize) -> usize {
    CHUNK_HEADER_LEN + len
}

impl SessionPlanner {
    /// `flush_chunks`: once closed xorbs hold this many chunks, they are registered with
    /// an intermediate shard and their metadata leaves memory (bounding it for huge uploads).
    pub fn new(
        shards: ShardIndex,
        sink: Box<dyn PackSink>,
        global_dedup: bool,
        keep_chunk_lists: bool,
        flush_chunks: usize,
    ) -> Self {
        SessionPlanner {
            slots: Vec::new(),
            open: None,
            index: HashMap::new(),
            shards,
            sink,
            global_dedup,
            keep_chunk_lists,
            unflushed: Vec::new(),
            unflushed_chunks: 0,
            flush_chunks: flush_chunks.max(1),
        }
    }

    /// Plans a file; `source` is the file itself when it can be read again at upload time
    /// (new chunks stored raw are then sent from it instead of being staged).
    pub fn file(&mut self, source: Option<Arc<File>>) -> FilePlanner<'_> {
        let chunks = self
            .keep_chunk_lists
            .then(ChunkLog::new)
            .and_then(|r| r.ok());
        FilePlanner {
            source,
            at: 0,
            session: self,
            terms: Vec::new(),
            verifier: VerificationHasher::default(),
            run: None,
            chunk_no: 0,
            offset: 0,
            last_query: None,
            stats: DedupStats::default(),
            chunks,
            check_new: None,
        }
    }

    /// Adds a new chunk to the open xorb (closing it first when full); returns its location.
    fn pack(&mut self, chunk: &HashedChunk, source: Option<SourceRef>) -> Result<(u32, u32)> {
        let len = chunk.data.len();
        let fits = self.open.is_some_and(|s| {
            let slot = &self.slots[s as usize];
            let n = slot.chunks.len() + 1;
            n <= MAX_XORB_CHUNKS
                && slot.bound + record_bound(len) + XorbFooter::encoded_len(n) + 4 <= MAX_XORB_SIZE
        });
        if !fits {
            self.close_open()?;
            if self.unflushed_chunks >= self.flush_chunks {
                self.flush_closed()?;
            }
            self.slots.push(Slot::default());
            self.open = Some(self.slots.len() as u32 - 1);
        }
        let s = self.open.expect("a slot is open");
        let slot = &mut self.slots[s as usize];
        let index = slot.chunks.len() as u32;
        slot.chunks.push((chunk.hash, len as u32));
        slot.bound += record_bound(len);
        if self.index.len() < MAX_SESSION_INDEX {
            self.index.entry(chunk.hash).or_insert((s, index));
        }
        self.sink.send(PackerMsg::Chunk {
            hash: chunk.hash,
            data: chunk.data.clone(),
            source,
        })?;
        Ok((s, index))
    }

    /// Closes the open xorb: its hash is computed here and the packer finishes the file.
    pub fn close_open(&mut self) -> Result<()> {
        if let Some(s) = self.open.take() {
            let slot = &mut self.slots[s as usize];
            let hash = xorb_hash(slot.chunks.iter().map(|&(h, n)| (h, u64::from(n))));
            slot.hash = Some(hash);
            self.unflushed.push(s);
            self.unflushed_chunks += slot.chunks.len();
            self.sink.send(PackerMsg::Close { hash })?;
        }
        Ok(())
    }

    /// Registers the closed xorbs with a shard of their own (sent after them) and forgets
    /// their chunks: later duplicates of those chunks in this session are packed again.
    fn flush_closed(&mut self) -> Result<()> {
        let mut shard = Shard::new();
        for s in std::mem::take(&mut self.unflushed) {
            let slot = &mut self.slots[s as usize];
            let hash = slot.hash.expect("closed slots have a hash");
            let chunks = std::mem::take(&mut slot.chunks);
            shard.xorbs.push(XorbBlock::from_chunks(hash, chunks, 0));
            slot.flushed = true;
        }
        self.unflushed_chunks = 0;
        let slots = &self.slots;
        self.index.retain(|_, (s, _)| !slots[*s as usize].flushed);
        self.index.shrink_to_fit();
        tracing::debug!(
            "registering {} xorbs with an intermediate shard",
            shard.xorbs.len()
        );
        let upload = Bytes::from(shard.to_upload_bytes());
        let stored = shard.to_stored_bytes(&FooterOptions::default());
        self.sink
            .send(PackerMsg::Shard(ShardUpload { upload, stored }))
    }

    /// Keeps a global dedup answer that arrived after its file was planned, for later ones.
    pub fn add_dedup_answer(&mut self, shard: &[u8]) {
        if let Err(e) = self.shards.add_dedup_shard(shard) {
            tracing::warn!("ignoring a global dedup answer: {e}");
        }
    }

    /// The hash of a xorb reference (after [`SessionPlanner::close_open`]).
    pub fn resolve(&self, xorb: XorbRef) -> MerkleHash {
        match xorb {
            XorbRef::Known(h) => h,
            XorbRef::Slot(s) => self.slots[s as usize]
                .hash
                .expect("slot closed before resolving"),
        }
    }

    /// (hash, chunks) of every xorb this session created, after closing.
    pub fn new_xorbs(&self) -> impl Iterator<Item = (MerkleHash, &[(MerkleHash, u32)])> {
        self.slots
            .iter()
            .filter(|s| !s.flushed)
            .filter_map(|s| Some((s.hash?, s.chunks.as_slice())))
    }

    pub fn sink_mut(&mut self) -> &mut dyn PackSink {
        self.sink.as_mut()
    }
}

impl FilePlanner<'_> {
    /// Chunk hashes pushed from now on were not computed from their data: check each chunk
    /// that gets packed.
    pub fn check_new_chunks(&mut self, name: &str) {
        self.check_new = Some(name.to_string());
    }

    /// Plans one chunk; `query` is used for eligible chunks that nothing local knows.
    pub fn push(&mut self, chunk: HashedChunk, query: GlobalQuery<'_>) -> Result<()> {
        let len = chunk.data.len() as u64;
        self.stats.logical_bytes += len;
        self.stats.chunks += 1;
        if let Some(log) = self.chunks.as_mut() {
            if let Err(e) = log.push(&chunk.hash, len as u32) {
                tracing::warn!("not recording this file's chunks: {e}");
                self.chunks = None;
            }
        }
        let first = self.chunk_no == 0;
        self.chunk_no += 1;
        let at = self.offset;
        self.at = at;
        self.offset += len;

        if self.continue_run(&chunk)? {
            return Ok(());
        }
        self.end_run()?;
        match self.find(&chunk.hash, first, at, query)? {
            Some((source, cursor)) => {
                let (xorb, index) = self.location(&cursor);
                self.run = Some(Run {
                    source,
                    cursor,
                    pending: Vec::new(),
                    pending_bytes: 0,
                    accepted: false,
                });
                self.add_to_run(chunk, xorb, index)
            }
            None => self.add_new(&chunk, at),
        }
    }

    /// Ends the file: a pending run that reaches the end of the file is accepted.
    pub fn finish(mut self) -> Result<PlannedFile> {
        if let Some(run) = self.run.as_mut() {
            run.accepted = true;
            let pending = std::mem::take(&mut run.pending);
            let source = run.source;
            for (chunk, _, xorb, index) in pending {
                self.emit_dedup(&chunk, xorb, index, source);
            }
        }
        self.run = None;
        self.close_term();
        Ok(PlannedFile {
            terms: self.terms,
            stats: self.stats,
            chunks: self.chunks,
        })
    }

    fn location(&self, cursor: &Cursor) -> (XorbRef, u32) {
        match cursor {
            Cursor::Slot { slot, index } => (XorbRef::Slot(*slot), *index),
            Cursor::Cached(c) => (XorbRef::Known(c.xorb.xorb_hash), c.index),
        }
    }

    /// Dedup candidates for a chunk that does not continue the current run.
    fn find(
        &mut self,
        hash: &MerkleHash,
        first: bool,
        at: u64,
        query: GlobalQuery<'_>,
    ) -> Result<Option<(DedupSource, Cursor)>> {
        if let Some(&(slot, index)) = self.session.index.get(hash) {
            return Ok(Some((DedupSource::Session, Cursor::Slot { slot, index })));
        }
        if let Some(c) = self.session.shards.lookup(hash) {
            return Ok(Some((DedupSource::ShardCache, Cursor::Cached(c))));
        }
        let spaced = self
            .last_query
            .is_none_or(|last| at >= last + MIN_QUERY_SPACING);
        if self.session.global_dedup && spaced && is_global_dedup_eligible(hash, first) {
            self.last_query = Some(at);
            self.stats.global_queries += 1;
            match query(hash) {
                Ok(Some(shard)) => {
                    self.session.add_dedup_answer(&shard);
                    if let Some(c) = self.session.shards.lookup(hash) {
                        return Ok(Some((DedupSource::Global, Cursor::Cached(c))));
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("global dedup disabled for this session: {e}");
                    self.session.global_dedup = false;
                }
            }
        }
        Ok(None)
    }

    /// Extends the current run with this chunk if it is the next one where the run is stored.
    fn continue_run(&mut self, chunk: &HashedChunk) -> Result<bool> {
        let Some(run) = &self.run else {
            return Ok(false);
        };
        let next = match &run.cursor {
            Cursor::Slot { slot, index } => {
                let chunks = &self.session.slots[*slot as usize].chunks;
                (chunks
                    .get(*index as usize + 1)
                    .is_some_and(|c| c.0 == chunk.hash))
                .then(|| Cursor::Slot {
                    slot: *slot,
                    index: index + 1,
                })
            }
            Cursor::Cached(c) => c.next_is(&chunk.hash).then(|| Cursor::Cached(c.advance())),
        };
        let Some(next) = next else { return Ok(false) };
        let (xorb, index) = self.location(&next);
        self.run.as_mut().expect("checked").cursor = next;
        self.add_to_run(chunk.clone(), xorb, index)?;
        Ok(true)
    }

    fn add_to_run(&mut self, chunk: HashedChunk, xorb: XorbRef, index: u32) -> Result<()> {
        let run = self.run.as_mut().expect("a run is open");
        let source = run.source;
        if run.accepted {
            self.emit_dedup(&chunk, xorb, index, source);
            return Ok(());
        }
        run.pending_bytes += chunk.data.len() as u64;
        run.pending.push((chunk, self.at, xorb, index));
        if run.pending.len() >= MIN_RUN_CHUNKS || run.pending_bytes >= MIN_RUN_BYTES {
            run.accepted = true;
            let pending = std::mem::take(&mut run.pending);
            for (chunk, _, xorb, index) in pending {
                self.emit_dedup(&chunk, xorb, index, source);
            }
        }
        Ok(())
    }

    /// Ends the current run; a run too short to accept is packed as new data.
    fn end_run(&mut self) -> Result<()> {
        if let Some(run) = self.run.take() {
            for (chunk, offset, _, _) in run.pending {
                self.add_new(&chunk, offset)?;
            }
        }
        Ok(())
    }

    fn add_new(&mut self, chunk: &HashedChunk, offset: u64) -> Result<()> {
        if let Some(name) = &self.check_new {
            if chunk_hash(&chunk.data) != chunk.hash {
                return Err(ClientError::corrupt(
                    format!("uploading {name}"),
                    format!("the data at offset {offset} does not match its chunk list"),
                ));
            }
        }
        let source = self.source.as_ref().map(|file| SourceRef {
            file: file.clone(),
            offset,
        });
        let (slot, index) = self.session.pack(chunk, source)?;
        self.stats.new_bytes += chunk.data.len() as u64;
        self.add_to_term(XorbRef::Slot(slot), index, chunk);
        Ok(())
    }

    fn emit_dedup(&mut self, chunk: &HashedChunk, xorb: XorbRef, index: u32, source: DedupSource) {
        self.stats.add_deduped(source, chunk.data.len() as u64);
        self.add_to_term(xorb, index, chunk);
    }

    fn add_to_term(&mut self, xorb: XorbRef, index: u32, chunk: &HashedChunk) {
        let extends = self
            .terms
            .last()
            .is_some_and(|t| t.xorb == xorb && t.end == index);
        if !extends {
            self.close_term();
            self.terms.push(PlannedTerm {
                xorb,
                start: index,
                end: index,
                bytes: 0,
                verification: MerkleHash::ZERO,
            });
        }
        let term = self.terms.last_mut().expect("a term is open");
        term.end += 1;
        term.bytes += chunk.data.len() as u32;
        self.verifier.update(&chunk.hash);
    }

    fn close_term(&mut self) {
        if let Some(term) = self.terms.last_mut() {
            if term.verification == MerkleHash::ZERO {
                term.verification = self.verifier.finish();
            }
        }
        self.verifier = VerificationHasher::default();
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
