//! POST /v1/xorbs/default/{hash}: acceptance, idempotence, and every kind of bad input.

use std::io::Read;

use crate::common::*;
use crate::support::{random_bytes, TestServer};

fn xorb_files(server: &TestServer) -> usize {
    server.stored_count("xorbs")
}

/// Files in the server's staging directory (uploads being received or validated).
fn staging_files(server: &TestServer) -> usize {
    walk(&server.data.join("tmp"))
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .map(|p| if p.is_dir() { walk(&p) } else { 1 })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn xorb_upload_stores_once_and_counts_bytes() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(300_000, 1, 1000);
    let xorb = &up.xorbs[0];
    assert!(cas.post_xorb(xorb), "first upload inserts");
    assert!(
        !cas.post_xorb(xorb),
        "second upload is not an error and inserts nothing"
    );
    assert_eq!(xorb_files(&server), 1);
    assert_eq!(server.metric("git_xet_xorbs_stored_total"), 1.0);
    assert_eq!(server.metric("git_xet_stored_xorbs"), 1.0);
    assert_eq!(
        server.metric("git_xet_stored_xorb_bytes"),
        xorb.bytes.len() as f64
    );
    assert_eq!(
        server.metric("git_xet_xorb_bytes_received_total"),
        2.0 * xorb.bytes.len() as f64
    );
    // The same route answers under /api/v1.
    let r = cas
        .http
        .post(format!("{}/api/v1/xorbs/default/{}", server.url, xorb.hash))
        .bearer_auth(&cas.token)
        .body(xorb.bytes.clone())
        .send()
        .unwrap();
    assert_eq!(json(r), (200, serde_json::json!({"was_inserted": false})));
}

#[test]
fn bad_xorbs_are_refused_with_a_reason_and_leave_nothing() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(400_000, 2, 1000);
    let good = &up.xorbs[0];
    let hash = good.hash.to_hex();
    let other = Upload::random(100_000, 3, 1000);

    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        (
            "garbage",
            hash.clone(),
            b"not a xorb at all".to_vec(),
            "invalid xorb",
        ),
        ("empty", hash.clone(), Vec::new(), "invalid xorb"),
        (
            "truncated",
            hash.clone(),
            good.bytes[..good.bytes.len() / 2].to_vec(),
            "invalid xorb",
        ),
        (
            "missing trailer byte",
            hash.clone(),
            good.bytes[..good.bytes.len() - 1].to_vec(),
            "invalid xorb",
        ),
        (
            "other xorb's bytes",
            hash.clone(),
            other.xorbs[0].bytes.clone(),
            "hash mismatch",
        ),
        (
            "malformed hash in URL",
            "xyz".into(),
            good.bytes.clone(),
            "invalid xorb hash",
        ),
        (
            "corrupted chunk data",
            hash.clone(),
            {
                let mut b = good.bytes.clone();
                b[100] ^= 0xff;
                b
            },
            "invalid xorb",
        ),
        (
            "corrupted footer hash",
            hash.clone(),
            {
                let mut b = good.bytes.clone();
                let n = b.len();
                b[n - 100] ^= 0x01;
                b
            },
            "invalid xorb",
        ),
    ];
    for (what, path_hash, body, expected) in cases {
        let (status, v) = json(cas.post_xorb_raw(&path_hash, body));
        assert_eq!(status, 400, "{what}: {v}");
        assert!(
            reason(&v).contains(expected),
            "{what}: reason {:?} should mention {expected:?}",
            reason(&v)
        );
    }
    assert_eq!(xorb_files(&server), 0, "nothing stored");
    assert_eq!(staging_files(&server), 0, "no staging file left behind");
    assert_eq!(server.metric("git_xet_xorbs_stored_total"), 0.0);
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), 0.0);
    let r = cas
        .http
        .post(format!("{}/v1/xorbs/other/{hash}", server.url))
        .bearer_auth(&cas.token)
        .body(good.bytes.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 404, "unknown namespace");
    // Refused before its body was read, the request's connection is announced as closing,
    // so that clients do not send their next request down it.
    let r = cas.post_xorb_raw("xyz", good.bytes.clone());
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["connection"], "close");
}

