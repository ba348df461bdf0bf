//! Xorbs: containers of compressed chunks (docs/formats.md, "Xorb format").
//!
//! ```text
//! [chunk header (8) | stored bytes] ... [CasObjectInfo footer] [footer length: u32 LE]
//! ```
//! The footer repeats every chunk hash and the end offset of each chunk both in the serialized
//! region and in the uncompressed stream, so any chunk range can be located and extracted
//! without decoding the chunks before it.

mod builder;
mod footer;
mod rebuild;
mod records;
mod stream;
mod validate;

pub use builder::{CompressedChunk, SerializedXorb, XorbBuilder};
pub use footer::XorbFooter;
pub use rebuild::{is_footerless, rebuild_footer};
pub use records::{decode_chunk, ChunkHeader, ChunkRecord, ChunkRecords, CHUNK_HEADER_LEN};
pub use stream::{CheckedXorb, XorbStreamCheck};
pub use validate::{extract_chunks, inspect_xorb, validate_xorb, ChunkReport, XorbReport};
