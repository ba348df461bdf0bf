//! `basic` transfers as plain git-lfs clients make them: uploads become XET content (while
//! they arrive), downloads are bit-exact, bad uploads register nothing, and concurrent uploads
//! of one object store it once.

use std::io::{Read, Write};

use crate::common::*;
use crate::lfs::{basic_download, basic_upload, batch, lfs_url};
use crate::support::{count_files, random_bytes, TestServer};

#[test]
fn basic_upload_becomes_xet_content_and_downloads_bit_exact() {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let data = random_bytes(3_000_000, 50);
    let answer = basic_upload(&server, "org/model", &token, &data);
    assert_eq!(answer["transfer"], "basic");
    assert_eq!(
        server.metric("git_xet_lfs_basic_bytes_received_total"),
        data.len() as f64
    );
    assert!(
        server.metric("git_xet_stored_xorbs") >= 1.0,
        "stored as xorbs"
    );
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    assert!(server.stored_count("xorbs") >= 1);
    assert_eq!(basic_download(&server, "org/model", &token, &data), data);
    assert_eq!(
        server.metric("git_xet_lfs_basic_bytes_served_total"),
        data.len() as f64
    );

    // Ranges, as git-lfs uses to resume.
    let oid = sha256_hex(&data);
    let r = client()
        .get(lfs_url(&server, "org/model", &format!("objects/{oid}")))
        .bearer_auth(&token)
        .header("Range", "bytes=1000000-")
        .send()
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().unwrap(), data[1_000_000..]);
    // Odd Range headers are ignored (RFC 9110): the whole object; a well-formed one past
    // the end, even with a number too large for 64 bits, is 416.
    let get = |range: &str| {
        client()
            .get(lfs_url(&server, "org/model", &format!("objects/{oid}")))
            .bearer_auth(&token)
            .header("Range", range)
            .send()
            .unwrap()
    };
    for odd in ["bytes=5-2", "items=0-1", "bytes=1-2,4-5"] {
        let r = get(odd);
        assert_eq!(r.status(), 200, "{odd}");
        assert!(r.bytes().unwrap() == data, "{odd}: the whole object");
    }
    assert_eq!(get("bytes=99999999999999999999999-").status(), 416);
    let r = get("bytes=2999990-99999999999999999999999");
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().unwrap(), data[2_999_990..]);

    // A second version with an insertion: the server deduplicates against the first.
    let before = server.metric("git_xet_stored_xorb_bytes");
    let mut v2 = data.clone();
    v2.splice(1_500_000..1_500_000, random_bytes(1000, 51));
    basic_upload(&server, "org/model", &token, &v2);
    let added = server.metric("git_xet_stored_xorb_bytes") - before;
    assert!(
        added < 600_000.0,
        "second version stored {added} new bytes of {}",
        v2.len()
    );
    assert_eq!(basic_download(&server, "org/model", &token, &v2), v2);

    // The converted file is real XET content: a CAS client reads it through the xet handshake.
    let (_, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "download",
        &["xet", "basic", "xet-download"],
        &[(&sha256_hex(&v2), v2.len() as u64)],
    );
    let header = &answer["objects"][0]["actions"]["download"]["header"];
    let cas = Cas::with_token(&server, header["X-Xet-Access-Token"].as_str().unwrap());
    let file_hash = header["X-Xet-Hash"].as_str().unwrap().parse().unwrap();
    assert_eq!(cas.download(&file_hash, None), v2);
}

