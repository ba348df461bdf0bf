//! The protocol core's errors: one type per operation, whose variants say what was malformed
//! and where, and [`CoreError`], the one type the core's functions return, which says which
//! operation failed. Callers decide by variant; the messages name the structure and position
//! so that a user (or a server's 400 response) can say exactly what is wrong.

use crate::constants::{MAX_CHUNK_SIZE, MAX_XORB_CHUNKS, MAX_XORB_SIZE};
use crate::hash::MerkleHash;

/// Everything the protocol core can reject, by operation. Boxed: callers carry it inside
/// their own errors on every `Result` path, so it stays two words.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    #[error("invalid hash string: {0}")]
    HashString(Box<HashParseError>),
    #[error("invalid xorb: {0}")]
    Xorb(Box<XorbError>),
    #[error("invalid shard: {0}")]
    Shard(Box<ShardError>),
    #[error("invalid compressed chunk: {0}")]
    Compression(Box<CompressionError>),
    #[error("xorb limit reached: {0}")]
    XorbFull(Box<XorbFull>),
}

macro_rules! from_operation_error {
    ($($variant:ident($error:ty)),*) => {$(
        impl From<$error> for CoreError {
            fn from(e: $error) -> Self {
                CoreError::$variant(Box::new(e))
            }
        }
    )*};
}
from_operation_error!(
    HashString(HashParseError),
    Xorb(XorbError),
    Shard(ShardError),
    Compression(CompressionError),
    XorbFull(XorbFull)
);

pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// A hash written as text (64 hex digits) that does not parse.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HashParseError {
    #[error("expected 64 hex digits, got {len} characters")]
    Length { len: usize },
    #[error("{found:?} is not a hex digit")]
    NotHex { found: char },
    /// A conventional sha256 digest (as in LFS pointers) that does not parse.
    #[error("invalid sha256 {input:?}: {cause}")]
    Sha256 {
        input: String,
        cause: Box<HashParseError>,
    },
}

/// A stored chunk that does not decompress to what its header declares.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CompressionError {
    #[error("uncompressed size {len} is outside 1..={MAX_CHUNK_SIZE}")]
    SizeOutOfRange { len: usize },
    #[error("uncompressed chunk stores {stored} bytes but declares {declared}")]
    RawLength { stored: usize, declared: usize },
    /// The LZ4 decoder's reason, as it gives it.
    #[error("LZ4 frame does not decode: {reason}")]
    Lz4Frame { reason: String },
    #[error("LZ4 frame decodes to {produced} bytes but the header declares {declared}")]
    Lz4Short { produced: usize, declared: usize },
    /// Decoding stops one byte past the declared length.
    #[error("LZ4 frame decodes to more than {declared} bytes but the header declares {declared}")]
    Lz4Long { declared: usize },
}

/// A xorb's chunk header that breaks a rule (see [`crate::xorb::ChunkHeader::parse`]).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ChunkHeaderError {
    #[error("unknown chunk header version {0}")]
    UnknownVersion(u8),
    #[error("unknown compression type {0}")]
    UnknownCompression(u8),
    #[error("uncompressed size {0} is outside 1..={MAX_CHUNK_SIZE}")]
    UncompressedSize(u32),
    #[error("compressed size {0} is outside 1..={MAX_CHUNK_SIZE}")]
    CompressedSize(u32),
    #[error("chunk declares {declared} stored bytes but only {remaining} remain")]
    PastEnd { declared: u32, remaining: usize },
}

/// A serialized xorb that breaks a rule of its format: its footer, its chunk records, or a
/// chunk against the footer.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum XorbError {
    // The footer.
    #[error("{total} bytes is too large for a xorb")]
    TooLarge { total: u64 },
    #[error("{tail} bytes of tail for a {total}-byte xorb")]
    TailLongerThanXorb { tail: usize, total: usize },
    #[error("{total} bytes is too short to hold a footer length")]
    TooShort { total: usize },
    #[error("footer length {footer_len} does not fit a {total}-byte xorb")]
    FooterLengthOutOfRange { footer_len: usize, total: usize },
    #[error("footer length {footer_len} is longer than the {read} bytes read")]
    FooterBeyondTail { footer_len: usize, read: usize },
    #[error("footer length {footer_len} does not match {chunks} chunks (expected {expected})")]
    FooterLength {
        footer_len: usize,
        chunks: usize,
        expected: usize,
    },
    #[error("{section} ident {got:?} should be {expected:?}")]
    Ident {
        section: &'static str,
        got: String,
        expected: String,
    },
    #[error("unknown {section} version {got} (expected {expected})")]
    Version {
        section: &'static str,
        got: u8,
        expected: u8,
    },
    #[error("xorb has no chunks")]
    NoChunks,
    /// `count` is how many chunks were seen (rebuilding stops at the first one too many).
    #[error("{count} chunks exceeds the limit of {MAX_XORB_CHUNKS}")]
    TooManyChunks { count: usize },
    #[error("{section} has {count} chunks, hash section {hashes}")]
    SectionCount {
        section: &'static str,
        count: usize,
        hashes: usize,
    },
    #[error("{section} offset {got} should be {expected}")]
    SectionOffset {
        section: &'static str,
        got: usize,
        expected: usize,
    },
    #[error("chunk {index} boundary {end} after {prev} is not a valid record size")]
    Boundary { index: usize, end: u32, prev: u32 },
    #[error("chunk boundaries end at {end} but the chunk region is {region} bytes")]
    BoundariesEnd { end: u32, region: usize },
    #[error("chunk {index} uncompressed end {end} after {prev} is not a valid chunk size")]
    UnpackedBoundary { index: usize, end: u32, prev: u32 },
    #[error("footer names xorb hash {footer} but its chunks hash to {computed}")]
    Hash {
        footer: MerkleHash,
        computed: MerkleHash,
    },
    // The chunk records.
    #[error("a {len}-byte chunk region does not fit a xorb's 32-bit offsets")]
    RegionTooLarge { len: usize },
    #[error("truncated chunk header at offset {offset} ({left} bytes left)")]
    TruncatedChunkHeader { offset: usize, left: usize },
    #[error("chunk at offset {offset}: {kind}")]
    ChunkHeader {
        offset: usize,
        kind: ChunkHeaderError,
    },
    // A chunk against the footer.
    /// Chunk `index` as a record (`CoreError::Xorb`) or as data (`CoreError::Compression`).
    #[error("chunk {index}: {}", .cause.detail())]
    Chunk { index: usize, cause: Box<CoreError> },
    #[error("chunk {index} is missing")]
    ChunkMissing { index: usize },
    #[error("chunk {index} ends at {end} but the footer says {footer}")]
    ChunkEnd { index: usize, end: u32, footer: u32 },
    #[error("chunk {index} header says {header} uncompressed bytes, the footer {footer}")]
    ChunkSize {
        index: usize,
        header: u32,
        footer: u32,
    },
    #[error("chunk {index} hashes to {actual} but the footer says {footer}")]
    ChunkHash {
        index: usize,
        actual: MerkleHash,
        footer: MerkleHash,
    },
    #[error("chunk range {start}..{end} is not within 0..{chunks}")]
    ChunkRange {
        start: usize,
        end: usize,
        chunks: usize,
    },
}

