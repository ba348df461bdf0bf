//! Checking a xorb while its bytes arrive, in pieces of any size: the same verdict as
//! [`validate_xorb`](crate::xorb::validate_xorb) for a complete xorb and as
//! [`rebuild_footer`](crate::xorb::rebuild_footer) for the chunk records alone, without
//! holding the xorb. Each chunk is decoded and hashed as soon as its record is complete,
//! while its bytes are still in the CPU's cache; at most one record and the footer are held.
//!
//! Records are read until a header does not parse. In a valid xorb that is the footer (its
//! ident `XETBLOB` is never a valid chunk header); whatever follows is kept as the tail and
//! must be exactly the footer of the records seen.

use crate::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS};
use crate::error::{ChunkHeaderError, Result, XorbError};
use crate::hash::chunk_hash;
use crate::xorb::validate::{check_hash, check_place};
use crate::xorb::{ChunkHeader, ChunkRecord, XorbFooter, CHUNK_HEADER_LEN};

/// A xorb body checked by [`XorbStreamCheck`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedXorb {
    pub footer: XorbFooter,
    /// Whether the body carried its footer; if not, the caller appends
    /// [`XorbFooter::write_to`]'s bytes to store the complete form.
    pub had_footer: bool,
}

/// Incremental xorb check: [`push`](Self::push) the body's bytes in order, then
/// [`finish`](Self::finish).
#[derive(Debug)]
pub struct XorbStreamCheck {
    /// Rebuilt from the records so far (its `hash` is set by `finish`).
    rebuilt: XorbFooter,
    /// Bytes of the chunk region checked so far.
    region_len: usize,
    unpacked: u32,
    /// An incomplete record, or once records have ended, the tail.
    pending: Vec<u8>,
    /// Why the record at `region_len` did not parse, once records have ended.
    ended_by: Option<ChunkHeaderError>,
    total: u64,
    scratch: Vec<u8>,
}

impl Default for XorbStreamCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl XorbStreamCheck {
    pub fn new() -> Self {
        XorbStreamCheck {
            rebuilt: XorbFooter::default(),
            region_len: 0,
            unpacked: 0,
            pending: Vec::new(),
            ended_by: None,
            total: 0,
            scratch: Vec::new(),
        }
    }

    /// Bytes pushed so far.
    pub fn received(&self) -> u64 {
        self.total
    }

    /// Checks the next bytes of the body. An error is final: the body is not a valid xorb.
    pub fn push(&mut self, mut data: &[u8]) -> Result<()> {
        self.total += data.len() as u64;
        if self.ended_by.is_some() {
            return self.keep_tail(data);
        }
        if !self.pending.is_empty() {
            let taken = self.top_up(data);
            data = &data[taken..];
            match record_len(&self.pending) {
                Head::Record(len) if self.pending.len() == len => {
                    let record = std::mem::take(&mut self.pending);
                    self.check_record(&record)?;
                    self.pending = record;
                    self.pending.clear();
                }
                // Everything was taken and the header or the record is still incomplete.
                Head::Record(_) | Head::Short => return Ok(()),
                Head::NotARecord(kind) => {
                    self.ended_by = Some(kind);
                    let tail = std::mem::take(&mut self.pending);
                    self.keep_tail(&tail)?;
                    return self.keep_tail(data);
                }
            }
        }
        while !data.is_empty() {
            match record_len(data) {
                Head::Record(len) if data.len() >= len => {
                    self.check_record(&data[..len])?;
                    data = &data[len..];
                }
                Head::Record(_) | Head::Short => {
                    self.pending.extend_from_slice(data);
                    return Ok(());
                }
                Head::NotARecord(kind) => {
                    self.ended_by = Some(kind);
                    return self.keep_tail(data);
                }
            }
        }
        Ok(())
    }

    /// The verdict on the whole body.
    pub fn finish(mut self) -> Result<CheckedXorb> {
        if let Some(kind) = self.ended_by.take() {
            let footer = self.footer_of_tail(kind)?;
            return Ok(CheckedXorb {
                footer,
                had_footer: true,
            });
        }
        if !self.pending.is_empty() {
            return Err(self.truncated().into());
        }
        if self.rebuilt.num_chunks() == 0 {
            return Err(XorbError::NoChunks.into());
        }
        self.rebuilt.hash = self.rebuilt.computed_hash();
        Ok(CheckedXorb {
            footer: self.rebuilt,
            had_footer: false,
        })
    }

