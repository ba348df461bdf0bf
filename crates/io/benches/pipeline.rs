//! The chunk-and-hash pipeline over 64 MiB in memory: chunking and hashing on threads, with
//! and without the sha256 git-lfs needs. The core's single-threaded figures are in
//! crates/core/benches/core.rs.
//!
//! `cargo bench -p git-xet-io --bench pipeline`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use git_xet_io::pipeline::hash_stream;

#[path = "../../core/tests/support/random.rs"]
#[allow(dead_code)]
mod random;
use random::random_bytes;

fn pipeline(c: &mut Criterion) {
    let data = random_bytes(64 << 20, 7);
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.bench_function("chunk + hash, 64MiB", |b| {
        b.iter(|| hash_stream(&data[..], false).unwrap().file_hash)
    });
    g.bench_function("with sha256, 64MiB", |b| {
        b.iter(|| hash_stream(&data[..], true).unwrap().file_hash)
    });
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
