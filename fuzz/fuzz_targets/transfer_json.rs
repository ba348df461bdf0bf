//! Fuzzes the custom-transfer messages git-lfs sends the agent (one JSON object per line).
#![no_main]

use git_xet_lfs::protocol::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        let _ = Request::parse(line);
    }
});