    /// Moves bytes of `data` into `pending` until it holds a header, then its whole record;
    /// returns how many were taken.
    fn top_up(&mut self, data: &[u8]) -> usize {
        let mut taken = 0;
        if self.pending.len() < CHUNK_HEADER_LEN {
            taken = (CHUNK_HEADER_LEN - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..taken]);
        }
        if let Some(header) = self.pending.first_chunk::<CHUNK_HEADER_LEN>() {
            if let Ok(h) = ChunkHeader::parse(header, usize::MAX) {
                let want = CHUNK_HEADER_LEN + h.compressed_len as usize - self.pending.len();
                let more = want.min(data.len() - taken);
                self.pending.extend_from_slice(&data[taken..taken + more]);
                taken += more;
            }
        }
        taken
    }

    /// Decodes and hashes one complete record.
    fn check_record(&mut self, record: &[u8]) -> Result<()> {
        let i = self.rebuilt.num_chunks();
        if i == MAX_XORB_CHUNKS {
            return Err(XorbError::TooManyChunks { count: i + 1 }.into());
        }
        let end = self.region_len + record.len();
        let Ok(end32) = u32::try_from(end) else {
            return Err(XorbError::RegionTooLarge { len: end }.into());
        };
        let (header_bytes, stored) = record.split_at(CHUNK_HEADER_LEN);
        let header_bytes = header_bytes
            .try_into()
            .expect("split at the header's length");
        let header = ChunkHeader::parse(header_bytes, stored.len()).map_err(|kind| {
            XorbError::ChunkHeader {
                offset: self.region_len,
                kind,
            }
        })?;
        let record = ChunkRecord { header, stored };
        let hash = match header.scheme {
            // Stored as is: hashed where it lies, not copied first.
            crate::compression::CompressionScheme::None
                if stored.len() == header.uncompressed_len as usize =>
            {
                chunk_hash(stored)
            }
            _ => {
                self.scratch.clear();
                self.scratch.reserve(MAX_CHUNK_SIZE);
                record
                    .decode_into(&mut self.scratch)
                    .map_err(|e| XorbError::chunk(i, e))?;
                chunk_hash(&self.scratch)
            }
        };
        // At most 8192 chunks of at most 128 KiB: the sum stays far below u32::MAX.
        self.unpacked += header.uncompressed_len;
        self.rebuilt.chunk_hashes.push(hash);
        self.rebuilt.chunk_ends.push(end32);
        self.rebuilt.unpacked_ends.push(self.unpacked);
        self.region_len = end;
        Ok(())
    }

    /// Keeps bytes after the records: a footer is never longer than `MAX_TAIL`.
    fn keep_tail(&mut self, data: &[u8]) -> Result<()> {
        if self.pending.len() + data.len() > XorbFooter::MAX_TAIL {
            return Err(self.bad_header().into());
        }
        self.pending.extend_from_slice(data);
        Ok(())
    }

    /// The error for the record where the records ended, when what follows is no footer.
    fn bad_header(&self) -> XorbError {
        match &self.ended_by {
            Some(kind) => XorbError::ChunkHeader {
                offset: self.region_len,
                kind: kind.clone(),
            },
            None => self.truncated(),
        }
    }

    fn truncated(&self) -> XorbError {
        match self.pending.first_chunk::<CHUNK_HEADER_LEN>() {
            None => XorbError::TruncatedChunkHeader {
                offset: self.region_len,
                left: self.pending.len(),
            },
            Some(header) => {
                let declared =
                    ChunkHeader::parse(header, usize::MAX).map_or(0, |h| h.compressed_len);
                XorbError::ChunkHeader {
                    offset: self.region_len,
                    kind: ChunkHeaderError::PastEnd {
                        declared,
                        remaining: self.pending.len() - CHUNK_HEADER_LEN,
                    },
                }
            }
        }
    }

    /// The tail's footer, checked against the records: the same checks, in the same order,
    /// as `validate_xorb`.
    fn footer_of_tail(&self, ended_by: ChunkHeaderError) -> Result<XorbFooter> {
        let ended = XorbError::ChunkHeader {
            offset: self.region_len,
            kind: ended_by,
        };
        let footer = match XorbFooter::parse_tail(&self.pending, self.total) {
            Ok(f) if f.data_len() == self.region_len => f,
            // Not a body of records: what is wrong is its footer, as `validate_xorb` says.
            Err(e) if self.rebuilt.num_chunks() == 0 => return Err(e),
            // Records, then no footer of them: the header where they stop is what is wrong.
            _ => return Err(ended.into()),
        };
        for i in 0..footer.num_chunks() {
            let Some(&end) = self.rebuilt.chunk_ends.get(i) else {
                return Err(XorbError::ChunkMissing { index: i }.into());
            };
            check_place(&footer, i, end, self.rebuilt.unpacked_chunk_len(i))?;
            check_hash(&footer, i, self.rebuilt.chunk_hashes[i])?;
        }
        Ok(footer)
    }
}

/// What the bytes at a record's start are.
enum Head {
    /// A valid header: the record's whole length.
    Record(usize),
    /// Fewer bytes than a header.
    Short,
    NotARecord(ChunkHeaderError),
}

fn record_len(bytes: &[u8]) -> Head {
    let Some(header) = bytes.first_chunk::<CHUNK_HEADER_LEN>() else {
        return Head::Short;
    };
    match ChunkHeader::parse(header, usize::MAX) {
        Ok(h) => Head::Record(CHUNK_HEADER_LEN + h.compressed_len as usize),
        Err(kind) => Head::NotARecord(kind),
    }
}
