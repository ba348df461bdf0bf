//! The git-lfs Batch API as git-lfs speaks it: transfer negotiation, per-repository objects,
//! authentication and scopes, hostile paths, and the hook's missing-objects check. The
//! `basic` transfers themselves are in `lfs_basic`; the helpers here serve both.

use std::io::{Read, Write};

use reqwest::blocking::RequestBuilder;
use serde_json::{json, Value};

use crate::common::*;
use crate::support::{count_files, random_bytes, TestServer};

pub(crate) const LFS: &str = "application/vnd.git-lfs+json";

pub(crate) fn lfs_url(server: &TestServer, repo: &str, rest: &str) -> String {
    format!("{}/{repo}.git/info/lfs/{rest}", server.url)
}

pub(crate) fn batch(
    server: &TestServer,
    repo: &str,
    token: Option<&str>,
    operation: &str,
    transfers: &[&str],
    objects: &[(&str, u64)],
) -> (u16, Value) {
    let objects: Vec<Value> = objects
        .iter()
        .map(|(oid, size)| json!({"oid": oid, "size": size}))
        .collect();
    let body = json!({"operation": operation, "transfers": transfers, "objects": objects, "hash_algo": "sha256"});
    let mut req = client()
        .post(lfs_url(server, repo, "objects/batch"))
        .header("Accept", LFS)
        .header("Content-Type", LFS)
        .body(body.to_string());
    if let Some(t) = token {
        req = req.basic_auth("anyone", Some(t));
    }
    json(req.send().unwrap())
}

/// Applies an action's headers to a request.
pub(crate) fn with_headers(mut req: RequestBuilder, action: &Value) -> RequestBuilder {
    if let Some(h) = action["header"].as_object() {
        for (k, v) in h {
            req = req.header(k, v.as_str().unwrap());
        }
    }
    req
}

/// Uploads `data` with the basic transfer as git-lfs would; returns the batch answer.
pub(crate) fn basic_upload(server: &TestServer, repo: &str, token: &str, data: &[u8]) -> Value {
    let oid = sha256_hex(data);
    let (status, answer) = batch(
        server,
        repo,
        Some(token),
        "upload",
        &["basic"],
        &[(&oid, data.len() as u64)],
    );
    assert_eq!(status, 200, "{answer}");
    let object = &answer["objects"][0];
    if let Some(upload) = object["actions"].get("upload") {
        let r = with_headers(client().put(upload["href"].as_str().unwrap()), upload)
            .body(data.to_vec())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
        let verify = &object["actions"]["verify"];
        let r = with_headers(client().post(verify["href"].as_str().unwrap()), verify)
            .body(json!({"oid": oid, "size": data.len()}).to_string())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "verify");
    }
    answer
}

pub(crate) fn basic_download(server: &TestServer, repo: &str, token: &str, data: &[u8]) -> Vec<u8> {
    let oid = sha256_hex(data);
    let (status, answer) = batch(
        server,
        repo,
        Some(token),
        "download",
        &["basic"],
        &[(&oid, data.len() as u64)],
    );
    assert_eq!(status, 200);
    let action = &answer["objects"][0]["actions"]["download"];
    let r = with_headers(client().get(action["href"].as_str().unwrap()), action)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().unwrap().to_vec()
}

