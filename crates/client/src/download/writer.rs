//! Writing chunks, in order, to a temporary file next to the destination, while computing
//! what verification needs (the file hash from chunk hashes; sha256 when expected). The
//! caller renames the file into place only after everything checked out; otherwise the
//! temporary file is deleted and nothing appears at the destination.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sha2::Digest;
use tempfile::NamedTempFile;
use tokio::sync::mpsc;

use crate::download::fetch::DecodedChunk;
use crate::download::tap::ContentTap;
use crate::error::{ClientError, Result};
use crate::progress::{ProgressFn, Throttled};
use crate::records::ChunkLog;
use git_xet_core::hash::file_hash_from_root;
use git_xet_core::merkle::MerkleBuilder;
use git_xet_core::MerkleHash;
use git_xet_io::platform::file;

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
    let mut sha = setup
        .sha256
        .then(|| Sha256Stream::start(setup.expected_len))
        .transpose()?;
    let mut skip = setup.skip;
    let mut remaining = setup.limit.unwrap_or(u64::MAX);
    let mut written = 0u64;
    let mut progress = Throttled::new(setup.progress.clone(), setup.expected_len);
    let mut record = if setup.record {
        ChunkLog::new().ok()
    } else {
        None
    };
    let write_behind = setup.expected_len >= WRITE_BEHIND_MIN;
    let mut sent_to_disk = 0u64;

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
        if write_behind && written - sent_to_disk >= WRITE_BEHIND_WINDOW {
            let file = out.get_ref().as_file();
            file::start_writeback(file, sent_to_disk, written - sent_to_disk);
            sent_to_disk = written;
        }
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
        sha256: sha.map(Sha256Stream::finish).transpose()?,
        record,
    })
}

/// Outputs from this size on go to the disk as they are written, a window at a time: the
/// sync or flush that follows a large download (the kernel's, or the user's) then finds most
/// of it written instead of stalling on all of it. Smaller ones are left to the kernel.
const WRITE_BEHIND_MIN: u64 = 64 << 20;
const WRITE_BEHIND_WINDOW: u64 = 8 << 20;

/// Objects from this size on are hashed on a thread of their own.
const BACKGROUND_SHA256_MIN: u64 = 8 << 20;

/// The sha256 of the output, computed beside the writing: inline for small objects, on its
/// own thread for large ones. Inline it was a third of a large download's writer time
/// (0.55 s of 1.75 s for 1 GiB rebuilt from local data), which the file write and the hand
/// over to git then waited for.
enum Sha256Stream {
    Inline(sha2::Sha256),
    Background {
        tx: std::sync::mpsc::SyncSender<Bytes>,
        hasher: std::thread::JoinHandle<[u8; 32]>,
    },
}

impl Sha256Stream {
    fn start(expected_len: u64) -> Result<Sha256Stream> {
        if expected_len < BACKGROUND_SHA256_MIN {
            return Ok(Sha256Stream::Inline(sha2::Sha256::new()));
        }
        // Chunks average 64 KiB: at most about 16 MiB waits to be hashed.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Bytes>(256);
        let hasher = std::thread::Builder::new()
            .name("git-xet-sha256".into())
            .spawn(move || {
                let mut sha = sha2::Sha256::new();
                for data in rx {
                    sha.update(&data);
                }
                sha.finalize().into()
            })
            .map_err(|e| ClientError::Aborted(format!("cannot start the sha256 thread: {e}")))?;
        Ok(Sha256Stream::Background { tx, hasher })
    }

    fn update(&mut self, data: &Bytes) {
        match self {
            Sha256Stream::Inline(sha) => sha.update(data),
            // A hasher gone away shows in `finish`.
            Sha256Stream::Background { tx, .. } => {
                let _ = tx.send(data.clone());
            }
        }
    }

    fn finish(self) -> Result<[u8; 32]> {
        match self {
            Sha256Stream::Inline(sha) => Ok(sha.finalize().into()),
            Sha256Stream::Background { tx, hasher } => {
                drop(tx);
                hasher
                    .join()
                    .map_err(|_| ClientError::Aborted("the sha256 thread failed".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_core::hash::chunk_hash;

    /// Writes `content` in 64 KiB chunks and returns what the writer computed.
    fn write(content: &[u8], dir: &Path) -> Written {
        let (tx, rx) = mpsc::channel(8);
        let setup = WriterSetup {
            output: dir.join("out"),
            skip: 0,
            limit: None,
            file_hash: true,
            sha256: true,
            record: false,
            progress: None,
            expected_len: content.len() as u64,
            tap: None,
        };
        let chunks: Vec<Bytes> = content
            .chunks(64 << 10)
            .map(Bytes::copy_from_slice)
            .collect();
        let sender = std::thread::spawn(move || {
            for data in chunks {
                let hash = chunk_hash(&data);
                tx.blocking_send(DecodedChunk {
                    hash,
                    data,
                    stored_len: 0,
                })
                .unwrap();
            }
        });
        let written = run(setup, rx).unwrap();
        sender.join().unwrap();
        written
    }

    #[test]
    fn sha256_is_the_contents_inline_and_on_its_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        // Below and above BACKGROUND_SHA256_MIN.
        for len in [100_000, BACKGROUND_SHA256_MIN as usize + 12_345] {
            let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let written = write(&content, dir.path());
            let expected: [u8; 32] = sha2::Sha256::digest(&content).into();
            assert_eq!(written.sha256, Some(expected), "{len} bytes");
            assert_eq!(written.bytes, len as u64);
            assert_eq!(std::fs::read(written.temp.path()).unwrap(), content);
        }
    }

    #[test]
    fn an_output_sent_to_the_disk_as_it_is_written_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        // Past WRITE_BEHIND_MIN, ending inside a window.
        let len = (WRITE_BEHIND_MIN + 3 * WRITE_BEHIND_WINDOW) as usize + 54_321;
        let content: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
        let written = write(&content, dir.path());
        assert_eq!(written.bytes, len as u64);
        assert_eq!(std::fs::read(written.temp.path()).unwrap(), content);
    }
}
