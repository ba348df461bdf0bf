//! The inactivity timeout counts only the time the server waits on its client: a request
//! whose handler takes longer than the timeout (made slow by the test hook
//! `GIT_XET_TEST_HANDLER_DELAY_MS` of the `test-hooks` feature, crates/io/src/time.rs) still
//! gets its answer, with or without a body; a body that stalls, a client that stops reading
//! and an idle keep-alive connection are still cut at the timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::client;
use crate::lfs::{basic_upload, lfs_url};
use crate::support::{random_bytes, TestServer};

/// The server's inactivity timeout here, and how long the slowed routes take.
const IDLE_SECS: u64 = 1;
const DELAY_MS: u64 = 3000;

fn slow_server() -> (TestServer, String) {
    let env = [("GIT_XET_TEST_HANDLER_DELAY_MS", DELAY_MS.to_string())];
    let idle = IDLE_SECS.to_string();
    let server = TestServer::start_with_env(None, &["--idle-timeout", &idle], &env);
    let token = server.token("org/m", "write");
    let r = client()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(&token)
        .json(&serde_json::json!({ "name": "m", "organization": "org" }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    (server, token)
}

/// Sends `head` and `body` on a new connection and reads the whole answer (the request asks
/// the server to close after it); `None` when the connection ended without one.
fn exchange(server: &TestServer, head: &str, body: &[u8]) -> (Option<u16>, Duration) {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok());
    (status, started.elapsed())
}

#[test]
fn a_request_handled_longer_than_the_idle_timeout_gets_its_answer() {
    let (server, token) = slow_server();
    let host = server.addr();
    // Without a body: the repository's info.
    let head = format!(
        "GET /api/models/org/m HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let (status, took) = exchange(&server, &head, b"");
    assert_eq!(status, Some(200), "after {took:?}");
    assert!(took >= Duration::from_millis(DELAY_MS), "{took:?}");
    // With a body, read whole before the handler's long work: paths-info.
    let body = b"paths=.gitattributes";
    let head = format!(
        "POST /api/models/org/m/paths-info/main HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let (status, took) = exchange(&server, &head, body);
    assert_eq!(status, Some(200), "after {took:?}");
    // The same through a client library, on a kept-alive connection.
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for _ in 0..2 {
        let r = http
            .get(format!("{}/api/models/org/m", server.url))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.json::<serde_json::Value>().unwrap()["id"], "org/m");
    }
}

#[test]
fn waiting_on_the_client_is_still_cut_at_the_idle_timeout() {
    let (server, token) = slow_server();
    let host = server.addr();
    // A body that stalls: declared 100 bytes, 5 sent.
    let head = format!(
        "POST /api/models/org/m/paths-info/main HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
    );
    let (status, took) = exchange(&server, &head, b"paths");
    assert!(status != Some(200), "a stalled body was answered");
    assert!(took < Duration::from_secs(IDLE_SECS + 5), "{took:?}");
    // An idle connection after its answer (kept alive): closed after the timeout.
    let mut s = TcpStream::connect(server.addr()).unwrap();
    write!(s, "GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(IDLE_SECS + 5)))
        .unwrap();
    let mut answer = Vec::new();
    let end = s.read_to_end(&mut answer);
    assert!(
        end.is_ok(),
        "an idle kept-alive connection is still open: {end:?}"
    );
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    // A client that stops reading a large answer: cut once the socket stays full.
    let data = random_bytes(32 << 20, 4801);
    basic_upload(&server, "org/m", &token, &data);
    let oid = crate::common::sha256_hex(&data);
    let url = lfs_url(&server, "org/m", &format!("objects/{oid}"));
    let path = url.strip_prefix(&server.url).unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(IDLE_SECS + 4));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(
        got < data.len(),
        "the whole answer ({got} bytes) reached a client that did not read"
    );
}
