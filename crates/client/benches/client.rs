//! Client hot paths without the network: packing (parallel compression) and the shard
//! cache index.
//! End-to-end throughput against a real server is measured by scripts/bench_client.sh.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use git_xet_client::compress_parallel;
use git_xet_client::shard_cache::{save_own_shard, ShardIndex};
use git_xet_core::chunker::chunk_lengths;
use git_xet_core::hash::chunk_hash;
use git_xet_core::shard::{FooterOptions, Shard, XorbBlock};
use git_xet_core::MerkleHash;

fn random(n: usize) -> Vec<u8> {
    let mut state = 0x1234_5678_9abc_def0u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn text(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(
            format!("{{\"step\": {i}, \"loss\": {:.5}}}\n", 1.0 / (i + 1) as f64).as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

fn chunked(data: &[u8]) -> Vec<(MerkleHash, Bytes)> {
    let mut at = 0;
    chunk_lengths(data)
        .into_iter()
        .map(|len| {
            let c = &data[at..at + len];
            at += len;
            (chunk_hash(c), Bytes::copy_from_slice(c))
        })
        .collect()
}

fn packing(c: &mut Criterion) {
    let mut group = c.benchmark_group("compress_parallel");
    let size = 16 << 20;
    group.throughput(Throughput::Bytes(size as u64));
    group.sample_size(10);
    for (name, data) in [("random", random(size)), ("text", text(size))] {
        let chunks = chunked(&data);
        group.bench_with_input(BenchmarkId::from_parameter(name), &chunks, |b, chunks| {
            b.iter(|| compress_parallel(chunks))
        });
    }
    group.finish();
}

/// A shard of `xorbs` xorbs of `chunks` chunks each, with hashes drawn from `seed`.
fn shard_bytes(seed: u64, xorbs: usize, chunks: usize) -> Vec<u8> {
    let xorbs = (0..xorbs)
        .map(|x| {
            let list: Vec<(MerkleHash, u32)> = (0..chunks)
                .map(|c| {
                    let id = [
                        seed.to_le_bytes(),
                        (x as u64).to_le_bytes(),
                        (c as u64).to_le_bytes(),
                    ];
                    (chunk_hash(&id.concat()), 65_536)
                })
                .collect();
            XorbBlock::from_chunks(chunk_hash(&[seed as u8, x as u8]), list, 0)
        })
        .collect();
    Shard {
        files: vec![],
        xorbs,
    }
    .to_stored_bytes(&FooterOptions::default())
}

/// What an upload session pays after each file to index the shard it saved, with a large
/// cache (a million chunks, about 64 GiB of earlier uploads) already indexed.
fn shard_index_after_a_session(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    save_own_shard(dir.path(), &shard_bytes(1, 1000, 1000)).unwrap();
    let small = save_own_shard(dir.path(), &shard_bytes(2, 1, 4)).unwrap();
    let mut index = ShardIndex::load(dir.path());
    let mut group = c.benchmark_group("shard_index");
    group.sample_size(20);
    group.bench_function("add_own_shard_file/1M_indexed", |b| {
        b.iter(|| index.add_own_shard_file(&small))
    });
    group.finish();
}

criterion_group!(benches, packing, shard_index_after_a_session);
criterion_main!(benches);
