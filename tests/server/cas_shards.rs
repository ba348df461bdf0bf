//! POST /v1/shards: registration, and refusal of every inconsistent claim with nothing
//! becoming visible.

use git_xet_core::hash::sha256_as_merkle;
use git_xet_core::shard::Shard;
use git_xet_core::MerkleHash;

use crate::common::*;
use crate::support::TestServer;

#[test]
fn shard_registers_files_once() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(900_000, 10, 5);
    assert!(up.xorbs.len() > 1, "several xorbs");
    for x in &up.xorbs {
        cas.post_xorb(x);
    }
    assert_eq!(cas.post_shard(&up.shard), 1);
    assert_eq!(
        cas.post_shard(&up.shard),
        0,
        "same shard again registers nothing"
    );
    assert_eq!(server.metric("git_xet_shards_registered_total"), 1.0);
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    assert_eq!(cas.download(&up.file_hash, None), up.data);
    // The stored form is kept under shards/.
    let shards = server.stored_objects("shards");
    assert_eq!(shards.len(), 1);
    let stored = &shards[0].1;
    let parsed = git_xet_core::shard::parse_shard(stored).unwrap();
    assert!(parsed.footer.is_some());
    assert_eq!(parsed.shard.files[0].file_hash, up.file_hash);
}

/// Applies `edit` to a valid shard and expects a 400 mentioning `expected`, with nothing
/// registered.
fn refused(
    cas: &Cas,
    server: &TestServer,
    up: &Upload,
    what: &str,
    expected: &str,
    edit: impl FnOnce(&mut Shard),
) {
    let mut shard = up.shard.clone();
    edit(&mut shard);
    let (status, v) = json(cas.post_shard_raw(shard.to_upload_bytes()));
    assert_eq!(status, 400, "{what}: {v}");
    assert!(
        reason(&v).contains(expected),
        "{what}: reason {:?} should mention {expected:?}",
        reason(&v)
    );
    assert_eq!(
        server.metric("git_xet_registered_files"),
        0.0,
        "{what}: nothing registered"
    );
    assert_eq!(
        cas.reconstruction_raw(&shard.files[0].file_hash.to_hex(), None)
            .status(),
        404,
        "{what}: not visible"
    );
}

