//! Fuzzes the pkt-line reader of the filter protocol (git's side of `filter-process`): lists
//! and content up to a flush. No input may panic or allocate past the packet buffer.
#![no_main]

use git_xet_git::filter::pktline::PktReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut reader = PktReader::new(data);
    // A handshake-shaped exchange: a list, then content, until the input ends or fails.
    for _ in 0..64 {
        match reader.read_list() {
            Ok(Some(lines)) => assert!(lines.iter().all(|l| l.len() < 65520)),
            _ => break,
        }
        let mut total = 0usize;
        match reader.read_content(|d| {
            total += d.len();
            Ok(())
        }) {
            Ok(_) => {}
            Err(_) => break,
        }
    }
});
