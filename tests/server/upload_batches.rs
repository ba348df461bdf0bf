//! `GET /v1/upload-batches/{session}` (cas/upload_batches.rs): the objects an upload Batch
//! API answer gave `xet` actions, for the agent that reads ahead of git-lfs.

use crate::common::{client, sha256_hex};
use crate::lfs::{batch, with_headers};
use crate::support::{random_bytes, TestServer};
use serde_json::{json, Value};

/// An upload Batch API answer on `repo`: its session id, CAS URL and CAS token.
fn upload_answer(
    server: &TestServer,
    repo: &str,
    asked: &[(&str, u64)],
) -> (String, String, String) {
    let token = server.token(repo, "write");
    let (status, answer) = batch(
        server,
        repo,
        Some(&token),
        "upload",
        &["basic", "xet"],
        asked,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["transfer"], "xet", "{answer}");
    let header = answer["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|o| o["actions"]["upload"]["header"].as_object().cloned())
        .expect("an upload action");
    let text = |name: &str| header[name].as_str().unwrap().to_string();
    (
        text("X-Xet-Session-Id"),
        text("X-Xet-Cas-Url"),
        text("X-Xet-Access-Token"),
    )
}

fn announced(cas_url: &str, session: &str, token: &str) -> (u16, Value) {
    let r = client()
        .get(format!("{cas_url}/v1/upload-batches/{session}"))
        .bearer_auth(token)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

#[test]
fn an_upload_answer_lists_its_objects_to_its_own_repository_only() {
    let server = TestServer::start();
    let (a, b) = (random_bytes(3000, 61), random_bytes(4000, 62));
    let (oid_a, oid_b) = (sha256_hex(&a), sha256_hex(&b));
    // A malformed oid gets an error in the answer, not an action: not listed.
    let bad = "z".repeat(64);
    let asked = [
        (oid_a.as_str(), 3000),
        (oid_b.as_str(), 4000),
        (bad.as_str(), 5),
    ];
    let (session, cas_url, token) = upload_answer(&server, "org/ahead", &asked);
    let (status, answer) = announced(&cas_url, &session, &token);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"objects": [{"oid": oid_a, "size": 3000}, {"oid": oid_b, "size": 4000}]})
    );

    // A CAS token of another repository: as if there were no such answer.
    let (_, _, other) = upload_answer(&server, "org/elsewhere", &asked[..1]);
    let (status, answer) = announced(&cas_url, &session, &other);
    assert_eq!(status, 404, "{answer}");
    assert!(answer.get("objects").is_none(), "{answer}");
    // No token, or a user's token of the repository instead of a CAS token: refused.
    let r = client()
        .get(format!("{cas_url}/v1/upload-batches/{session}"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    // An unknown session, and one that is not a session id at all.
    for unknown in ["0123456789abcdef0123456789abcdef", "..%2F..%2Fetc"] {
        let (status, answer) = announced(&cas_url, unknown, &token);
        assert_eq!(status, 404, "{unknown}: {answer}");
    }
    // A download answer is not kept.
    let (status, answer) = batch(
        &server,
        "org/ahead",
        Some(&server.token("org/ahead", "read")),
        "download",
        &["xet", "xet-download"],
        &asked[..1],
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer["objects"][0]["actions"].get("download").is_none());
}

/// The same list goes with the answer itself, on its first upload actions only (saving the
/// agents' coordinator the round trip of asking): every object given an upload action, none
/// already stored nor refused; a one-object answer carries none.
#[test]
fn an_upload_answer_carries_its_list_on_its_first_actions() {
    let server = TestServer::start();
    let repo = "org/carried";
    let token = server.token(repo, "write");
    let blobs: Vec<Vec<u8>> = (0..7)
        .map(|i| random_bytes(1000 + i, 70 + i as u64))
        .collect();
    let oids: Vec<String> = blobs.iter().map(|b| sha256_hex(b)).collect();
    // The first object is stored already: no action, not listed.
    let (status, answer) = batch(
        &server,
        repo,
        Some(&token),
        "upload",
        &["basic"],
        &[(&oids[0], 1000)],
    );
    assert_eq!(status, 200, "{answer}");
    let action = &answer["objects"][0]["actions"]["upload"];
    let put = client().put(action["href"].as_str().unwrap());
    let r = with_headers(put, action)
        .body(blobs[0].clone())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());

    let bad = "z".repeat(64);
    let mut asked: Vec<(&str, u64)> = oids
        .iter()
        .zip(&blobs)
        .map(|(o, b)| (o.as_str(), b.len() as u64))
        .collect();
    asked.insert(2, (bad.as_str(), 5));
    let (status, answer) = batch(
        &server,
        repo,
        Some(&token),
        "upload",
        &["basic", "xet"],
        &asked,
    );
    assert_eq!(status, 200, "{answer}");
    let expected: Vec<String> = oids[1..]
        .iter()
        .zip(&blobs[1..])
        .map(|(o, b)| format!("{o}:{}", b.len()))
        .collect();
    let carried: Vec<Option<&str>> = answer["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["actions"]["upload"]["header"].as_object())
        .map(|h| h.get("X-Xet-Upload-Objects").and_then(Value::as_str))
        .collect();
    assert_eq!(carried.len(), 6, "{answer}");
    let list = expected.join(" ");
    assert_eq!(carried[..4], [Some(list.as_str()); 4], "{answer}");
    assert_eq!(carried[4..], [None, None], "{answer}");

    let (status, answer) = batch(
        &server,
        repo,
        Some(&token),
        "upload",
        &["basic", "xet"],
        &asked[1..2],
    );
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["objects"][0]["actions"]["upload"]["header"]
            .get("X-Xet-Upload-Objects")
            .is_none(),
        "{answer}"
    );
}
