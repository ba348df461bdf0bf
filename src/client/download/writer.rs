//! Writing chunks, in order, to a temporary file next to the destination, while computing
//! what verification needs (the file hash from chunk hashes; sha256 when expected). The
//! caller renames the file into place only after everything checked out; otherwise the
//! temporary file is deleted and nothing appears at the destination.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use sha2::Digest;
use tempfile::NamedTempFile;
use tokio::sync::mpsc;

use crate::client::download::fetch::DecodedChunk;
use crate::client::download::tap::ContentTap;
use crate::client::error::{ClientError, Result};
use crate::client::progress::{ProgressFn, Throttled};
use crate::client::records::ChunkLog;
use crate::xet::hash::file_hash_from_root;
use crate::xet::merkle::MerkleBuilder;
use crate::xet::MerkleHash;

/// What to write and what to compute.
pub struct WriterSetup {
    pub output: PathBuf,
    /// Bytes of the first chunks to drop (`offset_into_first_range`).
    pub skip: u64,
    /// Write at most this many bytes (range downloads).
    pub limit: Option<u64>,
    /// Compute the file hash (whole-file downloads).
    pub file_hash: bool,
    pub sha256: bool,
    /// Log every chunk for a reconstruction record.
    pub record: bool,
    pub progress: Option<ProgressFn>,
    pub expected_len: u64,
    /// Also hands every written byte to this consumer.
    pub tap: Option<ContentTap>,
}

/// The written temporary file and what was computed over it.
pub struct Written {
    pub temp: NamedTempFile,
    pub bytes: u64,
    pub file_hash: Option<MerkleHash>,
    pub sha256: Option<[u8; 32]>,
    pub record: Option<ChunkLog>,
}

/// Creates the temporary file in the destination's directory (so the final rename is atomic).
pub fn create_temp(output: &Path) -> Result<NamedTempFile> {
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .tempfile_in(&dir)
        .map_err(|e| ClientError::io("creating the output file", &dir, e))
}

/// Consumes chunks until the channel closes.
pub fn run(setup: WriterSetup, mut rx: mpsc::Receiver<DecodedChunk>) -> Result<Written> {
    let temp = create_temp(&setup.output)?;
    let path = temp.path().to_path_buf();
    // Small: chunks (larger than this) are written straight through, uncopied.
    let mut out = BufWriter::with_capacity(16 * 1024, temp);
    let mut merkle = setup.file_hash.then(MerkleBuilder::new);
    let mut sha = setup.sha256.then(sha2::Sha256::new);
    let mut skip = setup.skip;
    let mut remaining = setup.limit.unwrap_or(u64::MAX);
    let mut written = 0u64;
    let mut progress = Throttled::new(setup.progress.clone(), setup.expected_len);
    let mut record = if setup.record {
        ChunkLog::new().ok()
    } else {
        None
    };

    while let Some(chunk) = rx.blocking_recv() {
        if let Some(m) = merkle.as_mut() {
            m.push(chunk.hash, chunk.data.len() as u64);
        }
        if let Some(log) = record.as_mut() {
            if log.push(&chunk.hash, chunk.data.len() as u32).is_err() {
                record = None; // only a cache: go on without it
            }
        }
        let dropped = skip.min(chunk.data.len() as u64) as usize;
        skip -= dropped as u64;
        let take = ((chunk.data.len() - dropped) as u64).min(remaining) as usize;
        let data = chunk.data.slice(dropped..dropped + take);
        if data.is_empty() {
            continue;
        }
        out.write_all(&data)
            .map_err(|e| ClientError::io("writing the output", &path, e))?;
        if let Some(s) = sha.as_mut() {
            s.update(&data);
        }
        if let Some(tap) = &setup.tap {
            tap.offer(written, &data, chunk.hash);
        }
        remaining -= take as u64;
        written += take as u64;
        progress.update(written);
    }
    let temp = out
        .into_inner()
        .map_err(|e| ClientError::io("writing the output", &path, e.into_error()))?;
    let file_hash = merkle.map(|m| {
        let n = m.len();
        file_hash_from_root(n, m.finish())
    });
    Ok(Written {
        temp,
        bytes: written,
        file_hash,
        sha256: sha.map(|s| s.finalize().into()),
        record,
    })
}