impl XorbError {
    /// Chunk `index` failed with `cause` (its record, or decompressing its data).
    pub fn chunk(index: usize, cause: impl Into<CoreError>) -> Self {
        XorbError::Chunk {
            index,
            cause: Box::new(cause.into()),
        }
    }
}

impl CoreError {
    /// The operation's own error, without the "invalid ...:" prefix (for nesting).
    pub fn detail(&self) -> &dyn std::fmt::Display {
        match self {
            CoreError::HashString(e) => e,
            CoreError::Xorb(e) => e,
            CoreError::Shard(e) => e,
            CoreError::Compression(e) => e,
            CoreError::XorbFull(e) => e,
        }
    }
}

/// A xorb builder that cannot take one more chunk: the caller starts a new xorb.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error(
    "{chunks} chunks, {bytes} bytes: one more chunk of {record_len} bytes would exceed \
     {MAX_XORB_CHUNKS} chunks or {MAX_XORB_SIZE} bytes"
)]
pub struct XorbFull {
    pub chunks: usize,
    pub bytes: usize,
    pub record_len: usize,
}

/// A shard that breaks a rule of its format, or that cannot be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ShardError {
    #[error("truncated: {what} at offset {offset} is incomplete")]
    Truncated { what: &'static str, offset: u64 },
    /// The reader failed (not at the end of the data): what was read, and its reason.
    #[error("{during}: {reason}")]
    Read { during: String, reason: String },
    #[error("{len} bytes is too short for a stored shard")]
    TooShort { len: u64 },
    #[error("not a shard: the magic tag does not match")]
    NotAShard,
    #[error("unsupported shard {part} version {got} (expected {expected})")]
    Version {
        part: &'static str,
        got: u64,
        expected: u64,
    },
    #[error("footer size {size} must be 0 or {expected}")]
    FooterSize { size: u64, expected: u64 },
    #[error("shard has no footer; only stored shards support lookups")]
    NoFooter,
    #[error("shard footer offsets are inconsistent with the file")]
    FooterOffsets,
    #[error("footer {field} is {got}, the shard's layout says {want}")]
    FooterField {
        field: &'static str,
        got: u64,
        want: u64,
    },
    #[error("chunk lookup table too large")]
    LookupTableTooLarge,
    #[error("{section} bookend at offset {offset} has non-zero trailing bytes")]
    Bookend { section: &'static str, offset: u64 },
    #[error("file {file} at offset {offset} has unknown flags {flags:#010x}")]
    FileFlags {
        file: MerkleHash,
        offset: u64,
        flags: u32,
    },
    #[error("file {file} term {term}: empty or reversed chunk range {start}..{end}")]
    TermRange {
        file: MerkleHash,
        term: u32,
        start: u32,
        end: u32,
    },
    #[error("file {file} declares {declared} terms but the section ends after {found}")]
    MissingTerms {
        file: MerkleHash,
        declared: u32,
        found: u32,
    },
    #[error(
        "xorb {xorb} at offset {offset} declares {declared} chunks but the section ends \
         after {found}"
    )]
    MissingChunks {
        xorb: MerkleHash,
        offset: u64,
        declared: u32,
        found: u32,
    },
    #[error(
        "xorb {xorb} chunk {index}: starts at {start} with {bytes} bytes, expected to start \
         at {expected}"
    )]
    ChunkStart {
        xorb: MerkleHash,
        index: u32,
        start: u32,
        bytes: u32,
        expected: u64,
    },
    #[error("xorb {xorb}: chunks total {total} bytes but the header says {declared}")]
    XorbBytes {
        xorb: MerkleHash,
        total: u64,
        declared: u32,
    },
    #[error("unexpected bytes after the shard's end at offset {offset}")]
    TrailingBytes { offset: u64 },
}

impl ShardError {
    /// A read or seek that failed during `during` (not at the end of the data).
    pub(crate) fn read(during: impl Into<String>, e: &std::io::Error) -> Self {
        ShardError::Read {
            during: during.into(),
            reason: e.to_string(),
        }
    }
}
