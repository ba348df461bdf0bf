//! What the current reference client (hf-xet 1.8) sends that the draft does not describe:
//! footer-less xorbs, the `default` dedup namespace, upload grants, telemetry, v2
//! reconstructions (docs/protocol.md, "The deployed ecosystem"). The whole client runs
//! against the server in tests/interop.rs.

use std::path::{Path, PathBuf};

use git_xet_core::reconstruction::{Reconstruction, ReconstructionV2};

use crate::common::*;
use crate::support::TestServer;

const REPO: &str = "org/deployed";
/// The xorb hf-xet named when it sent crates/core/tests/data/vectors/hf-xet-1.8.0-footerless.xorb.
const VECTOR_HASH: &str = "e3e1e3efe343b3d97dcccd169411b3257070117916b6c077470f3bfe915de0ed";

fn vector(name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/tests/data/vectors");
    std::fs::read(dir.join(name)).unwrap()
}

/// Every file under `dir` whose bytes are `bytes`.
fn files_with(dir: &Path, bytes: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(files_with(&p, bytes));
        } else if std::fs::read(&p).is_ok_and(|b| b == bytes) {
            out.push(p);
        }
    }
    out
}

/// Files in the data directory, and objects in the server's S3 store if it has one, whose
/// bytes are exactly `bytes`.
fn copies(server: &TestServer, bytes: &[u8]) -> usize {
    let mut found = files_with(&server.data, bytes).len();
    if server.stores_on_s3() {
        let objects = server.stored_objects("xorbs");
        found += objects.iter().filter(|(_, stored)| stored == bytes).count();
    }
    found
}

#[test]
fn footerless_xorb_is_stored_with_the_footer_the_reference_writes() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let sent = vector("hf-xet-1.8.0-footerless.xorb");
    let rebuilt = vector("hf-xet-1.8.0-footerless.rebuilt.xorb");

    let r = cas.post_xorb_raw(VECTOR_HASH, sent.clone());
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v["was_inserted"], true);
    // Received: what the client sent; stored: the complete form, as the reference has it.
    assert_eq!(
        server.metric("git_xet_xorb_bytes_received_total"),
        sent.len() as f64
    );
    assert_eq!(
        server.metric("git_xet_stored_xorb_bytes"),
        rebuilt.len() as f64
    );
    assert_eq!(copies(&server, &rebuilt), 1);

    // The complete form of the same xorb is the same xorb.
    let r = cas.post_xorb_raw(VECTOR_HASH, rebuilt.clone());
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<serde_json::Value>().unwrap()["was_inserted"],
        false
    );
    assert_eq!(server.metric("git_xet_stored_xorbs"), 1.0);
}

#[test]
fn footerless_xorb_is_refused_when_its_hash_or_a_chunk_is_wrong() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let sent = vector("hf-xet-1.8.0-footerless.xorb");

    let other = "00".repeat(32);
    let r = cas.post_xorb_raw(&other, sent.clone());
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains(VECTOR_HASH));

    // A byte of the raw chunk 1 flipped: still decodes, but its chunk hash changes, so the
    // recomputed xorb hash is not the one in the URL.
    let mut bad = sent.clone();
    bad[58709 + 8 + 100] ^= 1;
    assert_eq!(cas.post_xorb_raw(VECTOR_HASH, bad).status(), 400);
    // Cut inside the LZ4 chunk: neither form.
    assert_eq!(
        cas.post_xorb_raw(VECTOR_HASH, sent[..58000].to_vec())
            .status(),
        400
    );
    assert_eq!(server.metric("git_xet_stored_xorbs"), 0.0);
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), 0.0);
    assert_eq!(copies(&server, &sent[..4096]), 0);
}

fn post(cas: &Cas, path: &str, body: &str) -> reqwest::blocking::Response {
    cas.http
        .post(format!("{}{path}", cas.base))
        .bearer_auth(&cas.token)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .unwrap()
}

#[test]
fn upload_grants_say_stored_or_not_offered() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let path = format!("/v1/xorb-grants/default/{VECTOR_HASH}");
    let ask = r#"{"length":99367,"checksum":"unused"}"#;
    // Not stored: 404, on which hf-xet uploads through POST /v1/xorbs.
    assert_eq!(post(&cas, &path, ask).status(), 404);
    cas.post_xorb_raw(VECTOR_HASH, vector("hf-xet-1.8.0-footerless.xorb"));
    // Stored: 200, on which hf-xet skips the upload.
    assert_eq!(post(&cas, &path, ask).status(), 200);
    assert_eq!(
        server.metric("git_xet_xorb_grants_already_stored_total"),
        1.0
    );
    // Writers only, and the one namespace.
    let reader = Cas::new(&server, REPO, "read");
    assert!(post(&reader, &path, ask).status().is_client_error());
    assert_ne!(post(&reader, &path, ask).status(), 200);
    let elsewhere = format!("/v1/xorb-grants/other/{VECTOR_HASH}");
    assert_eq!(post(&cas, &elsewhere, ask).status(), 404);
}

