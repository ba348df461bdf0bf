//! Turning a whole file (a git-lfs `basic` upload) into XET content on the server: chunk it,
//! deduplicate against what its repository's dedup scope holds (`--dedup-scope`; chunks
//! stored only in other scopes are stored again, in new xorbs), pack new chunks into xorbs, and describe the file
//! with a shard, exactly as a XET client would. Legacy LFS content so becomes XET content
//! that `xet` clients can deduplicate against and download by range.
//!
//! Runs on a blocking thread while the upload arrives, so that the answer follows the last
//! byte at once (git-lfs gives up on a silent connection after `lfs.activitytimeout`, 30 s
//! by default, which converting a large file afterwards would exceed). New xorbs are staged
//! (written and fsynced, not yet visible) and only stored by [`commit`] once the caller has
//! checked the upload's sha256: a bad upload leaves nothing behind. Memory is one xorb being
//! built plus a short dedup run.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;

use crate::cas::store_staged_xorb;
use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_core::hash::{sha256_as_merkle, verification_hash};
use git_xet_core::shard::{FileInfo, FileTerm, Shard, XorbBlock};
use git_xet_core::xorb::{CompressedChunk, XorbBuilder, XorbFooter};
use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{DedupDomain, XorbMeta};
use git_xet_io::pipeline::{chunk_and_hash, HashedChunk, PipelineError};
use git_xet_storage::Staged;

/// A run of chunks found stored elsewhere is referenced only when it is at least this long
/// (or ends the file); shorter runs are stored again, so that files do not fragment into
/// many tiny terms that make every read scatter.
const MIN_DEDUP_RUN: usize = 8;

/// Where a term's chunks live: an already stored xorb, or one built by this ingest.
#[derive(Clone)]
enum XorbRef {
    Stored(Arc<XorbMeta>),
    New(usize),
}

impl XorbRef {
    fn same(&self, other: &XorbRef) -> bool {
        match (self, other) {
            (XorbRef::Stored(a), XorbRef::Stored(b)) => a.hash() == b.hash(),
            (XorbRef::New(a), XorbRef::New(b)) => a == b,
            _ => false,
        }
    }
}

struct Term {
    xorb: XorbRef,
    start: u32,
    end: u32,
    bytes: u64,
}

/// Consecutive chunks that match consecutive chunks of a stored xorb.
struct Run {
    meta: Arc<XorbMeta>,
    start: u32,
    next: u32,
    bytes: u64,
    /// The chunks themselves until the run is long enough to be used.
    held: Vec<HashedChunk>,
}

/// What the ingest produced: the shard describing the file, and its new xorbs, staged.
pub struct Ingested {
    pub shard: Shard,
    pub size: u64,
    pub sha256: [u8; 32],
    pub staged: Vec<(Staged, XorbMeta)>,
    pub deduplicated_bytes: u64,
}

struct Packer<'a> {
    state: &'a SharedState,
    /// The xorbs this upload may reference.
    domain: DedupDomain,
    builder: XorbBuilder,
    new_xorbs: Vec<XorbFooter>,
    staged: Vec<(Staged, XorbMeta)>,
    terms: Vec<Term>,
    run: Option<Run>,
    /// Chunks stored by this ingest: (new xorb number, chunk index).
    seen: HashMap<MerkleHash, (usize, u32)>,
    deduplicated_bytes: u64,
}

