//! Client hot paths without the network: packing (parallel compression) and the chunk cache.
//! End-to-end throughput against a real server is measured by scripts/bench_client.sh.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use git_xet::client::compress_parallel;
use git_xet::xet::chunker::chunk_lengths;
use git_xet::xet::hash::chunk_hash;
use git_xet::xet::MerkleHash;

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

criterion_group!(benches, packing);
criterion_main!(benches);
