//! Fuzzes the xorb parsers: full validation, inspection, footer parsing, range extraction and
//! the chunk-record iterator used on fetched byte ranges. None may panic on any input.
#![no_main]

use git_xet_core::xorb::{extract_chunks, inspect_xorb, validate_xorb, ChunkRecords, XorbFooter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = validate_xorb(data);
    let _ = inspect_xorb(data);
    if let Ok(footer) = XorbFooter::parse_structure(data) {
        let n = footer.num_chunks();
        let _ = extract_chunks(data, &footer, 0, n);
        let _ = extract_chunks(data, &footer, n / 2, n);
    }
    let mut out = Vec::new();
    for record in ChunkRecords::new(data).take(64) {
        match record {
            Ok(r) => {
                out.clear();
                let _ = r.decode_into(&mut out);
            }
            Err(_) => break,
        }
    }
});
