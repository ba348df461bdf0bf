//! Fuzzes the LFS pointer parser; what it accepts must round-trip through its own encoding.
#![no_main]

use git_xet_lfs::pointer::Pointer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(pointer) = Pointer::parse(data) {
        let again = Pointer::parse(pointer.to_text().as_bytes()).expect("an encoded pointer parses");
        assert_eq!(again, pointer);
    }
});
