//! The bytes of a packed xorb, held without a second copy of the data: chunk headers and the
//! footer in memory, chunks stored raw as ranges of the file being uploaded (read again when
//! sent), compressed chunks in a staging file. Writing every xorb to a staging file costs
//! more CPU than anything but hashing on a small machine; reading the source file back from
//! the page cache costs a fraction of that, and memory stays small whatever the xorb size.
//!
//! If the source file changes between chunking and sending, the server recomputes a
//! different xorb hash and refuses the xorb: the upload fails, nothing wrong is stored.

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use tempfile::TempPath;

use git_xet_core::MerkleHash;
use git_xet_io::platform;

/// A finished xorb, ready to upload (the packer makes it, the uploader sends it).
#[derive(Debug)]
pub struct StagedXorb {
    pub hash: MerkleHash,
    pub body: Arc<XorbBody>,
    pub num_chunks: usize,
    /// The chunk records' bytes (the body without its footer).
    pub data_len: u64,
}

/// Bytes read per block when sending.
const BLOCK: usize = 1 << 20;

/// A run of bytes of the xorb.
#[derive(Debug)]
pub enum Piece {
    Mem(Bytes),
    File {
        file: Arc<File>,
        offset: u64,
        len: u32,
    },
}

/// A complete xorb ready to send (any number of times).
#[derive(Debug)]
pub struct XorbBody {
    pieces: Vec<Piece>,
    len: u64,
    /// The staging file, deleted when the body is dropped.
    _staging: Option<TempPath>,
}

/// Accumulates pieces, merging consecutive in-memory bytes.
#[derive(Debug, Default)]
pub struct BodyBuilder {
    pieces: Vec<Piece>,
    pending: Vec<u8>,
    len: u64,
}

impl BodyBuilder {
    pub fn push_mem(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
    }

    pub fn push_file(&mut self, file: &Arc<File>, offset: u64, len: u32) {
        self.flush_pending();
        self.pieces.push(Piece::File {
            file: file.clone(),
            offset,
            len,
        });
        self.len += u64::from(len);
    }

    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            self.pieces
                .push(Piece::Mem(Bytes::from(std::mem::take(&mut self.pending))));
        }
    }

    pub fn finish(mut self, staging: Option<TempPath>) -> XorbBody {
        self.flush_pending();
        XorbBody {
            pieces: self.pieces,
            len: self.len,
            _staging: staging,
        }
    }
}

impl XorbBody {
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether some bytes come from the source files (rather than memory or staging).
    pub fn reads_files(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::File { .. }))
    }

    /// Reads pieces from `first` until about one block is gathered; returns the bytes and
    /// the next piece.
    fn read_block(&self, first: usize) -> io::Result<(Bytes, usize)> {
        let mut buf = Vec::with_capacity(BLOCK + 128 * 1024);
        let mut i = first;
        while i < self.pieces.len() && buf.len() < BLOCK {
            match &self.pieces[i] {
                Piece::Mem(b) => buf.extend_from_slice(b),
                Piece::File { file, offset, len } => {
                    platform::file::append_at(&mut buf, file, *offset, *len as usize)?;
                }
            }
            i += 1;
        }
        Ok((Bytes::from(buf), i))
    }

    /// Hands the first `len` bytes to `out` block by block (the chunk records, for the chunk
    /// store once the xorb is uploaded).
    pub fn write_prefix(
        &self,
        len: u64,
        mut out: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut left = len;
        let mut next = 0;
        while left > 0 && next < self.pieces.len() {
            let (bytes, after) = self.read_block(next)?;
            let take = (bytes.len() as u64).min(left) as usize;
            out(&bytes[..take])?;
            left -= take as u64;
            next = after;
        }
        match left {
            0 => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the xorb body is shorter than its records",
            )),
        }
    }

    /// The bytes as a stream, read off the async runtime's threads. Each call starts over
    /// (one per upload attempt).
    pub fn stream(self: &Arc<Self>) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
        futures::stream::unfold((self.clone(), 0usize), |(body, next)| async move {
            if next >= body.pieces.len() {
                return None;
            }
            let reader = body.clone();
            let read = tokio::task::spawn_blocking(move || reader.read_block(next)).await;
            match read {
                Ok(Ok((bytes, after))) => Some((Ok(bytes), (body, after))),
                Ok(Err(e)) => Some((Err(e), (body, usize::MAX))),
                Err(e) => Some((Err(io::Error::other(e)), (body, usize::MAX))),
            }
        })
    }

    /// The whole body in memory (tests).
    #[cfg(test)]
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len as usize);
        let mut next = 0;
        while next < self.pieces.len() {
            let (bytes, after) = self.read_block(next)?;
            out.extend_from_slice(&bytes);
            next = after;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use std::io::Write;

    #[tokio::test]
    async fn streams_memory_and_file_pieces_in_order() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        tmp.write_all(&data).unwrap();
        let file = Arc::new(tmp.reopen().unwrap());
        let mut b = BodyBuilder::default();
        let mut expected = Vec::new();
        for k in 0..20u64 {
            b.push_mem(&[k as u8; 8]);
            expected.extend_from_slice(&[k as u8; 8]);
            let (offset, len) = (k * 140_000, 100_000u32);
            b.push_file(&file, offset, len);
            expected.extend_from_slice(&data[offset as usize..offset as usize + len as usize]);
        }
        b.push_mem(b"footer");
        expected.extend_from_slice(b"footer");
        let body = Arc::new(b.finish(None));
        assert_eq!(body.len(), expected.len() as u64);
        for _ in 0..2 {
            let parts: Vec<Bytes> = body.stream().try_collect().await.unwrap();
            assert!(parts.len() > 1);
            assert_eq!(parts.concat(), expected);
        }
        assert_eq!(body.to_vec().unwrap(), expected);
        let mut prefix = Vec::new();
        body.write_prefix(1_500_123, |b| {
            prefix.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(prefix, expected[..1_500_123]);
    }

    #[tokio::test]
    async fn a_shrunken_source_file_is_an_error() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(&[1u8; 1000]).unwrap();
        let file = Arc::new(tmp.reopen().unwrap());
        let mut b = BodyBuilder::default();
        b.push_file(&file, 500, 1000);
        let body = Arc::new(b.finish(None));
        let result: io::Result<Vec<Bytes>> = body.stream().try_collect().await;
        assert!(result.is_err());
    }
}
