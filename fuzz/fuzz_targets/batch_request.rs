//! Fuzzes the server's parsing of a git-lfs Batch API request body.
#![no_main]

use git_xet_server::lfs::parse_batch_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_batch_request(data);
});
