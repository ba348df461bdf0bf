//! Slow and silent clients cannot hold the server: connections time out (headers, then any
//! inactivity), stalled uploads hold no upload slot, requests without a credential are
//! refused before their body is read, and one address gets a bounded number of connections.
//! The last test runs the attacks together and bounds the server's memory and an honest
//! upload's latency (scripts/bench_slow_clients.sh measures the same with figures).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::lfs::lfs_url;
use crate::support::{random_bytes, TestServer};

/// Waits until the server closes `stream` (EOF or reset); returns how long it took, or
/// `None` if it is still open after `limit`.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {} // an answer (408, 401...) before the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(_) => return Some(started.elapsed()), // reset
        }
    }
}

/// Reads what the server answers on `stream` within `limit`; the status code, if any.
fn status_within(stream: &mut TcpStream, limit: Duration) -> Option<u16> {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 512];
    let n = stream.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

/// A xorb upload that declares 1 MB and sends 3 bytes, then stalls.
fn staller(server: &TestServer, token: &str, hash: &str) -> TcpStream {
    let path = format!("/v1/xorbs/default/{hash}");
    let mut s = raw_request(server, "POST", &path, token, 1_000_000);
    s.write_all(b"abc").unwrap();
    s
}

fn timed_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

#[test]
fn stalled_xorb_uploads_do_not_hold_the_upload_slots() {
    let server = TestServer::start_with(&["--max-concurrent-uploads", "2"]);
    let token = server.token("org/m", "write");
    let stallers: Vec<TcpStream> = (0..8)
        .map(|i| staller(&server, &token, &format!("{i:02x}").repeat(32)))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut cas = Cas::with_token(&server, &token);
    cas.http = timed_client();
    let up = Upload::random(200_000, 2411, 100);
    let started = Instant::now();
    for x in &up.xorbs {
        let r = cas.post_xorb_raw(&x.hash.to_hex(), x.bytes.clone());
        assert_eq!(r.status(), 200);
    }
    assert_eq!(cas.post_shard(&up.shard), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an honest upload waited {:?} behind stalled ones",
        started.elapsed()
    );
    drop(stallers);
}