#[test]
fn xet_is_offered_with_the_handshake_headers() {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let up = Upload::random(500_000, 52, 1000);
    let oid = sha256_hex(&up.data);
    let size = up.data.len() as u64;

    let (status, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "upload",
        &["basic", "xet"],
        &[(&oid, size)],
    );
    assert_eq!(status, 200);
    assert_eq!(answer["transfer"], "xet");
    let action = &answer["objects"][0]["actions"]["upload"];
    let href = action["href"].as_str().unwrap();
    assert_eq!(href, lfs_url(&server, "org/model", "xet-write-token"));
    let h = &action["header"];
    assert_eq!(h["X-Xet-Cas-Url"], server.url.as_str());
    let exp: u64 = h["X-Xet-Token-Expiration"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(exp > now + 60);
    assert!(!h["X-Xet-Session-Id"].as_str().unwrap().is_empty());
    // The CAS token from the handshake uploads (xorbs, then shard with sha256 metadata).
    let cas = Cas::with_token(&server, h["X-Xet-Access-Token"].as_str().unwrap());
    cas.upload(&up);
    // The refresh route answers for the same credentials.
    let (status, refreshed) = json(
        client()
            .get(href)
            .basic_auth("x", Some(&token))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(refreshed["casUrl"], server.url.as_str());
    assert!(refreshed["exp"].as_u64().unwrap() > now);
    let refreshed_cas = Cas::with_token(&server, refreshed["accessToken"].as_str().unwrap());
    // No verify action: registering the shard is what completes an xet upload. The object
    // is now in the repository, as the download batch below shows.
    assert!(
        answer["objects"][0]["actions"].get("verify").is_none(),
        "{answer}"
    );

    let (_, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "download",
        &["xet", "xet-download"],
        &[(&oid, size)],
    );
    assert_eq!(answer["transfer"], "xet");
    let action = &answer["objects"][0]["actions"]["download"];
    assert_eq!(
        action["href"],
        lfs_url(&server, "org/model", "xet-read-token")
    );
    assert_eq!(
        action["header"]["X-Xet-Hash"],
        up.file_hash.to_hex().as_str()
    );
    assert_eq!(refreshed_cas.download(&up.file_hash, None), up.data);
    // Nothing to upload once present. With nothing to move, `basic` is named when the client
    // offers it, so git-lfs starts no agent processes; `xet` still when it is all there is.
    for (transfers, named) in [
        (&["xet"][..], "xet"),
        (&["xet", "basic"][..], "basic"),
        (&[][..], "basic"),
    ] {
        let (_, answer) = batch(
            &server,
            "org/model",
            Some(&token),
            "upload",
            transfers,
            &[(&oid, size)],
        );
        assert!(answer["objects"][0].get("actions").is_none(), "{answer}");
        assert_eq!(answer["transfer"], named, "{transfers:?}");
    }
    // A download batch names xet even with nothing to move: clients ask which transfer the
    // server offers that way.
    let (_, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "download",
        &["basic", "xet", "xet-download"],
        &[(&sha256_hex(b"missing"), 7)],
    );
    assert_eq!(answer["transfer"], "xet", "{answer}");
    // One object to move among present ones: xet again.
    let (_, answer) = batch(
        &server,
        "org/model",
        Some(&token),
        "upload",
        &["xet", "basic"],
        &[(&oid, size), (&sha256_hex(b"new"), 3)],
    );
    assert_eq!(answer["transfer"], "xet");
    assert!(answer["objects"][0].get("actions").is_none(), "{answer}");
    assert!(
        answer["objects"][1]["actions"]["upload"].is_object(),
        "{answer}"
    );

    // A read token refreshes read tokens only.
    let read = server.token("org/model", "read");
    assert_eq!(
        client()
            .get(href)
            .bearer_auth(&read)
            .send()
            .unwrap()
            .status(),
        403
    );
    // --basic-only never offers xet.
    let plain = TestServer::start_with(&["--basic-only"]);
    let t = plain.token("org/model", "write");
    let (_, answer) = batch(
        &plain,
        "org/model",
        Some(&t),
        "upload",
        &["xet", "basic"],
        &[(&oid, size)],
    );
    assert_eq!(answer["transfer"], "basic");
    let href = answer["objects"][0]["actions"]["upload"]["href"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(href.contains(&format!("/objects/{oid}?")), "{href}");
    // The href carries its grant (huggingface_hub PUTs to it without the action's header):
    // a changed grant is refused, the href as given accepted.
    let put = |url: &str| {
        let r = client().put(url).body(up.data.clone()).send().unwrap();
        r.status().as_u16()
    };
    assert_eq!(put(&href.replace("expires=", "expires=9")), 403);
    assert_eq!(put(&href.replace(&oid, &"0".repeat(64))), 403);
    assert_eq!(put(&href), 200);
}

#[test]
fn objects_exist_per_repository() {
    let server = TestServer::start();
    let a = server.token("org/a", "write");
    let b = server.token("org/b", "write");
    let data = random_bytes(400_000, 53);
    let oid = sha256_hex(&data);
    basic_upload(&server, "org/a", &a, &data);
    let (_, answer) = batch(
        &server,
        "org/b",
        Some(&b),
        "download",
        &["basic"],
        &[(&oid, data.len() as u64)],
    );
    assert_eq!(answer["objects"][0]["error"]["code"], 404, "{answer}");
    let r = client()
        .get(lfs_url(&server, "org/b", &format!("objects/{oid}")))
        .bearer_auth(&b)
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
    let xorbs = server.metric("git_xet_stored_xorbs");
    // Uploading the same bytes to b proves possession: visible there, nothing stored twice.
    basic_upload(&server, "org/b", &b, &data);
    assert_eq!(server.metric("git_xet_stored_xorbs"), xorbs);
    assert_eq!(basic_download(&server, "org/b", &b, &data), data);
    // Unknown and malformed objects are per-object errors.
    let (status, answer) = batch(
        &server,
        "org/a",
        Some(&a),
        "download",
        &["basic"],
        &[(&"0".repeat(64), 5), ("xyz", 1)],
    );
    assert_eq!(status, 200);
    assert_eq!(answer["objects"][0]["error"]["code"], 404);
    assert_eq!(answer["objects"][1]["error"]["code"], 422);
}

#[test]
fn batch_bodies_are_checked_and_answered_in_git_lfs_shape() {
    let server = TestServer::start();
    let token = server.token("org/shape", "write");
    let post = |body: &str| {
        json(
            client()
                .post(lfs_url(&server, "org/shape", "objects/batch"))
                .header("Accept", LFS)
                .header("Content-Type", LFS)
                .basic_auth("anyone", Some(&token))
                .body(body.to_string())
                .send()
                .unwrap(),
        )
    };
    // Bad requests are refused as a whole, with a message that names the fault.
    for (body, status, says) in [
        ("{", 400, "malformed batch request"),
        (
            r#"{"operation":"delete","objects":[]}"#,
            400,
            r#"unknown operation \"delete\""#,
        ),
        (r#"{"operation":"upload"}"#, 400, "missing field `objects`"),
        (
            r#"{"operation":"upload","objects":[{"oid":"ab","size":"1"}]}"#,
            400,
            "invalid type",
        ),
        (
            r#"{"operation":"upload","objects":[],"hash_algo":"sha1"}"#,
            409,
            "sha256",
        ),
    ] {
        let (got, answer) = post(body);
        assert_eq!(got, status, "{body}: {answer}");
        assert!(answer.to_string().contains(says), "{body}: {answer}");
    }
    // The documented request with its `ref` (and a `null` one) is served; a negative size
    // is a per-object error.
    let data = random_bytes(1000, 7);
    let oid = sha256_hex(&data);
    let documented = json!({
        "operation": "upload",
        "transfers": ["basic"],
        "ref": {"name": "refs/heads/main"},
        "objects": [{"oid": oid, "size": 1000}, {"oid": "0".repeat(64), "size": -1}],
        "hash_algo": "sha256",
    });
    let (status, answer) = post(&documented.to_string());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["objects"][1]["error"]["code"], 422, "{answer}");
    let mut with_null_ref = documented.clone();
    with_null_ref["ref"] = Value::Null;
    assert_eq!(post(&with_null_ref.to_string()).0, 200);
    // An object the server has: no `actions` key at all, and nothing written as `null`.
    basic_upload(&server, "org/shape", &token, &data);
    let response = client()
        .post(lfs_url(&server, "org/shape", "objects/batch"))
        .header("Accept", LFS)
        .header("Content-Type", LFS)
        .basic_auth("anyone", Some(&token))
        .body(documented.to_string())
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().unwrap();
    assert!(
        text.starts_with(&format!(
            r#"{{"transfer":"basic","objects":[{{"oid":"{oid}","size":1000}},"#
        )),
        "{text}"
    );
    assert!(text.ends_with(r#"],"hash_algo":"sha256"}"#), "{text}");
    assert!(
        !text.contains("null") && !text.contains("expires_at"),
        "{text}"
    );
}

#[test]
fn lfs_authentication_and_scopes() {
    let server = TestServer::start();
    let oid = "a".repeat(64);
    let r = client()
        .post(lfs_url(&server, "org/model", "objects/batch"))
        .body(json!({"operation": "download", "objects": []}).to_string())
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["lfs-authenticate"], "Basic realm=\"git-xet\"");
    let read = server.token("org/model", "read");
    let (status, _) = batch(
        &server,
        "org/model",
        Some(&read),
        "upload",
        &["basic"],
        &[(&oid, 1)],
    );
    assert_eq!(status, 403, "read token cannot upload");
    let (status, _) = batch(
        &server,
        "org/model",
        Some(&read),
        "download",
        &["basic"],
        &[(&oid, 1)],
    );
    assert_eq!(status, 200, "read token downloads");
    let other = server.token("org/other", "write");
    let (status, v) = batch(
        &server,
        "org/model",
        Some(&other),
        "download",
        &["basic"],
        &[(&oid, 1)],
    );
    assert_eq!(status, 404, "token for another repository: {v}");
    let expired = server.expired_token("org/model", "write");
    assert_eq!(
        batch(&server, "org/model", Some(&expired), "download", &[], &[]).0,
        401
    );
    let (status, v) = batch(&server, "org/model", Some(&read), "delete", &[], &[]);
    assert_eq!(status, 400, "{v}");
    let r = client()
        .post(lfs_url(&server, "org/model", "objects/batch"))
        .bearer_auth(&read)
        .body(json!({"operation": "download", "objects": [], "hash_algo": "sha512"}).to_string())
        .send()
        .unwrap();
    assert_eq!(r.status(), 409, "unsupported hash algorithm");
    let r = client()
        .post(lfs_url(&server, "org/model", "objects/batch"))
        .bearer_auth(&read)
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], LFS);
    // verify: unknown object, wrong size
    let verify = |oid: &str, size: u64| {
        client()
            .post(lfs_url(&server, "org/model", "verify"))
            .bearer_auth(&read)
            .body(json!({"oid": oid, "size": size}).to_string())
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(verify(&oid, 1), 404);
    let write = server.token("org/model", "write");
    let data = random_bytes(1000, 57);
    basic_upload(&server, "org/model", &write, &data);
    assert_eq!(verify(&sha256_hex(&data), 999), 409);
    assert_eq!(verify(&sha256_hex(&data), 1000), 200);
    // Lock verification needs a credential (tests/server/locks.rs has the rest).
    let r = client()
        .post(lfs_url(&server, "org/model", "locks/verify"))
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);

    let anonymous = TestServer::start_with(&["--anonymous-read"]);
    // Anonymous reads reach the repositories the server hosts (a missing one answers as a
    // private one: tests/server/oracle.rs).
    let r = client()
        .post(format!("{}/api/repos/create", anonymous.url))
        .bearer_auth(anonymous.token("org/model", "write"))
        .json(&json!({ "name": "model", "organization": "org" }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, _) = batch(
        &anonymous,
        "org/model",
        None,
        "download",
        &["basic"],
        &[(&oid, 1)],
    );
    assert_eq!(status, 200, "anonymous read");
    let (status, _) = batch(
        &anonymous,
        "org/model",
        None,
        "upload",
        &["basic"],
        &[(&oid, 1)],
    );
    assert_eq!(status, 401, "anonymous write");
}

#[test]
fn hostile_repository_paths_are_refused() {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let paths = [
        "/../outside.git/info/lfs/objects/batch",
        "/org/../../outside.git/info/refs?service=git-receive-pack",
        "/%2e%2e/outside.git/info/refs?service=git-receive-pack",
        "/.hidden.git/info/refs?service=git-receive-pack",
        "/a/b/c.git/info/refs?service=git-receive-pack",
        "/org/-rf.git/info/refs?service=git-receive-pack",
        "//abs.git/info/refs?service=git-receive-pack",
    ];
    for path in paths {
        let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
        let method = if path.contains("batch") {
            "POST"
        } else {
            "GET"
        };
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(
            response.starts_with("HTTP/1.1 400"),
            "{path}: {}",
            response.lines().next().unwrap_or("")
        );
    }
    let parent = server.data.parent().unwrap();
    assert!(!parent.join("outside.git").exists());
    assert_eq!(
        count_files(&server.data.join("repos")),
        0,
        "no repository created"
    );
}

#[test]
fn hook_check_lists_missing_objects() {
    let server = TestServer::start();
    let token = server.token("org/model", "write");
    let data = random_bytes(100_000, 56);
    basic_upload(&server, "org/model", &token, &data);
    let present = sha256_hex(&data);
    let absent = "b".repeat(64);
    let body = format!("{present} {}\n{absent} 42\n{present} 5\n", data.len());
    let url = format!("{}/org/model.git/info/xet/missing-objects", server.url);
    let r = client()
        .post(&url)
        .bearer_auth(&token)
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().unwrap(), format!("{absent} 42\n{present} 5\n"));
    assert_eq!(
        client()
            .post(&url)
            .bearer_auth(&token)
            .body("nonsense 1\n")
            .send()
            .unwrap()
            .status(),
        400
    );
    assert_eq!(client().post(&url).body("").send().unwrap().status(), 401);
}
