//! The in-memory form of a shard.

use crate::hash::MerkleHash;

/// Application id "HFRepoMetaData", a NUL, then the fixed 17-byte magic sequence.
pub const SHARD_HEADER_TAG: [u8; 32] = [
    b'H', b'F', b'R', b'e', b'p', b'o', b'M', b'e', b't', b'a', b'D', b'a', b't', b'a', 0, 0x55,
    0x69, 0x67, 0x45, 0x6a, 0x7b, 0x81, 0x57, 0x83, 0xa5, 0xbd, 0xd9, 0x5c, 0xcd, 0xd1, 0x4a, 0xa9,
];
pub const SHARD_HEADER_VERSION: u64 = 2;
pub const SHARD_FOOTER_VERSION: u64 = 1;
pub const SHARD_HEADER_LEN: usize = 48;
pub const SHARD_FOOTER_LEN: usize = 200;
/// Size of every record in the file info and CAS info sections.
pub const SHARD_RECORD_LEN: usize = 48;

pub const FILE_FLAG_WITH_VERIFICATION: u32 = 1 << 31;
pub const FILE_FLAG_WITH_METADATA_EXT: u32 = 1 << 30;
pub const CHUNK_FLAG_GLOBAL_DEDUP_ELIGIBLE: u32 = 1 << 31;

/// One term of a file reconstruction: chunks `chunk_start..chunk_end` of a xorb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FileTerm {
    pub xorb_hash: MerkleHash,
    pub cas_flags: u32,
    pub unpacked_bytes: u32,
    pub chunk_start: u32,
    pub chunk_end: u32,
}

/// A file: its hash, its terms, and optionally per-term verification hashes and its sha256.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileInfo {
    pub file_hash: MerkleHash,
    pub terms: Vec<FileTerm>,
    /// One verification hash per term, when present.
    pub verification: Option<Vec<MerkleHash>>,
    /// SHA-256 of the contents, in the stored byte order (see `hash::sha256_as_merkle`).
    pub sha256: Option<MerkleHash>,
}

impl FileInfo {
    pub fn size(&self) -> u64 {
        self.terms.iter().map(|t| u64::from(t.unpacked_bytes)).sum()
    }

    pub fn flags(&self) -> u32 {
        let mut flags = 0;
        if self.verification.is_some() {
            flags |= FILE_FLAG_WITH_VERIFICATION;
        }
        if self.sha256.is_some() {
            flags |= FILE_FLAG_WITH_METADATA_EXT;
        }
        flags
    }

    /// Number of 48-byte records this file occupies in the file info section.
    pub fn num_records(&self) -> usize {
        1 + self.terms.len() * (1 + usize::from(self.verification.is_some()))
            + usize::from(self.sha256.is_some())
    }
}

/// One chunk of a xorb as a shard describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct XorbChunk {
    pub chunk_hash: MerkleHash,
    /// Offset of the chunk in the xorb's uncompressed data.
    pub byte_range_start: u32,
    pub unpacked_bytes: u32,
    pub flags: u32,
}

/// A xorb as a shard describes it (a "CAS info block").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct XorbBlock {
    pub xorb_hash: MerkleHash,
    pub cas_flags: u32,
    /// Uncompressed bytes of all chunks.
    pub num_bytes_in_xorb: u32,
    /// Serialized xorb size; the deployed client writes 0 here.
    pub num_bytes_on_disk: u32,
    pub chunks: Vec<XorbChunk>,
}

impl XorbBlock {
    /// Describes a xorb from its chunks' hashes and uncompressed sizes.
    pub fn from_chunks(
        xorb_hash: MerkleHash,
        chunks: impl IntoIterator<Item = (MerkleHash, u32)>,
        num_bytes_on_disk: u32,
    ) -> Self {
        let mut offset = 0u32;
        let chunks: Vec<XorbChunk> = chunks
            .into_iter()
            .map(|(chunk_hash, size)| {
                let c = XorbChunk {
                    chunk_hash,
                    byte_range_start: offset,
                    unpacked_bytes: size,
                    flags: 0,
                };
                offset += size;
                c
            })
            .collect();
        XorbBlock {
            xorb_hash,
            cas_flags: 0,
            num_bytes_in_xorb: offset,
            num_bytes_on_disk,
            chunks,
        }
    }

    pub fn num_records(&self) -> usize {
        1 + self.chunks.len()
    }
}

/// The 200-byte footer of a stored shard.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ShardFooter {
    pub version: u64,
    pub file_info_offset: u64,
    pub cas_info_offset: u64,
    pub file_lookup_offset: u64,
    pub file_lookup_num_entries: u64,
    pub cas_lookup_offset: u64,
    pub cas_lookup_num_entries: u64,
    pub chunk_lookup_offset: u64,
    pub chunk_lookup_num_entries: u64,
    /// Non-zero in global-dedup responses: chunk hashes are then keyed with it.
    pub chunk_hash_key: MerkleHash,
    pub creation_timestamp: u64,
    pub key_expiry: u64,
    pub stored_bytes_on_disk: u64,
    pub materialized_bytes: u64,
    pub stored_bytes: u64,
    pub footer_offset: u64,
}

impl ShardFooter {
    /// Whether chunk hashes in this shard are keyed (a global-dedup response).
    pub fn chunk_hashes_keyed(&self) -> bool {
        self.chunk_hash_key != MerkleHash::ZERO
    }
}

/// A shard's contents: files and xorbs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Shard {
    pub files: Vec<FileInfo>,
    pub xorbs: Vec<XorbBlock>,
}

impl Shard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sum of file sizes.
    pub fn materialized_bytes(&self) -> u64 {
        self.files.iter().map(FileInfo::size).sum()
    }

    /// Sum of xorbs' uncompressed sizes.
    pub fn stored_bytes(&self) -> u64 {
        self.xorbs
            .iter()
            .map(|x| u64::from(x.num_bytes_in_xorb))
            .sum()
    }

    pub fn stored_bytes_on_disk(&self) -> u64 {
        self.xorbs
            .iter()
            .map(|x| u64::from(x.num_bytes_on_disk))
            .sum()
    }
}