#[test]
fn bad_uploads_register_nothing() {
    let server = TestServer::start_with(&["--max-object-size", "1000000"]);
    let token = server.token("org/model", "write");
    let data = random_bytes(200_000, 54);
    let oid = sha256_hex(&data);
    let url = lfs_url(&server, "org/model", &format!("objects/{oid}"));
    let mut wrong = data.clone();
    wrong[7] ^= 1;
    let (status, v) = json(
        client()
            .put(&url)
            .bearer_auth(&token)
            .body(wrong)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 400);
    assert!(reason(&v).contains("sha256 mismatch"), "{v}");
    let big = random_bytes(1_000_001, 55);
    let big_url = lfs_url(
        &server,
        "org/model",
        &format!("objects/{}", sha256_hex(&big)),
    );
    assert_eq!(
        client()
            .put(&big_url)
            .bearer_auth(&token)
            .body(big)
            .send()
            .unwrap()
            .status(),
        413
    );
    // Truncated: the connection drops before Content-Length bytes arrived.
    let put = format!("/org/model.git/info/lfs/objects/{oid}");
    let handled = server.requests("lfs_upload");
    let mut stream = raw_request(&server, "PUT", &put, &token, data.len());
    stream.write_all(&data[..100_000]).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    // Once the server has counted the request its handler is done: nothing may be stored.
    server.wait_for_requests("lfs_upload", handled + 1);
    assert_eq!(server.metric("git_xet_registered_files"), 0.0);
    assert_eq!(server.metric("git_xet_stored_xorbs"), 0.0);
    assert_eq!(server.metric("git_xet_lfs_basic_bytes_received_total"), 0.0);
    assert_eq!(
        count_files(&server.data.join("tmp")),
        0,
        "temporary files removed"
    );
    let (_, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "download",
        &["basic"],
        &[(&oid, data.len() as u64)],
    );
    assert_eq!(answer["objects"][0]["error"]["code"], 404);
}

/// Files in the server's staging directory that are complete, valid xorbs.
fn staged_xorbs(server: &TestServer) -> usize {
    std::fs::read_dir(server.data.join("tmp"))
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .filter(|bytes| git_xet_core::xorb::validate_xorb(bytes).is_ok())
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn basic_uploads_are_converted_while_they_arrive() {
    // git-lfs gives up on a connection that stays silent for `lfs.activitytimeout` (30 s by
    // default) and sends the object again: converting a large object only after its last
    // byte would make every big basic push time out and repeat. So the server converts as
    // the bytes arrive, and answers right after the last one.
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let data = random_bytes(70 * 1024 * 1024, 77);
    let oid = sha256_hex(&data);
    let put = format!("/org/model.git/info/lfs/objects/{oid}");
    let mut stream = raw_request(&server, "PUT", &put, &token, data.len());
    let cut = data.len() - 1024 * 1024;
    stream.write_all(&data[..cut]).unwrap();
    assert!(
        wait_for(|| staged_xorbs(&server) >= 1),
        "a full xorb is built before the upload ends"
    );
    assert_eq!(
        server.metric("git_xet_stored_xorbs"),
        0.0,
        "nothing is stored before the sha256 is checked"
    );
    stream.write_all(&data[cut..]).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    drop(stream);
    assert!(server.metric("git_xet_stored_xorbs") >= 2.0);
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    assert_eq!(basic_download(&server, "org/model", &token, &data), data);
    assert_eq!(count_files(&server.data.join("tmp")), 0, "staging emptied");
}

#[test]
fn concurrent_basic_uploads_of_the_same_object_store_it_once() {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let data = std::sync::Arc::new(random_bytes(2_500_000, 58));
    let oid = sha256_hex(&data);
    let url = lfs_url(&server, "org/model", &format!("objects/{oid}"));
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (data, url, token, barrier) =
                (data.clone(), url.clone(), token.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                client()
                    .put(&url)
                    .bearer_auth(&token)
                    .body(data.to_vec())
                    .send()
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    let xorbs = server.metric("git_xet_stored_xorbs");
    assert_eq!(
        server.metric("git_xet_xorbs_stored_total"),
        xorbs,
        "no xorb stored twice"
    );
    assert_eq!(server.stored_count("xorbs") as f64, xorbs);
    assert_eq!(basic_download(&server, "org/model", &token, &data), *data);
}