#[test]
fn inconsistent_shards_are_refused() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(600_000, 11, 4);
    // Before its xorbs exist, the shard is refused.
    refused(&cas, &server, &up, "xorbs missing", "not stored", |_| {});
    for x in &up.xorbs {
        cas.post_xorb(x);
    }
    refused(
        &cas,
        &server,
        &up,
        "wrong verification hash",
        "verification hash",
        |s| {
            s.files[0].verification.as_mut().unwrap()[0] = MerkleHash::from_bytes([1; 32]);
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "no verification entries",
        "verification",
        |s| {
            s.files[0].verification = None;
        },
    );
    refused(&cas, &server, &up, "wrong file hash", "file hash", |s| {
        s.files[0].file_hash = MerkleHash::from_bytes([2; 32]);
    });
    refused(&cas, &server, &up, "missing sha256", "sha256", |s| {
        s.files[0].sha256 = None;
    });
    refused(
        &cas,
        &server,
        &up,
        "term past the xorb's end",
        "not inside xorb",
        |s| {
            s.files[0].terms[0].chunk_end += 1;
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "wrong unpacked length",
        "unpacked bytes",
        |s| {
            s.files[0].terms[0].unpacked_bytes -= 1;
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "term naming an unknown xorb",
        "not stored",
        |s| {
            s.files[0].terms[0].xorb_hash = MerkleHash::from_bytes([3; 32]);
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "CAS block with a wrong chunk",
        "does not match the stored chunk",
        |s| {
            s.xorbs[0].chunks[1].chunk_hash = MerkleHash::from_bytes([4; 32]);
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "CAS block with a wrong size",
        "does not match the stored chunk",
        |s| {
            s.xorbs[0].num_bytes_in_xorb += 1;
            let last = s.xorbs[0].chunks.last_mut().unwrap();
            last.unpacked_bytes += 1;
        },
    );
    refused(
        &cas,
        &server,
        &up,
        "CAS block with a wrong on-disk size",
        "bytes on disk",
        |s| {
            s.xorbs[0].num_bytes_on_disk = 12345;
        },
    );
    refused(&cas, &server, &up, "terms reordered", "file hash", |s| {
        s.files[0].terms.swap(0, 1);
        s.files[0].verification.as_mut().unwrap().swap(0, 1);
    });

    // Malformed bytes.
    let good = up.shard.to_upload_bytes();
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"definitely not a shard".to_vec()),
        ("empty", Vec::new()),
        ("truncated", good[..good.len() - 10].to_vec()),
        ("bad magic", {
            let mut b = good.clone();
            b[20] ^= 0xff;
            b
        }),
        ("bad version", {
            let mut b = good.clone();
            b[32] = 3;
            b
        }),
        ("trailing bytes", {
            let mut b = good.clone();
            b.extend_from_slice(&[0; 7]);
            b
        }),
    ];
    for (what, body) in bodies {
        let (status, v) = json(cas.post_shard_raw(body));
        assert_eq!(status, 400, "{what}: {v}");
    }
    assert_eq!(server.metric("git_xet_shards_registered_total"), 0.0);
    // The untouched shard still registers.
    assert_eq!(cas.post_shard(&up.shard), 1);
    assert_eq!(cas.download(&up.file_hash, None), up.data);
}

#[test]
fn oversized_shards_get_413() {
    use std::io::Read;
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let mut stream = raw_request(
        &server,
        "POST",
        "/v1/shards",
        &cas.token,
        64 * 1024 * 1024 + 1,
    );
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
}

#[test]
fn shard_upload_needs_a_write_token() {
    let server = TestServer::start();
    let writer = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(200_000, 12, 1000);
    writer.post_xorb(&up.xorbs[0]);
    let reader = Cas::new(&server, "org/repo", "read");
    assert_eq!(
        reader.post_shard_raw(up.shard.to_upload_bytes()).status(),
        403
    );
    let anonymous = client()
        .post(format!("{}/v1/shards", server.url))
        .body(up.shard.to_upload_bytes())
        .send()
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(server.metric("git_xet_registered_files"), 0.0);
}

#[test]
fn empty_file_registers_and_reconstructs_to_nothing() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let file = file_info(b"", &[]);
    assert_eq!(file.file_hash, MerkleHash::ZERO, "deployed empty-file hash");
    assert_eq!(file.sha256, Some(sha256_as_merkle(&sha256(b""))));
    let shard = Shard {
        files: vec![file],
        xorbs: vec![],
    };
    assert_eq!(cas.post_shard(&shard), 1);
    let rec = cas.reconstruction(&MerkleHash::ZERO, None);
    assert!(rec.terms.is_empty());
    assert_eq!(
        cas.reconstruction_raw(&MerkleHash::ZERO.to_hex(), Some("bytes=0-0"))
            .status(),
        416
    );
}

/// The deployed reference implementation's xorb and stored shard are accepted as they are,
/// and the file they describe comes back bit-exact.
#[test]
fn reference_xorb_and_shard_from_the_deployed_client() {
    let vectors =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/tests/data/vectors");
    let xorb_hash = "417dce6249b8615d390c2334acce1b75f5e9f9e508426ce81de5fd8219148627";
    let xorb = std::fs::read(vectors.join(format!("{xorb_hash}.xorb"))).unwrap();
    let shard = std::fs::read(vectors.join("sample.shard")).unwrap();
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    assert_eq!(
        json(cas.post_xorb_raw(xorb_hash, xorb)),
        (200, serde_json::json!({"was_inserted": true}))
    );
    let (status, v) = json(cas.post_shard_raw(shard));
    assert_eq!((status, v["result"].as_u64()), (200, Some(1)), "{v}");
    let file: MerkleHash = "9e1f0735c1b003d6ff10b2d1c02dd4f907481a4b566a352db0623af5ba1f03e4"
        .parse()
        .unwrap();
    let data = cas.download(&file, None);
    assert_eq!(data.len(), 3 * 1024 * 1024);
    assert_eq!(
        sha256_hex(&data),
        "5f1340076bc8805ab1ede29d084dee3bcb78052017e79a619835d8e7e8ad9b21"
    );
}
