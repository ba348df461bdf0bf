//! Deterministic test data: the SplitMix64 byte stream, the generator the deployed chunker's
//! own reference tests use (so seeds and lengths reproduce their vectors). Shared by the
//! integration tests, the benches and the benchmark examples.

/// `n` pseudo-random bytes from SplitMix64 seeded with `seed`.
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        state = state.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}
