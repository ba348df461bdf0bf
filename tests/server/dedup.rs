//! GET /v1/chunks/default-merkledb/{chunk}: global dedup answers with keyed chunk hashes.

use std::io::Cursor;

use git_xet_core::hash::{chunk_hash, is_global_dedup_eligible, keyed_chunk_hash};
use git_xet_core::shard::{parse_shard, Shard, ShardFile};
use git_xet_core::xorb::XorbBuilder;
use git_xet_core::MerkleHash;

use crate::common::*;
use crate::support::TestServer;

fn query(cas: &Cas, chunk: &MerkleHash) -> (u16, Vec<u8>) {
    let r = cas
        .http
        .get(format!("{}/v1/chunks/default-merkledb/{chunk}", cas.base))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    (r.status().as_u16(), r.bytes().unwrap().to_vec())
}

/// Small chunk payloads: one whose hash passes the 1-in-1024 rule, and two that do not.
fn chunk_payloads() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut eligible = None;
    let mut plain = Vec::new();
    for i in 0u32.. {
        let data = format!("chunk payload {i}").into_bytes();
        if is_global_dedup_eligible(&chunk_hash(&data), false) {
            eligible.get_or_insert(data);
        } else if plain.len() < 2 {
            plain.push(data);
        }
        if eligible.is_some() && plain.len() == 2 {
            break;
        }
    }
    (eligible.unwrap(), plain.remove(0), plain.remove(0))
}

#[test]
fn eligible_chunks_are_answered_with_keyed_hashes() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let (eligible, first, plain) = chunk_payloads();
    // A file of three chunks: first, eligible-by-hash, plain.
    let mut builder = XorbBuilder::new();
    let hashes: Vec<MerkleHash> = [&first, &eligible, &plain]
        .iter()
        .map(|d| builder.push_data(d).unwrap())
        .collect();
    let xorb = builder.finish();
    let mut data = first.clone();
    data.extend_from_slice(&eligible);
    data.extend_from_slice(&plain);
    let file = file_info(&data, &[&xorb]);
    cas.post_xorb(&xorb);
    let (status, _) = query(&cas, &hashes[0]);
    assert_eq!(
        status, 404,
        "the first chunk is not eligible until its file is registered"
    );
    cas.post_shard(&Shard {
        files: vec![file],
        xorbs: vec![block(&xorb)],
    });

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (what, chunk) in [
        ("first chunk of a file", hashes[0]),
        ("hash rule", hashes[1]),
    ] {
        let (status, body) = query(&cas, &chunk);
        assert_eq!(status, 200, "{what}");
        let parsed = parse_shard(&body).unwrap();
        assert!(parsed.shard.files.is_empty(), "{what}: no file section");
        assert!(
            parsed.lookup_problems().is_empty(),
            "{what}: {:?}",
            parsed.lookup_problems()
        );
        let footer = parsed.footer.unwrap();
        let key = footer.chunk_hash_key;
        assert_ne!(key, MerkleHash::ZERO, "{what}: keyed");
        assert!(footer.key_expiry > now, "{what}: expiry in the future");
        let block = &parsed.shard.xorbs[0];
        assert_eq!(block.xorb_hash, xorb.hash);
        let stored: Vec<MerkleHash> = block.chunks.iter().map(|c| c.chunk_hash).collect();
        assert_eq!(
            stored,
            hashes
                .iter()
                .map(|h| keyed_chunk_hash(&key, h))
                .collect::<Vec<_>>(),
            "{what}"
        );
        assert!(
            !stored.contains(&chunk),
            "{what}: raw hashes never revealed"
        );
        // A client holding the chunk finds it through the shard's own lookup.
        let mut reader = ShardFile::open(Cursor::new(body)).unwrap();
        assert_eq!(
            reader.chunk(&chunk).unwrap(),
            vec![(
                xorb.hash,
                hashes.iter().position(|h| *h == chunk).unwrap() as u32
            )]
        );
    }
    let (status, _) = query(&cas, &hashes[2]);
    assert_eq!(status, 404, "stored but not eligible");
    let (status, _) = query(&cas, &MerkleHash::from_bytes([0; 32]));
    assert_eq!(status, 404, "unknown chunk");
    assert_eq!(server.metric("git_xet_dedup_queries_total"), 5.0);
    let r = client()
        .get(format!(
            "{}/v1/chunks/default-merkledb/{}",
            server.url, hashes[0]
        ))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[test]
fn first_chunk_answer_describes_the_files_xorbs() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(800_000, 30, 4);
    assert!(up.xorbs.len() >= 3);
    cas.upload(&up);
    let first = chunks_of(&up.data)[0].hash;
    let (status, body) = query(&cas, &first);
    assert_eq!(status, 200);
    let parsed = parse_shard(&body).unwrap();
    let mut got: Vec<MerkleHash> = parsed.shard.xorbs.iter().map(|x| x.xorb_hash).collect();
    let mut want: Vec<MerkleHash> = up.xorbs.iter().map(|x| x.hash).collect();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "every xorb of the file, so a re-upload can match it all"
    );
}

#[test]
fn dedup_query_errors() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "read");
    let get = |path: &str| {
        cas.http
            .get(format!("{}{path}", server.url))
            .bearer_auth(&cas.token)
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(get("/v1/chunks/default-merkledb/zzz"), 400);
    assert_eq!(get(&format!("/v1/chunks/other/{}", "0".repeat(64))), 404);
    assert_eq!(
        get(&format!(
            "/api/v1/chunks/default-merkledb/{}",
            "0".repeat(64)
        )),
        404
    );
}