impl Packer<'_> {
    fn push(&mut self, chunk: HashedChunk) -> ServerResult<()> {
        let len = chunk.data.len() as u64;
        if let Some(run) = &mut self.run {
            if run.meta.footer.chunk_hashes.get(run.next as usize) == Some(&chunk.hash) {
                run.next += 1;
                run.bytes += len;
                if !run.held.is_empty() {
                    run.held.push(chunk);
                    if run.held.len() >= MIN_DEDUP_RUN {
                        run.held.clear();
                    }
                }
                return Ok(());
            }
            self.close_run(false)?;
        }
        if let Some(&(seq, index)) = self.seen.get(&chunk.hash) {
            self.add_term(XorbRef::New(seq), index, index + 1, len);
            self.deduplicated_bytes += len;
            return Ok(());
        }
        if let Some((xorb, index)) = self.state.index.chunk_location(&chunk.hash, &self.domain)? {
            if let Some(meta) = self.state.index.xorb(&xorb)? {
                self.run = Some(Run {
                    meta,
                    start: index,
                    next: index + 1,
                    bytes: len,
                    held: vec![chunk],
                });
                return Ok(());
            }
        }
        self.add_new(chunk)
    }

    /// Ends the current run: referenced if long enough or at the end of the file, else its
    /// chunks are stored anew.
    fn close_run(&mut self, at_end: bool) -> ServerResult<()> {
        let Some(run) = self.run.take() else {
            return Ok(());
        };
        if run.held.is_empty() || at_end {
            self.deduplicated_bytes += run.bytes;
            self.add_term(XorbRef::Stored(run.meta), run.start, run.next, run.bytes);
        } else {
            for chunk in run.held {
                self.add_new(chunk)?;
            }
        }
        Ok(())
    }

    fn add_new(&mut self, chunk: HashedChunk) -> ServerResult<()> {
        let compressed = CompressedChunk::new(chunk.hash, &chunk.data);
        if !self.builder.fits(compressed.record_len()) {
            self.flush_xorb()?;
        }
        self.builder.push(&compressed)?;
        let seq = self.new_xorbs.len();
        let index = self.builder.num_chunks() as u32 - 1;
        self.seen.insert(chunk.hash, (seq, index));
        self.add_term(XorbRef::New(seq), index, index + 1, chunk.data.len() as u64);
        Ok(())
    }

    fn add_term(&mut self, xorb: XorbRef, start: u32, end: u32, bytes: u64) {
        if let Some(last) = self.terms.last_mut() {
            if last.xorb.same(&xorb) && last.end == start {
                last.end = end;
                last.bytes += bytes;
                return;
            }
        }
        self.terms.push(Term {
            xorb,
            start,
            end,
            bytes,
        });
    }

    /// Finishes the xorb being built and stages it: written and made durable now, so that
    /// committing it later is only a rename.
    fn flush_xorb(&mut self) -> ServerResult<()> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let xorb = std::mem::take(&mut self.builder).finish();
        let meta = XorbMeta {
            footer: xorb.footer.clone(),
            stored_len: xorb.bytes.len() as u64,
        };
        let staged = self.state.store.stage()?;
        let mut file = staged.file();
        file.write_all(&xorb.bytes)?;
        if self.state.config.fsync {
            file.sync_all()?;
        }
        self.staged.push((staged, meta));
        self.new_xorbs.push(xorb.footer);
        Ok(())
    }

    /// The term's xorb hash and chunk hashes.
    fn term_chunks(&self, term: &Term) -> (MerkleHash, Vec<MerkleHash>) {
        let footer = match &term.xorb {
            XorbRef::Stored(meta) => &meta.footer,
            XorbRef::New(seq) => &self.new_xorbs[*seq],
        };
        (
            footer.hash,
            footer.chunk_hashes[term.start as usize..term.end as usize].to_vec(),
        )
    }
}

/// Ingests everything `reader` yields, for `repo`. Returns the shard that would register the file (not
/// yet validated or registered) and its new xorbs, staged: nothing is visible until
/// [`commit`].
pub fn ingest_stream<R: Read + Send>(
    state: &SharedState,
    repo: &RepoName,
    reader: R,
) -> ServerResult<Ingested> {
    let mut packer = Packer {
        state,
        domain: state.dedup_domain(repo),
        builder: XorbBuilder::new(),
        new_xorbs: Vec::new(),
        staged: Vec::new(),
        terms: Vec::new(),
        run: None,
        seen: HashMap::new(),
        deduplicated_bytes: 0,
    };
    let summary =
        chunk_and_hash(reader, true, |chunk| packer.push(chunk)).map_err(|e| match e {
            PipelineError::Read(e) => ServerError::bad_request(format!("reading the upload: {e}")),
            PipelineError::Sink(e) => e,
        })?;
    let sha256 = summary.sha256.expect("sha256 was asked for");
    packer.close_run(true)?;
    packer.flush_xorb()?;

    let mut terms = Vec::with_capacity(packer.terms.len());
    let mut verification = Vec::with_capacity(packer.terms.len());
    for term in &packer.terms {
        let (xorb_hash, hashes) = packer.term_chunks(term);
        verification.push(verification_hash(hashes.iter()));
        terms.push(FileTerm {
            xorb_hash,
            cas_flags: 0,
            unpacked_bytes: u32::try_from(term.bytes)
                .map_err(|_| ServerError::internal("term over 4 GiB"))?,
            chunk_start: term.start,
            chunk_end: term.end,
        });
    }
    let xorbs = packer
        .new_xorbs
        .iter()
        .map(|f| {
            let chunks = (0..f.num_chunks()).map(|i| (f.chunk_hashes[i], f.unpacked_chunk_len(i)));
            XorbBlock::from_chunks(f.hash, chunks, 0)
        })
        .collect();
    let info = FileInfo {
        file_hash: summary.file_hash,
        terms,
        verification: Some(verification),
        sha256: Some(sha256_as_merkle(&sha256)),
    };
    Ok(Ingested {
        shard: Shard {
            files: vec![info],
            xorbs,
        },
        size: summary.size,
        sha256,
        staged: packer.staged,
        deduplicated_bytes: packer.deduplicated_bytes,
    })
}

/// Stores and indexes an ingest's staged xorbs (held by `repo`), once its upload has been
/// verified.
pub async fn commit(
    state: &SharedState,
    staged: Vec<(Staged, XorbMeta)>,
    repo: &RepoName,
) -> ServerResult<()> {
    for (staged, meta) in staged {
        store_staged_xorb(state, meta, staged, repo).await?;
    }
    Ok(())
}
