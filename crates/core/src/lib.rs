//! The XET protocol core: chunking, hashing, xorbs, shards and reconstruction types.
//!
//! Pure and deterministic: no files, threads, libc, network, git or async code (reading files
//! to chunk them is `git_xet_io::pipeline`'s job). Everything here must agree byte
//! for byte with the public draft specification and the deployed implementation, as
//! docs/formats.md describes them; where the two differ, the deployed behaviour wins, the code
//! says so (see `hash::file_hash`) and docs/protocol.md lists it.
//!
//! # Example
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod api;
pub mod chunker;
pub mod compression;
pub mod constants;
pub mod error;
mod gear_table;
pub mod hash;
pub mod hex;
pub mod human;
pub mod lfs;
pub mod merkle;
pub mod reconstruction;
pub mod shard;
pub mod xorb;

pub use error::CoreError;
pub use hash::MerkleHash;
