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

/// Input with structure: random stretches, runs of one byte, and repeated text, so that
/// chunks of every size (minimum, forced maximum, in between) occur.
pub fn mixed_data(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut s = seed;
    while out.len() < len {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let piece = 1 + (s >> 40) as usize % 200_000;
        match (s >> 20) % 3 {
            0 => out.extend(random_bytes(piece, s)),
            1 => out.extend(std::iter::repeat_n((s >> 8) as u8, piece)),
            _ => out.extend(b"0123456789,abcdef\n".iter().cycle().take(piece)),
        }
    }
    out.truncate(len);
    out
}
