//! Shards: file reconstructions and xorb descriptions (docs/formats.md, "Shard format").
//!
//! ```text
//! header (48) | file info section + bookend | CAS info section + bookend
//!             | [file lookup | CAS lookup | chunk lookup | footer (200)]   stored form only
//! ```
//! Every record in the two info sections is 48 bytes. Shards sent to the upload API omit the
//! lookup tables and footer; stored shards and global-dedup responses carry them.

mod parse;
mod reader;
mod types;
mod write;

pub use parse::{parse_shard, read_shard, ParsedShard, ShardLookups};
pub use reader::{ChunkLookupEntry, ShardFile};
pub use types::*;
pub use write::FooterOptions;
