//! Xorb fixtures shared by the core's tests and the client's command tests (each includes
//! this file next to `random.rs`).

use git_xet_core::xorb::XorbBuilder;

use super::random::random_bytes;

/// A xorb with three chunks: one stored raw, one LZ4, one BG4.
pub fn small_xorb() -> Vec<u8> {
    let random = random_bytes(20_000, 1);
    let text: Vec<u8> = b"id,value,flag\n"
        .iter()
        .cycle()
        .take(30_000)
        .copied()
        .collect();
    let floats: Vec<u8> = (0..10_000)
        .flat_map(|i| ((i as f32) / 100.0).sin().to_le_bytes())
        .collect();
    let mut b = XorbBuilder::new();
    for c in [&random, &text, &floats] {
        b.push_data(c).unwrap();
    }
    let x = b.finish();
    let schemes: Vec<u8> = (0..3)
        .map(|i| x.bytes[x.footer.chunk_record_range(i).start + 4])
        .collect();
    assert_eq!(
        schemes,
        vec![0, 1, 2],
        "fixture covers all compression types"
    );
    x.bytes
}
