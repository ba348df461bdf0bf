//! `--dedup-scope server|org|repo`: a writer of `org1/a` uploads a file; writers of `org2/b`
//! and `org1/c` then ask about it, reference it and upload it themselves, through every
//! route that could tell them another scope's content exists. What each learns is exactly
//! what its scope allows; honest uploads of the same content succeed in every scope.

use git_xet_core::shard::parse_shard;
use git_xet_core::MerkleHash;

use crate::common::*;
use crate::lfs::{basic_download, basic_upload};
use crate::support::TestServer;

/// Whether a writer of `other` may learn of `org1/a`'s content under `scope`.
fn sees(scope: &str, other: &str) -> bool {
    match scope {
        "server" => true,
        "org" => other.starts_with("org1/"),
        _ => false,
    }
}

/// An error body with every hex hash and request id replaced, to compare the answers about a
/// xorb another scope holds with those about one nobody holds.
fn without_hashes(text: &str, hashes: &[MerkleHash]) -> String {
    let mut out = text.to_string();
    for h in hashes {
        out = out.replace(&h.to_hex(), "<hash>");
    }
    without_request_ids(&out)
}

/// `text` with each request id (which every answer has its own of) as `<id>`: after
/// `request id ` and in `"request_id":"..."`.
fn without_request_ids(text: &str) -> String {
    let mut out = text.to_string();
    for marker in ["request id ", "\"request_id\":\""] {
        let mut from = 0;
        while let Some(at) = out[from..].find(marker) {
            let start = from + at + marker.len();
            let len = out[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.:".contains(c)))
                .unwrap_or(out.len() - start);
            out.replace_range(start..start + len, "<id>");
            from = start + "<id>".len();
        }
    }
    out
}

fn dedup_query(cas: &Cas, chunk: &MerkleHash) -> (u16, Vec<u8>) {
    let r = cas
        .http
        .get(format!("{}/v1/chunks/default/{chunk}", cas.base))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    (r.status().as_u16(), r.bytes().unwrap().to_vec())
}

fn grant(cas: &Cas, xorb: &MerkleHash) -> (u16, String) {
    let r = cas
        .http
        .post(format!("{}/v1/xorb-grants/default/{xorb}", cas.base))
        .bearer_auth(&cas.token)
        .send()
        .unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

fn scenario(scope: &str) {
    let server = TestServer::start_with(&["--dedup-scope", scope]);
    // About 40 chunks in xorbs of 16: runs long enough for the server's own dedup.
    let upload = Upload::random(2_600_000, 30, 16);
    let a = Cas::new(&server, "org1/a", "write");
    for x in &upload.xorbs {
        assert!(a.post_xorb(x), "{scope}: new to everyone");
    }
    assert_eq!(a.post_shard(&upload.shard), 1);
    let first_chunk = upload.xorbs[0].footer.chunk_hashes[0];
    let theirs: Vec<MerkleHash> = upload.xorbs.iter().map(|x| x.hash).collect();
    let nobodys = Upload::random(200_000, 31, 16);
    let nobodys_xorb = nobodys.xorbs[0].hash;
    let nobodys_chunk = nobodys.xorbs[0].footer.chunk_hashes[0];

    // Each writer's basic upload goes to a repository of a scope that has not uploaded the
    // content itself (org2 holds it once org2/b uploaded it in full).
    let mut converted_elsewhere = false;
    for (other, basic_repo) in [("org2/b", "org3/e"), ("org1/c", "org1/f")] {
        let visible = sees(scope, other);
        let what = format!("{scope}: {other}");
        let w = Cas::new(&server, other, "write");
        let mut hashes = theirs.clone();
        hashes.extend(nobodys.xorbs.iter().map(|x| x.hash));
        hashes.extend([first_chunk, nobodys_chunk]);
        let hide = |t: &str| without_hashes(t, &hashes);

        // (1) The dedup query for the file's first chunk.
        let (status, body) = dedup_query(&w, &first_chunk);
        if visible {
            assert_eq!(status, 200, "{what}");
            let answer = parse_shard(&body).unwrap().shard;
            let described: Vec<MerkleHash> = answer.xorbs.iter().map(|x| x.xorb_hash).collect();
            assert!(described.contains(&theirs[0]), "{what}: {described:?}");
        } else {
            let (none_status, none_body) = dedup_query(&w, &nobodys_chunk);
            assert_eq!((status, none_status), (404, 404), "{what}");
            assert_eq!(
                hide(&String::from_utf8_lossy(&body)),
                hide(&String::from_utf8_lossy(&none_body)),
                "{what}: a miss like a chunk stored nowhere"
            );
        }

        // (2) The upload grant for its first xorb.
        let (status, text) = grant(&w, &theirs[0]);
        if visible {
            assert_eq!(status, 200, "{what}: {text}");
        } else {
            let (none_status, none_text) = grant(&w, &nobodys_xorb);
            assert_eq!((status, none_status), (404, 404), "{what}: {text}");
            assert_eq!(hide(&text), hide(&none_text), "{what}");
        }

        // (4) A shard referencing the xorbs without uploading them.
        let r = w.post_shard_raw(upload.shard.to_upload_bytes());
        let (status, body) = json(r);
        if visible {
            assert_eq!(status, 200, "{what}: {body}");
        } else {
            assert_eq!(status, 400, "{what}: {body}");
            let text = reason(&body);
            assert!(
                theirs.iter().any(|x| text.contains(&x.to_hex())),
                "{what}: names the xorb: {text}"
            );
            assert!(text.contains("upload the xorb"), "{what}: {text}");
            let (_, none_body) = json(w.post_shard_raw(nobodys.shard.to_upload_bytes()));
            assert_eq!(
                hide(&text),
                hide(&reason(&none_body)),
                "{what}: refused like a xorb stored nowhere"
            );
        }

        // (3) Uploading the same xorbs: new to this scope unless it sees them; then the same
        // shard is accepted and the file downloads bit-exact.
        for x in &upload.xorbs {
            assert_eq!(w.post_xorb(x), !visible, "{what}: was_inserted");
        }
        w.post_shard(&upload.shard);
        assert!(w.download(&upload.file_hash, None) == upload.data, "{what}");

        // (5) A basic upload of the same content: the server's conversion reuses the xorbs
        // only where the scope may see them, and stores the content again elsewhere.
        let stored_before = server.metric("git_xet_stored_xorb_bytes");
        let token = server.token(basic_repo, "write");
        basic_upload(&server, basic_repo, &token, &upload.data);
        let added = server.metric("git_xet_stored_xorb_bytes") - stored_before;
        let reader = Cas::new(&server, basic_repo, "read");
        let (status, body) = dedup_query(&reader, &first_chunk);
        assert_eq!(status, 200, "{what}: its own upload is found in its scope");
        let described: Vec<MerkleHash> = parse_shard(&body)
            .unwrap()
            .shard
            .xorbs
            .iter()
            .map(|x| x.xorb_hash)
            .collect();
        let reused = described.iter().any(|x| theirs.contains(x));
        if sees(scope, basic_repo) {
            assert!(reused, "{what}: deduplicated against org1/a's xorbs");
            assert!(added < 100_000.0, "{what}: {added} bytes stored again");
        } else {
            assert!(!reused, "{what}: holds no xorb of org1/a: {described:?}");
            // New xorbs: stored the first time a scope converts this content (the next
            // conversion builds the same xorbs, which are then stored already).
            if !converted_elsewhere {
                assert!(added > 2_000_000.0, "{what}: stored again ({added} bytes)");
            }
            converted_elsewhere = true;
        }
        assert_eq!(
            basic_download(&server, basic_repo, &token, &upload.data),
            upload.data,
            "{what}"
        );
    }
    // The first writer's file is untouched by all of this.
    assert!(
        a.download(&upload.file_hash, None) == upload.data,
        "{scope}"
    );
}

#[test]
fn dedup_scope_server_shares_everything() {
    scenario("server");
}

#[test]
fn dedup_scope_org_shares_within_the_org_only() {
    scenario("org");
}

#[test]
fn dedup_scope_repo_shares_nothing_across_repositories() {
    scenario("repo");
}

/// Proof of possession is per scope: uploading a xorb makes it referenceable in the
/// uploader's scope, and a reader token of another scope still learns nothing.
#[test]
fn dedup_scope_repo_a_reader_of_another_repo_learns_nothing() {
    let server = TestServer::start_with(&["--dedup-scope", "repo"]);
    let upload = Upload::random(300_000, 32, 16);
    Cas::new(&server, "org1/a", "write").upload(&upload);
    let reader = Cas::new(&server, "org1/a2", "read");
    let (status, _) = dedup_query(&reader, &upload.xorbs[0].footer.chunk_hashes[0]);
    assert_eq!(status, 404);
    let (status, _) = dedup_query(
        &Cas::new(&server, "org1/a", "read"),
        &upload.xorbs[0].footer.chunk_hashes[0],
    );
    assert_eq!(status, 200, "its own repository finds it");
}

/// A scoped server hands each scope its own CAS URL (clients that key caches by endpoint,
/// like hf-xet, then keep one per scope), which serves the CAS API like the plain one; the
/// default server hands out the plain base URL.
#[test]
fn dedup_scope_cas_url_names_the_scope() {
    let cas_url = |server: &TestServer, repo: &str| -> String {
        let r = client()
            .get(format!(
                "{}/{repo}.git/info/lfs/xet-write-token",
                server.url
            ))
            .bearer_auth(server.token(repo, "write"))
            .send()
            .unwrap();
        let (status, v) = json(r);
        assert_eq!(status, 200, "{v}");
        v["casUrl"].as_str().unwrap().to_string()
    };
    let plain = TestServer::start();
    assert_eq!(cas_url(&plain, "org1/a"), plain.url.trim_end_matches('/'));
    for (scope, a, c) in [
        ("org", "/_scope/org1", "/_scope/org1"),
        ("repo", "/_scope/org1+a", "/_scope/org1+c"),
    ] {
        let server = TestServer::start_with(&["--dedup-scope", scope]);
        let base = server.url.trim_end_matches('/');
        assert_eq!(cas_url(&server, "org1/a"), format!("{base}{a}"), "{scope}");
        assert_eq!(cas_url(&server, "org1/c"), format!("{base}{c}"), "{scope}");
        let upload = Upload::random(300_000, 33, 16);
        let mut w = Cas::new(&server, "org1/a", "write");
        w.base = cas_url(&server, "org1/a");
        w.upload(&upload);
        assert!(
            w.download(&upload.file_hash, None) == upload.data,
            "{scope}"
        );
        let (status, _) = dedup_query(&w, &upload.xorbs[0].footer.chunk_hashes[0]);
        assert_eq!(status, 200, "{scope}");
        // Counted under the route's own label.
        assert!(
            server
                .metrics()
                .contains("route=\"shard_upload\",status=\"200\""),
            "{scope}"
        );
    }
}
