//! Requests about many objects at once, as a push of many small files makes them: the
//! Batch API (100 objects per request from git-lfs) and the pre-receive hook's
//! missing-objects check (every object of the push), both looked up in the index in
//! batches rather than object by object.

use crate::common::*;
use crate::lfs::{basic_upload, batch};
use crate::support::{random_bytes, TestServer};

/// A batch of many objects (looked up together in the index) answers each object as one
/// lookup would, in request order: this repository's objects are present, another
/// repository's are not, and bad objects are per-object errors.
#[test]
fn a_batch_of_many_objects_is_answered_object_by_object() {
    let server = TestServer::start();
    let a = server.token("org/many-a", "write");
    let b = server.token("org/many-b", "write");
    let ours: Vec<Vec<u8>> = (0..3)
        .map(|i| random_bytes(3000 + i, 90 + i as u64))
        .collect();
    for data in &ours {
        basic_upload(&server, "org/many-a", &a, data);
    }
    let theirs = random_bytes(5000, 99);
    basic_upload(&server, "org/many-b", &b, &theirs);
    let (their_oid, absent) = (sha256_hex(&theirs), "c".repeat(64));
    let mut objects: Vec<(String, u64)> = Vec::new();
    for i in 0..30 {
        let data = &ours[i % 3];
        objects.push((sha256_hex(data), data.len() as u64));
        objects.push((their_oid.clone(), theirs.len() as u64));
        objects.push((absent.clone(), 7));
        objects.push((sha256_hex(data), 1)); // stored with another size
    }
    objects.push(("xyz".into(), 1));
    let asked: Vec<(&str, u64)> = objects.iter().map(|(o, s)| (o.as_str(), *s)).collect();
    let (status, answer) = batch(
        &server,
        "org/many-a",
        Some(&a),
        "upload",
        &["basic"],
        &asked,
    );
    assert_eq!(status, 200, "{answer}");
    let answers = answer["objects"].as_array().unwrap();
    assert_eq!(answers.len(), asked.len());
    for (i, (object, (oid, _))) in answers.iter().zip(&asked).enumerate() {
        assert_eq!(object["oid"], *oid, "{i}");
        let what = match (i % 4, i == asked.len() - 1) {
            (_, true) => "invalid",
            (0, _) => "present",
            (1 | 2, _) => "missing",
            _ => "other size",
        };
        match what {
            "present" => assert!(object.get("actions").is_none(), "{i}: {object}"),
            "missing" => assert!(object["actions"].get("upload").is_some(), "{i}: {object}"),
            _ => assert_eq!(object["error"]["code"], 422, "{i}: {object}"),
        }
    }
    // Downloads: another repository's object is not found here.
    let (_, answer) = batch(
        &server,
        "org/many-a",
        Some(&a),
        "download",
        &["basic"],
        &asked,
    );
    assert!(
        answer["objects"][0]["actions"]["download"].is_object(),
        "{answer}"
    );
    assert_eq!(answer["objects"][1]["error"]["code"], 404, "{answer}");
    // A token of another repository gets no answer about these objects at all.
    let (status, answer) = batch(
        &server,
        "org/many-a",
        Some(&b),
        "upload",
        &["basic"],
        &asked,
    );
    assert_eq!(status, 404, "{answer}");
    assert!(answer.get("objects").is_none(), "{answer}");
}

/// The hook's check of a push of thousands of objects (looked up in parts): every object
/// is answered, in order.
#[test]
fn missing_objects_of_thousands_of_objects() {
    let server = TestServer::start();
    let token = server.token("org/thousands", "write");
    let data = random_bytes(10_000, 57);
    basic_upload(&server, "org/thousands", &token, &data);
    let present = sha256_hex(&data);
    let mut body = String::new();
    let mut expected = String::new();
    for i in 0..2500 {
        if i % 500 == 499 {
            body.push_str(&format!("{present} {}\n", data.len()));
        } else {
            let oid = format!("{i:064x}");
            body.push_str(&format!("{oid} {i}\n"));
            expected.push_str(&format!("{oid} {i}\n"));
        }
    }
    let r = client()
        .post(format!(
            "{}/org/thousands.git/info/xet/missing-objects",
            server.url
        ))
        .bearer_auth(&token)
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().unwrap(), expected);
}
