//! Shared helpers: the reference files and deterministic test data.

use std::path::PathBuf;

use git_xet_core::xorb::{extract_chunks, XorbFooter};

pub const SAMPLE_XORB: &str = "417dce6249b8615d390c2334acce1b75f5e9f9e508426ce81de5fd8219148627";
pub const SAMPLE_FILE_HASH: &str =
    "9e1f0735c1b003d6ff10b2d1c02dd4f907481a4b566a352db0623af5ba1f03e4";
pub const SAMPLE_SHA256: &str = "5f1340076bc8805ab1ede29d084dee3bcb78052017e79a619835d8e7e8ad9b21";

pub fn vector_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vectors")
        .join(name)
}

pub fn read_vector(name: &str) -> Vec<u8> {
    std::fs::read(vector_path(name)).unwrap_or_else(|e| panic!("reading vector {name}: {e}"))
}

pub fn sample_xorb() -> Vec<u8> {
    read_vector(&format!("{SAMPLE_XORB}.xorb"))
}

/// sample.bin, recovered from the reference xorb (which holds all of its chunks in order).
pub fn sample_bin() -> Vec<u8> {
    let xorb = sample_xorb();
    let footer = XorbFooter::parse(&xorb).expect("reference xorb parses");
    extract_chunks(&xorb, &footer, 0, footer.num_chunks()).expect("reference xorb extracts")
}

/// (hash, length) lines of sample.chunks.
pub fn sample_chunks() -> Vec<(String, usize)> {
    String::from_utf8(read_vector("sample.chunks"))
        .unwrap()
        .lines()
        .map(|l| {
            let (h, n) = l.split_once(' ').unwrap();
            (h.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// SplitMix64 byte stream, the generator the deployed chunker's own tests use.
pub use crate::random::random_bytes as splitmix_bytes;

/// Cumulative chunk ends, the form the reference tables use.
pub fn boundaries(lengths: &[usize]) -> Vec<usize> {
    lengths
        .iter()
        .scan(0, |s, l| {
            *s += l;
            Some(*s)
        })
        .collect()
}
