//! Restart persistence, crashes, graceful shutdown, and concurrent uploads.

use std::io::{Read, Write};
use std::sync::{Arc, Barrier, Mutex};

use git_xet_core::shard::Shard;
use git_xet_core::xorb::SerializedXorb;

use crate::common::*;
use crate::support::{count_files, random_bytes, TestServer};

#[test]
fn everything_registered_survives_a_restart() {
    let mut server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(700_000, 40, 4);
    cas.upload(&up);
    let stored_bytes = server.metric("git_xet_stored_xorb_bytes");
    server.restart();
    assert_eq!(
        cas.download(&up.file_hash, None),
        up.data,
        "served after restart with the same token"
    );
    assert_eq!(server.metric("git_xet_stored_xorbs"), up.xorbs.len() as f64);
    assert_eq!(server.metric("git_xet_stored_xorb_bytes"), stored_bytes);
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    assert!(!cas.post_xorb(&up.xorbs[0]), "still known");
    // And after a crash (SIGKILL) too.
    server.kill();
    server.restart();
    assert_eq!(
        cas.download(&up.file_hash, Some((5, 500_000))),
        up.data[5..=500_000]
    );
}

#[test]
fn a_crash_mid_upload_leaves_nothing_behind() {
    let mut server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(2_000_000, 41, 1000);
    let xorb = &up.xorbs[0];
    let stream = cas.send_half_a_xorb(&server, xorb);
    std::thread::sleep(std::time::Duration::from_millis(200));
    server.kill();
    drop(stream);
    server.restart();
    assert_eq!(server.stored_count("xorbs"), 0);
    assert_eq!(count_files(&server.data.join("tmp")), 0);
    assert_eq!(server.metric("git_xet_stored_xorbs"), 0.0);
    let (status, v) = json(cas.post_shard_raw(up.shard.to_upload_bytes()));
    assert_eq!(status, 400, "the half-sent xorb is not there: {v}");
}

#[test]
fn graceful_shutdown_finishes_in_flight_uploads() {
    let mut server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(3_000_000, 42, 1000);
    let xorb = up.xorbs[0].clone();
    let addr = server.addr();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST /v1/xorbs/default/{} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        xorb.hash,
        cas.token,
        xorb.bytes.len()
    )
    .unwrap();
    let half = xorb.bytes.len() / 2;
    stream.write_all(&xorb.bytes[..half]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    server.terminate();
    // The rest of the body goes only once the server has the signal (it says so).
    server.wait_for_log("shutting down");
    stream.write_all(&xorb.bytes[half..]).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    server.wait_stopped();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"was_inserted\":true"), "{response}");
    server.restart();
    assert!(!cas.post_xorb(&xorb), "stored before the server exited");
}

#[test]
fn concurrent_overlapping_uploads_store_each_xorb_once() {
    let server = TestServer::start();
    // Six segments, one xorb each. Client i uploads a file made of segments i, i+1, i+2, so
    // neighbours share xorbs; clients 4 and 5 upload exactly what clients 0 and 1 do.
    let segments: Vec<(Vec<u8>, SerializedXorb)> = (0..6)
        .map(|k| {
            let data = random_bytes(400_000 + 5000 * k, 100 + k as u64);
            let xorb = pack(&chunks_of(&data), 10_000).remove(0);
            (data, xorb)
        })
        .collect();
    let segments = Arc::new(segments);
    let clients = 6;
    let barrier = Arc::new(Barrier::new(clients));
    let inserted = Arc::new(Mutex::new(Vec::new()));
    let token = server.token("org/repo", "write");
    let base = server.url.clone();
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let (segments, barrier, inserted, token, base) = (
                segments.clone(),
                barrier.clone(),
                inserted.clone(),
                token.clone(),
                base.clone(),
            );
            std::thread::spawn(move || {
                let cas = Cas {
                    base,
                    token,
                    http: client(),
                };
                let picks: Vec<usize> = (0..3).map(|j| (i % 4) + j).collect();
                let xorbs: Vec<&SerializedXorb> = picks.iter().map(|&k| &segments[k].1).collect();
                let data: Vec<u8> = picks.iter().flat_map(|&k| segments[k].0.clone()).collect();
                let file = file_info(&data, &xorbs);
                barrier.wait();
                for x in &xorbs {
                    let was = cas.post_xorb(x);
                    inserted.lock().unwrap().push((x.hash, was));
                }
                cas.post_shard(&Shard {
                    files: vec![file.clone()],
                    xorbs: xorbs.iter().map(|x| block(x)).collect(),
                });
                (file.file_hash, data)
            })
        })
        .collect();
    let files: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let inserted = inserted.lock().unwrap();
    for (_, xorb) in segments.iter() {
        let wins = inserted
            .iter()
            .filter(|(h, was)| *h == xorb.hash && *was)
            .count();
        assert_eq!(wins, 1, "xorb {} reported inserted exactly once", xorb.hash);
    }
    assert_eq!(server.metric("git_xet_xorbs_stored_total"), 6.0);
    assert_eq!(server.metric("git_xet_stored_xorbs"), 6.0);
    assert_eq!(server.stored_count("xorbs"), 6);
    assert_eq!(server.metric("git_xet_registered_files"), 4.0);
    let cas = Cas::new(&server, "org/repo", "read");
    for (hash, data) in files {
        assert_eq!(cas.download(&hash, None), data);
    }
}

#[test]
fn uploads_beyond_the_memory_bound_wait_their_turn() {
    let server = TestServer::start_with(&["--max-concurrent-uploads", "1"]);
    let token = server.token("org/repo", "write");
    let uploads: Vec<Upload> = (0..4)
        .map(|i| Upload::random(600_000, 200 + i, 1000))
        .collect();
    std::thread::scope(|scope| {
        for up in &uploads {
            let cas = Cas {
                base: server.url.clone(),
                token: token.clone(),
                http: client(),
            };
            scope.spawn(move || cas.upload(up));
        }
    });
    assert_eq!(server.metric("git_xet_registered_files"), 4.0);
    let cas = Cas::with_token(&server, &token);
    for up in &uploads {
        assert_eq!(cas.download(&up.file_hash, None), up.data);
    }
}