#[test]
fn telemetry_is_counted_and_never_logged() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let secret = "telemetry-body-marker-5c1d";
    let r = post(&cas, "/v1/telemetry", &format!(r#"{{"note":"{secret}"}}"#));
    assert_eq!(r.status(), 204);
    assert_eq!(server.metric("git_xet_telemetry_reports_total"), 1.0);
    assert!(!server.log_text().contains(secret));
}

#[test]
fn both_dedup_namespaces_answer_for_the_same_chunks() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let upload = Upload::random(300_000, 19, 1000);
    cas.upload(&upload);
    let first_chunk = chunks_of(&upload.data)[0].hash;
    for ns in ["default", "default-merkledb"] {
        let r = cas
            .http
            .get(format!("{}/v1/chunks/{ns}/{first_chunk}", cas.base))
            .bearer_auth(&cas.token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "namespace {ns}");
        assert!(!r.bytes().unwrap().is_empty());
    }
    let r = cas
        .http
        .get(format!("{}/v1/chunks/other/{first_chunk}", cas.base))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(server
        .metrics()
        .contains("git_xet_dedup_queries_total{result=\"hit\"} 2\n"));
}

#[test]
fn v2_reconstruction_has_the_v1_terms_and_one_range_per_url() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "read");
    let writer = Cas::new(&server, REPO, "write");
    let upload = Upload::random(600_000, 20, 3);
    writer.upload(&upload);
    for range in [None, Some("bytes=1000-450000")] {
        let get = |v: &str| {
            let mut req = cas
                .http
                .get(format!(
                    "{}/{v}/reconstructions/{}",
                    cas.base, upload.file_hash
                ))
                .bearer_auth(&cas.token);
            if let Some(r) = range {
                req = req.header("Range", r);
            }
            let r = req.send().unwrap();
            assert_eq!(r.status(), 200, "{v} {range:?}");
            r.text().unwrap()
        };
        let v1: Reconstruction = serde_json::from_str(&get("v1")).unwrap();
        let v2: ReconstructionV2 = serde_json::from_str(&get("v2")).unwrap();
        assert!(v1.terms.len() > 1);
        assert_eq!(v2.terms, v1.terms);
        assert_eq!(v2.offset_into_first_range, v1.offset_into_first_range);
        assert_eq!(v2.xorbs.len(), v1.fetch_info.len());
        for (xorb, fetches) in &v1.fetch_info {
            let multi = &v2.xorbs[xorb];
            assert_eq!(multi.len(), fetches.len());
            for f in fetches {
                // The URL carries an expiry and signature; the ranges must match exactly.
                assert!(multi.iter().any(|m| m.ranges.len() == 1
                    && m.ranges[0].chunks == f.range
                    && m.ranges[0].bytes == f.url_range));
            }
        }
    }
    // Also under /api, like the v1 routes.
    let r = cas
        .http
        .get(format!(
            "{}/api/v2/reconstructions/{}",
            cas.base, upload.file_hash
        ))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // The file exists in its repository only.
    let stranger = Cas::new(&server, "org/other", "read");
    let r = stranger
        .http
        .get(format!(
            "{}/v2/reconstructions/{}",
            cas.base, upload.file_hash
        ))
        .bearer_auth(&stranger.token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Transfer negotiation with Hugging Face's agent in mind: it is registered as `xet` for both
/// directions but refuses downloads, so a download names `xet` only for clients that also
/// list `xet-download` (ours: `git xet install`, the filter, the batch client).
#[test]
fn downloads_name_xet_only_for_clients_whose_agent_downloads() {
    use crate::lfs::{basic_upload, batch};
    let server = TestServer::start();
    let token = server.token(REPO, "write");
    let data = crate::support::random_bytes(200_000, 21);
    basic_upload(&server, REPO, &token, &data);
    let present = (sha256_hex(&data), data.len() as u64);
    let missing = (sha256_hex(b"not yet"), 7);
    let name = |op: &str, transfers: &[&str], object: &(String, u64)| {
        let (status, answer) = batch(
            &server,
            REPO,
            Some(&token),
            op,
            transfers,
            &[(&object.0, object.1)],
        );
        assert_eq!(status, 200, "{answer}");
        answer["transfer"].as_str().unwrap().to_string()
    };
    // What git-lfs sends with HF's agent installed, and with ours.
    let hf = ["basic", "lfs-standalone-file", "xet"];
    let ours = ["basic", "lfs-standalone-file", "xet", "xet-download"];
    assert_eq!(name("download", &hf, &present), "basic");
    assert_eq!(name("download", &ours, &present), "xet");
    assert_eq!(
        name("download", &["xet-download", "basic"], &present),
        "basic"
    );
    // Uploads: either agent uploads through xet.
    assert_eq!(name("upload", &hf, &missing), "xet");
    assert_eq!(name("upload", &ours, &missing), "xet");
}

fn post_v2_shard(cas: &Cas, bytes: Vec<u8>) -> reqwest::blocking::Response {
    cas.http
        .post(format!("{}/v2/shards", cas.base))
        .bearer_auth(&cas.token)
        .body(bytes)
        .send()
        .unwrap()
}

#[test]
fn v2_shard_upload_registers_and_answers_progress_frames() {
    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let up = Upload::random(700_000, 21, 3);
    for x in &up.xorbs {
        cas.post_xorb(x);
    }
    // A shard whose file hash is wrong is refused with v1's status, before any frame.
    let mut bad = up.shard.clone();
    bad.files[0].file_hash = git_xet_core::MerkleHash::ZERO;
    let refused = post_v2_shard(&cas, bad.to_upload_bytes());
    assert_eq!(refused.status(), 400);
    assert_eq!(server.metric("git_xet_registered_files"), 0.0);
    // A reader may not register files.
    let reader = Cas::new(&server, REPO, "read");
    assert_eq!(
        post_v2_shard(&reader, up.shard.to_upload_bytes()).status(),
        403
    );

    let answer = post_v2_shard(&cas, up.shard.to_upload_bytes());
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["content-type"].to_str().unwrap(),
        "application/x-ndjson"
    );
    let body = answer.text().unwrap();
    let frames: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.first().unwrap()["type"], "validating");
    assert_eq!(frames.last().unwrap()["type"], "result", "{body}");
    assert_eq!(server.metric("git_xet_registered_files"), 1.0);
    assert_eq!(cas.download(&up.file_hash, None), up.data);
    // The same route under /api/v2.
    let again = cas
        .http
        .post(format!("{}/api/v2/shards", cas.base))
        .bearer_auth(&cas.token)
        .body(up.shard.to_upload_bytes())
        .send()
        .unwrap();
    assert_eq!(again.status(), 200);
}

