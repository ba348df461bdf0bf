//! Protocol-core benchmarks: chunking, hashing, compression, xorb building.
//!
//! `cargo bench --bench core` (add a filter such as `chunker` to run one group).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use git_xet_core::chunker::{chunk_lengths, Chunker};
use git_xet_core::compression::{compress_with, decompress_into, CompressionScheme};
use git_xet_core::hash::{chunk_hash, file_hash, verification_hash};
use git_xet_core::xorb::{CompressedChunk, XorbBuilder};
use git_xet_core::MerkleHash;

#[path = "../tests/support/random.rs"]
#[allow(dead_code)]
mod random;
use random::random_bytes;

/// CSV-like text: compresses well with LZ4.
fn text_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 64);
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(
            format!(
                "{i},sensor-{},{},{}\n",
                i % 97,
                (i * 7919) % 100003,
                i % 13 == 0
            )
            .as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

/// float32 values of a smooth signal: where byte grouping helps.
fn float_bytes(n: usize) -> Vec<u8> {
    (0..n / 4)
        .flat_map(|k| ((k as f32) / 500.0).cos().to_le_bytes())
        .collect()
}

fn chunker(c: &mut Criterion) {
    let data = random_bytes(64 << 20, 1);
    let mut g = c.benchmark_group("chunker");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("64MiB random", |b| b.iter(|| chunk_lengths(&data).len()));
    g.bench_function("64MiB random, 1 MiB pieces", |b| {
        b.iter(|| {
            let mut chunker = Chunker::new();
            let mut n = 0;
            for piece in data.chunks(1 << 20) {
                let mut rest = piece;
                while let Some(len) = chunker.next_boundary(rest) {
                    n += 1;
                    rest = &rest[len..];
                }
            }
            n
        })
    });
    g.finish();
}

fn hashing(c: &mut Criterion) {
    let data = random_bytes(64 << 20, 2);
    let lengths = chunk_lengths(&data);
    let mut g = c.benchmark_group("hashing");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("chunk hashes, 64MiB", |b| {
        b.iter(|| {
            let mut offset = 0;
            let mut leaves = Vec::with_capacity(lengths.len());
            for &len in &lengths {
                leaves.push((chunk_hash(&data[offset..offset + len]), len as u64));
                offset += len;
            }
            file_hash(leaves)
        })
    });
    g.finish();

    // The file hash from known chunk hashes, as a push from a chunk list or a download
    // computes it: a 1 GiB file has about 16,400 chunks.
    let leaves: Vec<(MerkleHash, u64)> = (0..16_384u64)
        .map(|i| (chunk_hash(&i.to_le_bytes()), 60_000 + i % 9_000))
        .collect();
    let mut g = c.benchmark_group("merkle");
    g.throughput(Throughput::Elements(leaves.len() as u64));
    g.bench_function("file hash of 16384 chunk hashes", |b| {
        b.iter(|| file_hash(leaves.clone()))
    });
    // A term's verification hash, as the planner and the server's shard check build it.
    g.bench_function("verification hash of 16384 chunk hashes", |b| {
        b.iter(|| verification_hash(leaves.iter().map(|(h, _)| h)))
    });
    g.finish();
}

fn compression(c: &mut Criterion) {
    let inputs = [
        ("random", random_bytes(64 << 10, 3)),
        ("text", text_bytes(64 << 10)),
        ("float32", float_bytes(64 << 10)),
    ];
    let mut g = c.benchmark_group("compression");
    for (name, data) in &inputs {
        g.throughput(Throughput::Bytes(data.len() as u64));
        for scheme in [CompressionScheme::Lz4, CompressionScheme::ByteGrouping4Lz4] {
            g.bench_with_input(
                BenchmarkId::new(format!("compress {scheme}"), name),
                data,
                |b, d| b.iter(|| compress_with(scheme, d).1.len()),
            );
            let (used, stored) = compress_with(scheme, data);
            g.bench_with_input(
                BenchmarkId::new(format!("decompress {used}"), name),
                &stored,
                |b, s| {
                    let mut out = Vec::with_capacity(data.len());
                    b.iter(|| {
                        out.clear();
                        decompress_into(used, s, data.len(), &mut out).unwrap();
                        out.len()
                    })
                },
            );
        }
    }
    g.finish();
}

fn xorb_building(c: &mut Criterion) {
    let mut data = random_bytes(16 << 20, 4);
    data.extend(text_bytes(16 << 20));
    data.extend(float_bytes(16 << 20));
    let lengths = chunk_lengths(&data);
    let mut g = c.benchmark_group("xorb");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("build 48MiB (random, text, float32)", |b| {
        b.iter(|| {
            let mut builder = XorbBuilder::new();
            let mut offset = 0;
            for &len in &lengths {
                let chunk = &data[offset..offset + len];
                builder
                    .push(&CompressedChunk::new(chunk_hash(chunk), chunk))
                    .unwrap();
                offset += len;
            }
            builder.finish().bytes.len()
        })
    });
    g.finish();
}

criterion_group!(benches, chunker, hashing, compression, xorb_building);
criterion_main!(benches);
