//! The batch reconstruction query (`GET /v1/reconstructions?file_id=..`) costs at most what
//! the largest single file does: two files of 40,000 terms each are over its 65,536 terms
//! in all, so the answer lists the first and leaves the second out (as a file the
//! repository does not hold), which its own query then answers. A batch within the bounds
//! lists every file, each rebuilding bit for bit.

use std::collections::HashMap;

use git_xet_core::hash::{file_hash, sha256_as_merkle, verification_hash};
use git_xet_core::reconstruction::{BatchReconstruction, Reconstruction};
use git_xet_core::shard::{FileInfo, FileTerm, Shard};
use git_xet_core::xorb::{ChunkRecords, SerializedXorb, XorbBuilder};
use git_xet_core::MerkleHash;

use crate::common::*;
use crate::support::{random_bytes, TestServer};

/// A file of `repeats` terms, each the one chunk of `xorb`, and its content.
fn repeated(xorb: &SerializedXorb, repeats: usize) -> (FileInfo, Vec<u8>) {
    let chunk = xorb.footer.chunk_hashes[0];
    let len = xorb.footer.unpacked_chunk_len(0);
    let term = FileTerm {
        xorb_hash: xorb.hash,
        cas_flags: 0,
        unpacked_bytes: len,
        chunk_start: 0,
        chunk_end: 1,
    };
    let one = rebuild_one(xorb);
    let data = one.repeat(repeats);
    let info = FileInfo {
        file_hash: file_hash(std::iter::repeat_n((chunk, u64::from(len)), repeats)),
        terms: vec![term; repeats],
        verification: Some(vec![verification_hash([chunk].iter()); repeats]),
        sha256: Some(sha256_as_merkle(&sha256(&data))),
    };
    (info, data)
}

/// The bytes of a one-chunk xorb.
fn rebuild_one(xorb: &SerializedXorb) -> Vec<u8> {
    let mut out = Vec::new();
    let record = ChunkRecords::new(&xorb.bytes).next().expect("one chunk");
    record.unwrap().decode_into(&mut out).unwrap();
    out
}

/// [`rebuild`] that fetches each fetch entry once (these files repeat one chunk 40,000
/// times).
fn rebuild_fetching_once(cas: &Cas, rec: &Reconstruction) -> Vec<u8> {
    let mut fetched: HashMap<(MerkleHash, u64, u64), Vec<u8>> = HashMap::new();
    let mut out = Vec::new();
    for term in &rec.terms {
        let fetch = rec.fetch_for(term).expect("fetch info covers the term");
        let key = (term.hash, fetch.url_range.start, fetch.url_range.end);
        let bytes = fetched.entry(key).or_insert_with(|| {
            let r = cas
                .http
                .get(&fetch.url)
                .header("Range", fetch.url_range.header_value())
                .send()
                .unwrap();
            assert_eq!(r.status(), 206, "xorb range fetch");
            r.bytes().unwrap().to_vec()
        });
        for (k, record) in ChunkRecords::new(bytes).enumerate() {
            let i = fetch.range.start + k as u32;
            if i >= term.range.start && i < term.range.end {
                record.unwrap().decode_into(&mut out).unwrap();
            }
        }
    }
    out
}

fn one_chunk_xorb(seed: u64) -> SerializedXorb {
    let mut builder = XorbBuilder::new();
    builder.push_data(&random_bytes(100, seed)).unwrap();
    builder.finish()
}

fn batch(cas: &Cas, files: &[MerkleHash]) -> BatchReconstruction {
    let query: Vec<String> = files
        .iter()
        .map(|f| format!("file_id={}", f.to_hex()))
        .collect();
    let r = cas
        .http
        .get(format!(
            "{}/v1/reconstructions?{}",
            cas.base,
            query.join("&")
        ))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    let (status, body) = json(r);
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).unwrap()
}

#[test]
fn a_batch_over_its_bounds_lists_the_files_that_fit_and_each_is_served_alone() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/m", "write");
    let (x, y) = (one_chunk_xorb(7101), one_chunk_xorb(7102));
    let (big_a, data_a) = repeated(&x, 40_000);
    let (big_b, data_b) = repeated(&y, 40_000);
    let small = Upload::random(300_000, 7103, 50);
    cas.post_xorb(&x);
    cas.post_xorb(&y);
    cas.upload(&small);
    let shard = Shard {
        files: vec![big_a.clone(), big_b.clone()],
        xorbs: vec![block(&x), block(&y)],
    };
    cas.post_shard(&shard);

    // 80,000 terms asked: the first file fits, the second is left out.
    let answer = batch(&cas, &[big_a.file_hash, big_b.file_hash, small.file_hash]);
    let listed: Vec<bool> = [big_a.file_hash, big_b.file_hash, small.file_hash]
        .iter()
        .map(|f| answer.files.contains_key(f))
        .collect();
    assert_eq!(listed, [true, false, false], "files listed");
    assert_eq!(answer.files[&big_a.file_hash].len(), 40_000);
    let a = answer.file(&big_a.file_hash).unwrap();
    assert_eq!(rebuild_fetching_once(&cas, &a), data_a);
    // What was left out is served by its own query.
    let b = cas.reconstruction(&big_b.file_hash, None);
    assert_eq!(rebuild_fetching_once(&cas, &b), data_b);

    // Within the bounds: everything asked, each file whole.
    let answer = batch(&cas, &[small.file_hash, big_b.file_hash]);
    let b = answer.file(&big_b.file_hash).expect("listed");
    assert_eq!(rebuild_fetching_once(&cas, &b), data_b);
    let s = answer.file(&small.file_hash).expect("listed");
    assert_eq!(rebuild(&cas.http, &s), small.data);
    // A file the repository does not hold is left out as before.
    let answer = batch(&cas, &[MerkleHash::from_bytes([3; 32]), small.file_hash]);
    assert_eq!(answer.files.len(), 1);
}
