//! Fuzzes the HTTP `Range` parser (basic downloads, reconstructions): the first 8 bytes are
//! the object's length, the rest the header value. A range it returns lies inside the object.
#![no_main]

use axum::http::{header, HeaderMap, HeaderValue};
use git_xet_server::body::parse_range;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let len = u64::from_le_bytes(data[..8].try_into().unwrap()) >> (data[0] % 64);
    let Ok(value) = HeaderValue::from_bytes(&data[8..]) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::RANGE, value);
    if let Ok(Some(range)) = parse_range(&headers, len) {
        assert!(range.start < range.end && range.end <= len, "{range:?} of {len}");
    }
});