#[test]
fn oversized_xorbs_get_413_before_the_body_is_read() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let hash = "0".repeat(64);
    // Declared too large: refused from the header alone, without sending the body.
    let path = format!("/v1/xorbs/default/{hash}");
    let limit = git_xet_core::constants::MAX_XORB_BODY;
    let mut stream = raw_request(&server, "POST", &path, &cas.token, limit + 1);
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    // Streamed without a length: refused once it passes the limit.
    let body = random_bytes(limit + 4096, 9);
    let chunks: Vec<Vec<u8>> = body.chunks(1 << 20).map(|c| c.to_vec()).collect();
    let stream_body = reqwest::blocking::Body::new(ChunkReader {
        chunks,
        pos: 0,
        offset: 0,
    });
    let r = cas
        .http
        .post(format!("{}/v1/xorbs/default/{hash}", server.url))
        .bearer_auth(&cas.token)
        .body(stream_body)
        .send();
    if let Ok(r) = r {
        assert_eq!(r.status(), 413);
    } // (the server may also close the connection while the client is still sending)
    assert_eq!(xorb_files(&server), 0);
    assert_eq!(staging_files(&server), 0);
}

#[test]
fn a_client_that_disconnects_mid_body_leaves_nothing() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(2_000_000, 4, 1000);
    let xorb = &up.xorbs[0];
    let stream = cas.send_half_a_xorb(&server, xorb);
    assert!(
        wait_for(|| staging_files(&server) == 1),
        "the upload is being staged"
    );
    drop(stream);
    // The server notices the closed connection and discards what it staged.
    assert!(
        wait_for(|| staging_files(&server) == 0),
        "staging file removed"
    );
    assert_eq!(xorb_files(&server), 0);
    // The whole xorb afterwards is stored normally.
    assert!(cas.post_xorb(xorb));
    assert_eq!(xorb_files(&server), 1);
    assert_eq!(staging_files(&server), 0);
}

/// A reader without a known length, so reqwest sends the body chunked.
struct ChunkReader {
    chunks: Vec<Vec<u8>>,
    pos: usize,
    offset: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(chunk) = self.chunks.get(self.pos) else {
            return Ok(0);
        };
        let n = buf.len().min(chunk.len() - self.offset);
        buf[..n].copy_from_slice(&chunk[self.offset..self.offset + n]);
        self.offset += n;
        if self.offset == chunk.len() {
            self.pos += 1;
            self.offset = 0;
        }
        Ok(n)
    }
}

#[test]
fn xorb_upload_needs_a_valid_write_token() {
    let server = TestServer::start();
    let up = Upload::random(100_000, 4, 1000);
    let xorb = &up.xorbs[0];
    let hash = xorb.hash.to_hex();
    let http = client();
    let r = http
        .post(format!("{}/v1/xorbs/default/{hash}", server.url))
        .body(xorb.bytes.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 401, "no token");
    assert!(r.headers().contains_key("www-authenticate"));
    let read = Cas::new(&server, "org/repo", "read");
    assert_eq!(
        read.post_xorb_raw(&hash, xorb.bytes.clone()).status(),
        403,
        "read token"
    );
    let expired = Cas::with_token(&server, &server.expired_token("org/repo", "write"));
    let (status, v) = json(expired.post_xorb_raw(&hash, xorb.bytes.clone()));
    assert_eq!(status, 401);
    assert!(reason(&v).contains("expired"), "{v}");
    let good = server.token("org/repo", "write");
    let mut tampered = good.clone().into_bytes();
    let mid = tampered.len() / 2;
    tampered[mid] = if tampered[mid] == b'A' { b'B' } else { b'A' };
    let tampered = Cas::with_token(&server, &String::from_utf8(tampered).unwrap());
    assert_eq!(
        tampered.post_xorb_raw(&hash, xorb.bytes.clone()).status(),
        401,
        "tampered token"
    );
    let foreign = TestServer::start();
    let foreign_token = Cas::with_token(&server, &foreign.token("org/repo", "write"));
    assert_eq!(
        foreign_token
            .post_xorb_raw(&hash, xorb.bytes.clone())
            .status(),
        401,
        "token of another server"
    );
    assert_eq!(server.metric("git_xet_xorbs_stored_total"), 0.0);
}
