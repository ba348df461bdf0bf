//! What a session uploads: files and streams chunked as they are read, or files whose chunk
//! list is known, each planned into the session's xorbs.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::planner::{self, PlannedFile, SessionPlanner};
use super::FileUpload;
use crate::chunk_lists::ChunkList;
use crate::error::{ClientError, Result};
use crate::progress::{ProgressFn, Throttled};
use git_xet_core::constants::MAX_CHUNK_SIZE;
use git_xet_io::pipeline::{chunk_and_hash, chunk_and_hash_file, HashedChunk, PipelineError};
use git_xet_io::platform::mmap::Mapper;

/// The size of what is uploaded: exact for files, a hint for other readers.
#[derive(Clone, Copy)]
pub(super) enum Size {
    Exact(u64),
    Hint(u64),
}

/// What to upload: content to chunk, or a file whose chunks are known.
pub(super) enum Input {
    Stream(Stream),
    Chunked(Arc<std::fs::File>, ChunkList, Mapper),
}

/// Content to chunk: a file (mapped when regular and the mapper maps) or any stream.
pub(super) enum Stream {
    File(Arc<std::fs::File>, Mapper),
    Reader(Box<dyn Read + Send>),
}

pub(super) fn plan_stream(
    planner: &mut SessionPlanner,
    input: Stream,
    size_hint: u64,
    progress: Option<ProgressFn>,
    query: planner::GlobalQuery<'_>,
    name: &str,
) -> Result<(FileUpload, PlannedFile)> {
    let source = match &input {
        Stream::File(f, _) if f.metadata().is_ok_and(|m| m.is_file()) => Some(f.clone()),
        _ => None,
    };
    let mut file = planner.file(source);
    let mut progress = Throttled::new(progress, size_hint);
    let mut done = 0u64;
    let sink = |chunk: HashedChunk| {
        done += chunk.data.len() as u64;
        file.push(chunk, &mut *query)?;
        progress.update(done);
        Ok::<(), ClientError>(())
    };
    let summary = match input {
        Stream::File(f, mapper) => chunk_and_hash_file(&f, mapper, true, sink),
        Stream::Reader(r) => chunk_and_hash(r, true, sink),
    }
    .map_err(|e| match e {
        PipelineError::Read(e) => ClientError::io("reading the file to upload", name, e),
        PipelineError::Sink(e) => e,
    })?;
    let planned = file.finish()?;
    let upload = FileUpload {
        name: name.to_string(),
        file_hash: summary.file_hash,
        sha256: summary.sha256.expect("sha256 requested"),
        size: summary.size,
        stats: planned.stats,
    };
    Ok((upload, planned))
}

/// Windows of the file being planned from a chunk list.
const LIST_WINDOW: u64 = 16 << 20;

/// Plans a file from its chunk list. The file is taken window by window (each window
/// overlaps the next by one maximal chunk, so every chunk lies inside the window where it
/// starts); mapped, only the pages of chunks that get packed are read (read, the whole
/// window is). The planner checks each packed chunk against its listed hash. A window is
/// released once no chunk refers to it.
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_chunked(
    planner: &mut SessionPlanner,
    file: Arc<std::fs::File>,
    list: ChunkList,
    mapper: Mapper,
    size: u64,
    progress: Option<ProgressFn>,
    query: planner::GlobalQuery<'_>,
    name: &str,
) -> Result<(FileUpload, PlannedFile)> {
    let wrong = |reason: String| ClientError::corrupt(format!("uploading {name}"), reason);
    if let Some((_, len)) = list
        .chunks
        .iter()
        .find(|c| c.1 == 0 || c.1 as usize > MAX_CHUNK_SIZE)
    {
        return Err(wrong(format!("its chunk list has a chunk of {len} bytes")));
    }
    let mut planned = planner.file(Some(file.clone()));
    planned.check_new_chunks(name);
    let mut progress = Throttled::new(progress, size);
    let mut window = Bytes::new();
    let mut window_start = 0u64;
    let mut offset = 0u64;
    for &(hash, len) in &list.chunks {
        let end = offset + u64::from(len);
        if end > window_start + window.len() as u64 {
            window_start = offset - offset % LIST_WINDOW;
            let window_len = (size - window_start).min(LIST_WINDOW + MAX_CHUNK_SIZE as u64);
            window = mapper
                .map_range(&file, window_start, window_len as usize, false)
                .map_err(|e| ClientError::io("reading the file to upload", name, e))?;
            if end > window_start + window.len() as u64 {
                return Err(wrong("it is shorter than its chunk list".into()));
            }
        }
        let data = window.slice((offset - window_start) as usize..(end - window_start) as usize);
        planned.push(HashedChunk { hash, data }, &mut *query)?;
        offset = end;
        progress.update(offset);
    }
    let planned = planned.finish()?;
    let upload = FileUpload {
        name: name.to_string(),
        file_hash: list.file_hash,
        sha256: list.sha256,
        size,
        stats: planned.stats,
    };
    Ok((upload, planned))
}

/// The file to upload, opened, and its size.
pub(super) fn open_for_upload(path: &Path) -> Result<(std::fs::File, u64)> {
    let file = std::fs::File::open(path)
        .map_err(|e| ClientError::io("opening the file to upload", path, e))?;
    let size = file
        .metadata()
        .map_err(|e| ClientError::io("reading the file to upload", path, e))?
        .len();
    Ok((file, size))
}
