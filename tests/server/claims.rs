//! A shard's sha256 claim is checked lazily: the first whole basic download (or verify)
//! through it hashes the content; a false claim is dropped and its download fails, a true
//! one is recorded. `check --read-data` verifies every claim.

use git_xet_core::hash::sha256_as_merkle;

use crate::common::*;
use crate::lfs::{batch, lfs_url};
use crate::support::{git_xet, random_bytes, TestServer};

/// Uploads content E to `repo` through a shard claiming it has sha256(`claimed`).
fn forge(server: &TestServer, repo: &str, claimed: &[u8], seed: u64) -> Upload {
    let cas = Cas::new(server, repo, "write");
    let mut fake = Upload::random(claimed.len(), seed, 4);
    fake.shard.files[0].sha256 = Some(sha256_as_merkle(&sha256(claimed)));
    cas.upload(&fake);
    fake
}

fn get(server: &TestServer, repo: &str, token: &str, oid: &str) -> reqwest::blocking::Response {
    client()
        .get(lfs_url(server, repo, &format!("objects/{oid}")))
        .bearer_auth(token)
        .send()
        .unwrap()
}

fn verify(server: &TestServer, repo: &str, token: &str, oid: &str, size: usize) -> u16 {
    client()
        .post(lfs_url(server, repo, "verify"))
        .bearer_auth(token)
        .header("Content-Type", "application/vnd.git-lfs+json")
        .body(serde_json::json!({"oid": oid, "size": size}).to_string())
        .send()
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn a_false_sha256_claim_is_dropped_on_first_download_and_a_true_one_recorded() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let victim = random_bytes(300_000, 2501);
    let oid = sha256_hex(&victim);

    // check --read-data finds the lie before anyone downloads.
    let _ = forge(&server, "evil/c", &victim, 2504);
    let out = git_xet()
        .args(["server", "check", "--read-data", "--data"])
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("repository evil/c claims sha256 {oid}")),
        "{err}"
    );

    // A whole download through the false claim never delivers a complete body.
    let fake = forge(&server, "evil/a", &victim, 2502);
    let token = server.token("evil/a", "read");
    // The server aborts the response when the hash comes out wrong: before its headers
    // left (the request fails) or mid-body (the body is short), depending on timing.
    let sent = client()
        .get(lfs_url(&server, "evil/a", &format!("objects/{oid}")))
        .bearer_auth(&token)
        .send();
    let body = sent.and_then(|r| r.bytes());
    assert!(
        body.as_ref().map_or(true, |b| b.len() < fake.data.len()),
        "the forged content was served whole"
    );
    // The claim is gone: the object is absent there now.
    assert_eq!(get(&server, "evil/a", &token, &oid).status(), 404);
    assert_eq!(verify(&server, "evil/a", &token, &oid, victim.len()), 404);
    let (status, answer) = batch(
        &server,
        "evil/a",
        Some(&token),
        "download",
        &["basic"],
        &[(&oid, victim.len() as u64)],
    );
    assert_eq!(status, 200);
    assert_eq!(answer["objects"][0]["error"]["code"], 404, "{answer}");
    assert!(
        server.log_text().contains("claim was false"),
        "the lie is logged"
    );

    // Another repository's claim for the same file is now known false and dropped at once;
    // verify alone (no download first) checks a claim too.
    let _ = forge(&server, "evil/b", &victim, 2502);
    let token_b = server.token("evil/b", "read");
    assert_eq!(verify(&server, "evil/b", &token_b, &oid, victim.len()), 404);
    assert_eq!(get(&server, "evil/b", &token_b, &oid).status(), 404);
    let _ = forge(&server, "evil/d", &victim, 2505);
    let token_d = server.token("evil/d", "read");
    assert_eq!(verify(&server, "evil/d", &token_d, &oid, victim.len()), 404);
    assert_eq!(get(&server, "evil/d", &token_d, &oid).status(), 404);

    // A range through an unverified false claim is refused too (the whole file is hashed
    // first), and the victim's own upload of the real content is then asked for and served.
    let _ = forge(&server, "org/victim", &victim, 2506);
    let token_v = server.token("org/victim", "write");
    let r = client()
        .get(lfs_url(&server, "org/victim", &format!("objects/{oid}")))
        .bearer_auth(&token_v)
        .header("Range", "bytes=0-9")
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
    let answer = crate::lfs::basic_upload(&server, "org/victim", &token_v, &victim);
    assert!(
        answer["objects"][0]["actions"].get("upload").is_some(),
        "the real content is asked for: {answer}"
    );
    let r = get(&server, "org/victim", &token_v, &oid);
    assert_eq!(r.status(), 200);
    assert!(r.bytes().unwrap() == victim, "the victim's own bytes");

    // A true claim: served whole, recorded, and served again (also by range).
    let honest = Cas::new(&server, "org/ok", "write");
    let up = Upload::random(300_000, 2503, 4);
    honest.upload(&up);
    let token = server.token("org/ok", "read");
    let good = sha256_hex(&up.data);
    for _ in 0..2 {
        let r = get(&server, "org/ok", &token, &good);
        assert_eq!(r.status(), 200);
        assert!(r.bytes().unwrap() == up.data, "the true content, whole");
    }
    assert_eq!(verify(&server, "org/ok", &token, &good, up.data.len()), 200);
}