#[test]
fn stalled_basic_uploads_do_not_hold_the_conversion_slots() {
    let server = TestServer::start_with(&["--max-concurrent-uploads", "2"]);
    let token = server.token("org/m", "write");
    // Eight basic PUTs of new objects that declare 1 MB, send 3 bytes and stall.
    let stallers: Vec<TcpStream> = (0..8)
        .map(|i| {
            let oid = format!("{:02x}", 0x10 + i).repeat(32);
            let path = format!("/org/m.git/info/lfs/objects/{oid}");
            let mut s = raw_request(&server, "PUT", &path, &token, 1_000_000);
            s.write_all(b"abc").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let data = random_bytes(600_000, 2417);
    let oid = sha256_hex(&data);
    let started = Instant::now();
    let r = timed_client()
        .put(lfs_url(&server, "org/m", &format!("objects/{oid}")))
        .bearer_auth(&token)
        .body(data.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an honest basic upload waited {:?} behind stalled ones",
        started.elapsed()
    );
    let back = timed_client()
        .get(lfs_url(&server, "org/m", &format!("objects/{oid}")))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(back.status(), 200);
    assert!(back.bytes().unwrap() == data);
    drop(stallers);
}

#[test]
fn partial_headers_stalled_bodies_and_silent_connections_are_closed() {
    let server = TestServer::start_with(&["--header-timeout", "2", "--idle-timeout", "3"]);
    let token = server.token("org/m", "write");
    let mut partial = TcpStream::connect(server.addr()).unwrap();
    partial
        .write_all(b"POST /v1/shards HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut stalled = staller(&server, &token, &"ab".repeat(32));
    let mut silent = TcpStream::connect(server.addr()).unwrap();
    let limit = Duration::from_secs(12);
    let header = closed_within(&mut partial, limit);
    let body = closed_within(&mut stalled, limit);
    let idle = closed_within(&mut silent, limit);
    assert!(
        header.is_some(),
        "a partial header is still open after {limit:?}"
    );
    assert!(
        body.is_some(),
        "a stalled body is still open after {limit:?}"
    );
    assert!(
        idle.is_some(),
        "a silent connection is still open after {limit:?}"
    );
    // A connection that keeps talking is not cut: a keep-alive client with requests
    // spaced below the timeout.
    let http = reqwest::blocking::Client::builder()
        .pool_idle_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    for _ in 0..3 {
        let r = http.get(format!("{}/health", server.url)).send().unwrap();
        assert_eq!(r.status(), 200);
        std::thread::sleep(Duration::from_millis(1500));
    }
}

#[test]
fn requests_without_a_credential_are_refused_before_their_body() {
    let server = TestServer::start();
    let path = "/org/m.git/info/lfs/objects/batch";
    let mut s = TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/vnd.git-lfs+json\r\nContent-Length: 16000000\r\n\r\n{{\"operation\":"
    )
    .unwrap();
    assert_eq!(status_within(&mut s, Duration::from_secs(5)), Some(401));
    // Malformed JSON without a token: 401 too, not 400.
    let r = client()
        .post(format!("{}{path}", server.url))
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[test]
fn connections_per_address_are_capped() {
    let server = TestServer::start_with(&["--max-connections-per-address", "6"]);
    let mut held: Vec<TcpStream> = (0..6)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut over = TcpStream::connect(server.addr()).unwrap();
    let _ = over.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        closed_within(&mut over, Duration::from_secs(5)).is_some(),
        "a seventh connection from one address is served"
    );
    held.clear();
    assert!(wait_for(|| client()
        .get(format!("{}/health", server.url))
        .send()
        .is_ok_and(|r| r.status() == 200)));
}

/// The server's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The slow-client attacks at once: 8 stalled xorb uploads, 40 batch requests without a
/// token declaring 16 MiB, 40 silent connections. An honest upload stays within twice its
/// normal latency (plus scheduling noise) and the server's memory grows by little.
#[test]
fn under_the_slow_client_attacks_memory_is_bounded_and_honest_uploads_proceed() {
    let server = TestServer::start();
    let pid = server.pid().unwrap();
    let token = server.token("org/m", "write");
    let mut cas = Cas::with_token(&server, &token);
    cas.http = timed_client();
    let honest = |seed: u64| {
        let up = Upload::random(1_000_000, seed, 1000);
        let started = Instant::now();
        cas.upload(&up);
        started.elapsed()
    };
    honest(1); // warm up
    let normal = (2..5).map(honest).min().unwrap();
    let before = rss_kib(pid);

    let mut held = Vec::new();
    for i in 0..8 {
        held.push(staller(
            &server,
            &token,
            &format!("{:02x}", 0x40 + i).repeat(32),
        ));
    }
    for _ in 0..40 {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        let _ = write!(
            s,
            "POST /org/m.git/info/lfs/objects/batch HTTP/1.1\r\nHost: x\r\nContent-Length: 16777216\r\n\r\n{}",
            "x".repeat(60_000)
        );
        held.push(s);
    }
    for _ in 0..40 {
        held.push(TcpStream::connect(server.addr()).unwrap());
    }
    std::thread::sleep(Duration::from_millis(500));
    let attacked = (5..8).map(honest).min().unwrap();
    let during = rss_kib(pid);
    eprintln!(
        "honest 1 MB upload: {normal:?} normally, {attacked:?} under attack; RSS {before} KiB -> {during} KiB"
    );
    assert!(
        attacked <= normal * 2 + Duration::from_millis(300),
        "honest upload {attacked:?} under attack, {normal:?} normally"
    );
    assert!(
        during < before + 64 * 1024,
        "server RSS grew from {before} KiB to {during} KiB"
    );
    drop(held);
}
