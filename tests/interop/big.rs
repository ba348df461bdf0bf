//! Large files from hf-xet. The reference client cuts a xorb when its uncompressed data
//! would pass 64 MiB, so data that does not compress arrives in bodies of 64 MiB plus 8
//! bytes per chunk, above the draft's 64 MiB: the server must take them (it answered 413
//! before). Several full xorbs of random data, a file of exactly 64 MiB and a file of many
//! chunks that compress go up in one session and come back bit-exact through both clients.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use git_xet_core::constants::MAX_XORB_SIZE;
use git_xet_core::xorb::XorbFooter;
use git_xet_core::MerkleHash;

use crate::common::*;

const MIB: usize = 1024 * 1024;

/// Writes `len` bytes of SplitMix64 output (seeded) to `path`, a block at a time.
fn random_file(path: &Path, len: usize, seed: u64) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut left = len;
    let mut block_seed = seed;
    while left > 0 {
        let n = left.min(8 * MIB);
        out.write_all(&random_bytes(n, block_seed)).unwrap();
        block_seed = block_seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        left -= n;
    }
    out.flush().unwrap();
}

/// Writes `len` bytes of text that compresses and never repeats (rows of counters), so
/// that every chunk is new data, not a dedup hit.
fn text_file(path: &Path, len: usize) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0;
    let mut i = 0u64;
    while written < len {
        let row = format!("row {i}: value {} of {}\n", i * 7919 % 10007, i / 3);
        let n = row.len().min(len - written);
        out.write_all(&row.as_bytes()[..n]).unwrap();
        written += n;
        i += 1;
    }
    out.flush().unwrap();
}

/// Whether two files hold the same bytes, read a block at a time.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (mut fa, mut fb) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    if fa.metadata().unwrap().len() != fb.metadata().unwrap().len() {
        return false;
    }
    let (mut ba, mut bb) = (vec![0u8; MIB], vec![0u8; MIB]);
    loop {
        let n = fa.read(&mut ba).unwrap();
        if n == 0 {
            return true;
        }
        fb.read_exact(&mut bb[..n]).unwrap();
        if ba[..n] != bb[..n] {
            return false;
        }
    }
}

/// Sizes of the stored xorbs' chunk regions (the bodies as footer-less clients sent them),
/// read one file at a time from the server's directory store.
fn xorb_bodies(dir: &Path) -> Vec<usize> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(xorb_bodies(&p));
        } else if p.extension().is_some_and(|e| e == "xorb") {
            let bytes = std::fs::read(&p).unwrap();
            out.push(XorbFooter::parse(&bytes).unwrap().data_len());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hf_xet_uploads_full_xorbs_of_incompressible_data() {
    let Some(env) = Env::new() else {
        return;
    };
    let files: Vec<(&str, PathBuf)> = vec![
        ("random-257MiB", env.path("random-257MiB")),
        ("random-64MiB", env.path("random-64MiB")),
        ("text-80MiB", env.path("text-80MiB")),
    ];
    random_file(&files[0].1, 257 * MIB, 41);
    random_file(&files[1].1, 64 * MIB, 42);
    text_file(&files[2].1, 80 * MIB);
    let refs: Vec<&Path> = files.iter().map(|(_, p)| p.as_path()).collect();
    let started = std::time::Instant::now();
    let uploaded = env.hf_upload(&refs);
    eprintln!("hf-xet uploaded 401 MiB in {:?}", started.elapsed());

    // Bodies above the draft's 64 MiB came in and were stored.
    let bodies = xorb_bodies(&env.server.data.join("xorbs"));
    let largest = bodies.iter().copied().max().unwrap_or(0);
    eprintln!("xorb bodies: {bodies:?}");
    assert!(largest > MAX_XORB_SIZE, "{largest}");

    let ours = env.ours("meta", "read");
    for ((name, path), hf) in files.iter().zip(&uploaded) {
        assert_eq!(hf.size, std::fs::metadata(path).unwrap().len(), "{name}");
        let theirs = env.hf_download_file(&hf.hash, hf.size, &format!("{name}.hf"));
        assert!(
            same_bytes(path, &theirs),
            "{name}: hf-xet read different bytes"
        );
        std::fs::remove_file(&theirs).unwrap();
        let mine = env.path(&format!("{name}.ours"));
        let hash = MerkleHash::from_hex(&hf.hash).unwrap();
        let outcome = ours
            .download(&hash, &mine, Default::default())
            .await
            .unwrap();
        assert!(outcome.file_hash_verified, "{name}");
        assert!(
            same_bytes(path, &mine),
            "{name}: our client read different bytes"
        );
        std::fs::remove_file(&mine).unwrap();
    }
    // The compressible file's chunks were stored compressed: fewer bytes than it holds.
    let stored: usize = bodies.iter().sum();
    eprintln!("xorb bytes stored: {stored} for 401 MiB");
    assert!(stored < 401 * MIB, "{stored}");
}