/// The reference client cuts a xorb when its uncompressed data would pass 64 MiB, so a
/// xorb of data that does not compress arrives as 64 MiB plus 8 header bytes per chunk
/// (hf-xet 1.8 sent 67,113,683 bytes for 1057 chunks). The largest such body: 64 MiB of
/// stored-raw chunks, footer-less. Accepted and stored whole; one more byte than the
/// server's stated cap is refused from `Content-Length` alone.
#[test]
fn the_reference_clients_largest_xorb_is_accepted() {
    use git_xet_core::compression::CompressionScheme;
    use git_xet_core::constants::{MAX_CHUNK_SIZE, MAX_XORB_BODY, MAX_XORB_DATA};
    use git_xet_core::hash::{chunk_hash, xorb_hash};
    use git_xet_core::xorb::ChunkHeader;
    use std::io::Read;

    let server = TestServer::start();
    let cas = Cas::new(&server, REPO, "write");
    let data = crate::support::random_bytes(MAX_XORB_DATA, 31);
    let mut body = Vec::with_capacity(MAX_XORB_DATA + 8 * 512);
    let mut chunks = Vec::new();
    for chunk in data.chunks(MAX_CHUNK_SIZE) {
        let header = ChunkHeader::new(CompressionScheme::None, chunk.len(), chunk.len());
        body.extend_from_slice(&header.to_bytes());
        body.extend_from_slice(chunk);
        chunks.push((chunk_hash(chunk), chunk.len() as u64));
    }
    assert!(body.len() > 64 * 1024 * 1024, "{}", body.len());
    let sent = body.len();
    let hash = xorb_hash(chunks).to_hex();
    let (status, answer) = json(cas.post_xorb_raw(&hash, body));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["was_inserted"], true);
    let stored = server.stored_objects("xorbs");
    assert_eq!(stored.len(), 1);
    assert!(stored[0].1.len() > sent, "stored with its footer");

    let path = format!("/v1/xorbs/default/{}", "0".repeat(64));
    let mut stream = raw_request(&server, "POST", &path, &cas.token, MAX_XORB_BODY + 1);
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
}
