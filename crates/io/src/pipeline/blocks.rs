//! Where the pipeline's input comes from, one block at a time: pooled `read()` buffers,
//! positioned reads of a regular file, mapped windows of a file git-xet owns, blocks handed
//! over by a [`super::ChunkFeed`], and a thread that reads any of them ahead of the chunker.

use std::io::Read;
use std::sync::mpsc;
use std::thread;

use bytes::Bytes;

use super::{MAP_WINDOW_SIZE, READ_AHEAD_BLOCKS, READ_BUFFER_SIZE};
use crate::platform::mmap::Mapper;

/// A buffer lent out by the pool; goes back when dropped.
pub(super) struct PooledBuffer {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
    pub(super) home: mpsc::Sender<Vec<u8>>,
}

impl AsRef<[u8]> for PooledBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        let _ = self.home.send(std::mem::take(&mut self.buf));
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(super) fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Consecutive blocks of the input.
pub(super) trait BlockSource {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>>;
}

/// Blocks read into pooled buffers.
pub(super) struct ReadBlocks<R> {
    reader: R,
    pool: mpsc::Receiver<Vec<u8>>,
    home: mpsc::Sender<Vec<u8>>,
    done: bool,
}

impl<R: Read> ReadBlocks<R> {
    pub(super) fn new(reader: R) -> Self {
        let (home, pool) = mpsc::channel();
        ReadBlocks {
            reader,
            pool,
            home,
            done: false,
        }
    }
}

impl<R: Read> BlockSource for ReadBlocks<R> {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
        if self.done {
            return Ok(None);
        }
        let mut buf = self
            .pool
            .try_recv()
            .unwrap_or_else(|_| vec![0u8; READ_BUFFER_SIZE]);
        let n = fill(&mut self.reader, &mut buf)?;
        self.done = n < READ_BUFFER_SIZE;
        Ok((n > 0).then(|| {
            Bytes::from_owner(PooledBuffer {
                buf,
                len: n,
                home: self.home.clone(),
            })
        }))
    }
}

/// Blocks of a regular file of known size read with positioned reads into pooled buffers. A
/// file that ends early (another process truncated it) is an error, not a shorter input.
pub(super) struct FileBlocks<'a> {
    file: &'a std::fs::File,
    len: u64,
    offset: u64,
    pool: mpsc::Receiver<Vec<u8>>,
    home: mpsc::Sender<Vec<u8>>,
}

impl<'a> FileBlocks<'a> {
    pub(super) fn new(file: &'a std::fs::File, len: u64) -> Self {
        let (home, pool) = mpsc::channel();
        FileBlocks {
            file,
            len,
            offset: 0,
            pool,
            home,
        }
    }
}

impl BlockSource for FileBlocks<'_> {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
        use std::os::unix::fs::FileExt;
        if self.offset >= self.len {
            return Ok(None);
        }
        let len = (self.len - self.offset).min(READ_BUFFER_SIZE as u64) as usize;
        // Every block but the last is full, and a short file has one: no buffer is larger.
        let size = self.len.min(READ_BUFFER_SIZE as u64) as usize;
        let mut buf = self.pool.try_recv().unwrap_or_else(|_| vec![0u8; size]);
        let mut done = 0;
        while done < len {
            match self
                .file
                .read_at(&mut buf[done..len], self.offset + done as u64)
            {
                Ok(0) => return Err(shrank(self.len)),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.offset += len as u64;
        Ok(Some(Bytes::from_owner(PooledBuffer {
            buf,
            len,
            home: self.home.clone(),
        })))
    }
}

pub(super) fn shrank(len: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!(
            "the file shrank while it was read (it had {len} bytes): another program changed it"
        ),
    )
}

/// Windows of a regular file, mapped one after another; only for files the [`Mapper`]'s
/// maker vouched for (they never shrink while mapped).
pub(super) struct MappedBlocks<'a> {
    mapper: Mapper,
    file: &'a std::fs::File,
    len: u64,
    offset: u64,
}

impl<'a> MappedBlocks<'a> {
    pub(super) fn new(mapper: Mapper, file: &'a std::fs::File, len: u64) -> Self {
        MappedBlocks {
            mapper,
            file,
            len,
            offset: 0,
        }
    }
}

impl BlockSource for MappedBlocks<'_> {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
        if self.offset >= self.len {
            return Ok(None);
        }
        let len = (self.len - self.offset).min(MAP_WINDOW_SIZE as u64) as usize;
        // The window is read whole right away: populate it in one go.
        let block = self.mapper.map_range(self.file, self.offset, len, true)?;
        self.offset += len as u64;
        Ok(Some(block))
    }
}

/// Blocks handed over by a [`ChunkFeed`].
pub(super) struct ChannelBlocks(pub(super) mpsc::Receiver<Bytes>);

impl BlockSource for ChannelBlocks {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
        Ok(self.0.recv().ok())
    }
}

/// Blocks a thread of their own reads ahead: the copy out of the page cache (or the pipe)
/// runs beside the chunker instead of before it. Its end (or error) is the last item.
pub(super) struct ReadAhead(mpsc::Receiver<std::io::Result<Option<Bytes>>>);

impl ReadAhead {
    pub(super) fn start<'scope>(
        scope: &'scope thread::Scope<'scope, '_>,
        mut source: impl BlockSource + Send + 'scope,
    ) -> ReadAhead {
        let (tx, rx) = mpsc::sync_channel(READ_AHEAD_BLOCKS);
        scope.spawn(move || loop {
            let block = source.next_block();
            let last = !matches!(block, Ok(Some(_)));
            // A closed channel means the chunker stopped: nothing more to read.
            if tx.send(block).is_err() || last {
                break;
            }
        });
        ReadAhead(rx)
    }
}

impl BlockSource for ReadAhead {
    fn next_block(&mut self) -> std::io::Result<Option<Bytes>> {
        // The reading thread always sends its end or error last: gone without it, it died,
        // and what was read is not the whole input.
        self.0.recv().unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the reading thread stopped before the end of the input",
            ))
        })
    }
}
