//! Parameters of the `XET-BLAKE3-GEARHASH-LZ4` suite (docs/formats.md, "The suite and its
//! constants").

/// Content-defined chunking: average, minimum and maximum chunk sizes.
pub const TARGET_CHUNK_SIZE: usize = 64 * 1024;
pub const MIN_CHUNK_SIZE: usize = TARGET_CHUNK_SIZE / 8;
pub const MAX_CHUNK_SIZE: usize = TARGET_CHUNK_SIZE * 2;
/// A boundary is a position where the top 16 bits of the rolling hash are zero.
pub const CHUNK_MASK: u64 = 0xFFFF_0000_0000_0000;

/// Xorb limits. The deployed reference client (xet-core's `MAX_XORB_BYTES` and
/// `MAX_XORB_CHUNKS`) cuts a xorb before its *uncompressed* chunk data would pass
/// [`MAX_XORB_DATA`] or its chunks [`MAX_XORB_CHUNKS`]: for data that does not compress, its
/// body is 64 MiB plus 8 header bytes per chunk. What this crate *produces* is stricter,
/// [`MAX_XORB_SIZE`], which every deployed server accepts; what the server *accepts* is
/// [`MAX_XORB_BODY`]. docs/protocol.md, "Limits", has the table.
pub const MAX_XORB_DATA: usize = 64 * 1024 * 1024;
pub const MAX_XORB_CHUNKS: usize = 8192;
/// What our client, `import-lfs` and basic uploads build: serialized size, footer and length
/// trailer included (the draft's reading).
pub const MAX_XORB_SIZE: usize = 64 * 1024 * 1024;
/// The largest xorb body the server accepts: the reference client's worst case (64 MiB of
/// incompressible chunk data in 8192 records, and a footer should a client send one) plus a
/// margin. Only a size cap: the body is still validated record by record.
pub const MAX_XORB_BODY: usize = 65 * 1024 * 1024;
const _: () = assert!(
    MAX_XORB_BODY
        >= MAX_XORB_DATA
            + MAX_XORB_CHUNKS * crate::xorb::CHUNK_HEADER_LEN
            + crate::xorb::XorbFooter::encoded_len(MAX_XORB_CHUNKS)
            + 4
);
/// The largest shard body the server accepts. The reference client cuts its shards at
/// xet-core's `MDB_SHARD_TARGET_SIZE` (64 MiB, header and footer counted) and uploads them
/// without the footer, so its shards stay below this.
pub const MAX_SHARD_BODY: usize = 64 * 1024 * 1024;

/// Aggregated Merkle tree fan-out.
pub const MEAN_BRANCHING_FACTOR: u64 = 4;
pub const MAX_CHILDREN: usize = 2 * MEAN_BRANCHING_FACTOR as usize + 1;

/// A chunk that is not the first of its file is eligible for global dedup queries
/// when the last 8 bytes of its hash, as a little-endian u64, are a multiple of this.
pub const GLOBAL_DEDUP_MODULUS: u64 = 1024;

/// BLAKE3 keys that separate the hash domains.
pub const DATA_KEY: [u8; 32] = [
    0x66, 0x97, 0xf5, 0x77, 0x5b, 0x95, 0x50, 0xde, 0x31, 0x35, 0xcb, 0xac, 0xa5, 0x97, 0x18, 0x1c,
    0x9d, 0xe4, 0x21, 0x10, 0x9b, 0xeb, 0x2b, 0x58, 0xb4, 0xd0, 0xb0, 0x4b, 0x93, 0xad, 0xf2, 0x29,
];
pub const INTERNAL_NODE_KEY: [u8; 32] = [
    0x01, 0x7e, 0xc5, 0xc7, 0xa5, 0x47, 0x29, 0x96, 0xfd, 0x94, 0x66, 0x66, 0xb4, 0x8a, 0x02, 0xe6,
    0x5d, 0xdd, 0x53, 0x6f, 0x37, 0xc7, 0x6d, 0xd2, 0xf8, 0x63, 0x52, 0xe6, 0x4a, 0x53, 0x71, 0x3f,
];
pub const ZERO_KEY: [u8; 32] = [0; 32];
pub const VERIFICATION_KEY: [u8; 32] = [
    0x7f, 0x18, 0x57, 0xd6, 0xce, 0x56, 0xed, 0x66, 0x12, 0x7f, 0xf9, 0x13, 0xe7, 0xa5, 0xc3, 0xf3,
    0xa4, 0xcd, 0x26, 0xd5, 0xb5, 0xdb, 0x49, 0xe6, 0x41, 0x24, 0x98, 0x7f, 0x28, 0xfb, 0x94, 0xc3,
];

/// git-lfs Batch API transfer names. Hugging Face's own agent registers itself as the custom
/// transfer `xet` (no direction) but refuses downloads, so a server must not name `xet` for
/// a download unless the client also lists [`XET_DOWNLOAD_TRANSFER`], which only clients
/// whose `xet` agent downloads send (our filter and batch client; `git xet install`
/// registers it for git-lfs). See docs/protocol.md, "Transfer negotiation".
pub const XET_TRANSFER: &str = "xet";
pub const XET_DOWNLOAD_TRANSFER: &str = "xet-download";
