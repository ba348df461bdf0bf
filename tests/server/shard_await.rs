//! Pipelined shard uploads (`X-Xet-Await-Xorbs`, docs/server-api.md): a shard sent while its
//! xorbs are still on their way waits for them, without an upload slot, for a bounded time,
//! in the uploader's dedup domain only, a bounded number of shards at once.

use std::time::{Duration, Instant};

use git_xet_core::shard::Shard;

use crate::common::*;
use crate::support::TestServer;

const AWAIT: &str = "X-Xet-Await-Xorbs";
const LIMIT: &str = "x-xet-await-xorbs-limit";

/// Posts `shard` naming `awaited` as still on their way; returns status, answer and time.
fn post_awaiting(cas: &Cas, shard: &Shard, awaited: &str) -> (u16, serde_json::Value, Duration) {
    let started = Instant::now();
    let r = cas
        .http
        .post(format!("{}/v1/shards", cas.base))
        .bearer_auth(&cas.token)
        .header(AWAIT, awaited)
        .body(shard.to_upload_bytes())
        .send()
        .unwrap();
    let (status, v) = json(r);
    (status, v, started.elapsed())
}

fn hashes(up: &Upload) -> String {
    let hex: Vec<String> = up.xorbs.iter().map(|x| x.hash.to_hex()).collect();
    hex.join(",")
}

/// With one upload slot: the shard, sent first, waits without it, the xorbs take it, and the
/// shard is then registered; the answers say the server honours the header.
#[test]
fn a_shard_sent_before_its_xorbs_is_registered_once_they_arrive_with_one_upload_slot() {
    let server = TestServer::start_with(&["--max-concurrent-uploads", "1"]);
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(300_000, 21, 3);
    assert!(up.xorbs.len() > 1, "several xorbs");
    let (shard, awaited) = (up.shard.clone(), hashes(&up));
    let early = std::thread::scope(|s| {
        let waiting = s.spawn(|| post_awaiting(&cas, &shard, &awaited));
        assert!(
            wait_for(|| server.metric("git_xet_shards_awaiting_xorbs_total") == 1.0),
            "the shard is waiting"
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiting.is_finished(), "the shard did not wait");
        for x in &up.xorbs {
            let r = cas.post_xorb_raw(&x.hash.to_hex(), x.bytes.clone());
            assert_eq!(r.status(), 200, "a waiting shard must not block its xorbs");
            assert_eq!(r.headers()[LIMIT], "16", "xorb answers offer the header");
        }
        waiting.join().unwrap()
    });
    assert_eq!(early.0, 200, "{}", early.1);
    assert_eq!(early.1["result"], 1);
    assert_eq!(server.metric("git_xet_shards_registered_total"), 1.0);
    assert_eq!(cas.download(&up.file_hash, None), up.data);
}

/// A xorb that never comes: the shard fails after the bound with the usual refusal.
#[test]
fn a_shard_awaiting_a_xorb_that_never_comes_fails_after_the_bound() {
    let server = TestServer::start_with(&["--shard-xorb-wait-ms", "400"]);
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(100_000, 22, 100);
    let (status, v, took) = post_awaiting(&cas, &up.shard, &hashes(&up));
    assert_eq!(status, 400, "{v}");
    assert!(reason(&v).contains("not stored"), "{v}");
    assert!(
        took >= Duration::from_millis(400),
        "answered after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    assert_eq!(server.metric("git_xet_registered_files"), 0.0);
}

/// On a scoped server, another scope uploading the xorb neither ends the wait nor validates
/// the shard: the answer and its timing are those for a xorb nobody has.
#[test]
fn another_scope_s_upload_of_the_xorb_does_not_end_the_wait() {
    let server = TestServer::start_with(&["--dedup-scope", "repo", "--shard-xorb-wait-ms", "800"]);
    let writer = Cas::new(&server, "org1/a", "write");
    let other = Cas::new(&server, "org2/b", "write");
    let up = Upload::random(100_000, 23, 100);
    let nobody = Upload::random(100_000, 24, 100);
    let (status, v, took) = std::thread::scope(|s| {
        let waiting = s.spawn(|| post_awaiting(&writer, &up.shard, &hashes(&up)));
        assert!(wait_for(|| server
            .metric("git_xet_shards_awaiting_xorbs_total")
            == 1.0));
        for x in &up.xorbs {
            other.post_xorb(x);
        }
        waiting.join().unwrap()
    });
    assert_eq!(status, 400, "{v}");
    assert!(
        took >= Duration::from_millis(800),
        "answered after {took:?}"
    );
    let (status2, v2, took2) = post_awaiting(&writer, &nobody.shard, &hashes(&nobody));
    assert_eq!(status2, 400, "{v2}");
    assert!(
        took2 >= Duration::from_millis(800),
        "answered after {took2:?}"
    );
    let masked = |v: &serde_json::Value, up: &Upload| {
        let mut text = reason(v);
        for x in &up.xorbs {
            text = text.replace(&x.hash.to_hex(), "X");
        }
        text.replace(&up.file_hash.to_hex(), "F")
    };
    assert_eq!(masked(&v, &up), masked(&v2, &nobody));
    // The uploader's own upload of the xorb then lets the same shard through.
    for x in &up.xorbs {
        writer.post_xorb(x);
    }
    assert_eq!(writer.post_shard(&up.shard), 1);
}

/// Past the bound on waiting shards, a shard is validated at once.
#[test]
fn beyond_the_waiter_limit_a_shard_is_validated_at_once() {
    let server =
        TestServer::start_with(&["--max-waiting-shards", "1", "--shard-xorb-wait-ms", "20000"]);
    let cas = Cas::new(&server, "org/repo", "write");
    let first = Upload::random(100_000, 25, 100);
    let second = Upload::random(100_000, 26, 100);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| post_awaiting(&cas, &first.shard, &hashes(&first)));
        assert!(wait_for(|| server
            .metric("git_xet_shards_awaiting_xorbs_total")
            == 1.0));
        let (status, v, took) = post_awaiting(&cas, &second.shard, &hashes(&second));
        assert_eq!(status, 400, "{v}");
        assert!(reason(&v).contains("not stored"), "{v}");
        assert!(took < Duration::from_secs(5), "it waited: {took:?}");
        for x in &first.xorbs {
            cas.post_xorb(x);
        }
        let (status, v, _) = waiting.join().unwrap();
        assert_eq!(status, 200, "{v}");
    });
    assert_eq!(server.metric("git_xet_shards_awaiting_xorbs_total"), 1.0);
}

/// One repository's shards take at most their share of the waiting places (an eighth): past
/// it, its next shard is validated at once, while another repository's shard still waits.
#[test]
fn a_repository_takes_only_its_share_of_the_waiting_places() {
    let server =
        TestServer::start_with(&["--max-waiting-shards", "8", "--shard-xorb-wait-ms", "20000"]);
    let a = Cas::new(&server, "org/a", "write");
    let b = Cas::new(&server, "org/b", "write");
    let (first, second, other) = (
        Upload::random(100_000, 31, 100),
        Upload::random(100_000, 32, 100),
        Upload::random(100_000, 33, 100),
    );
    let waiting_metric = || server.metric("git_xet_shards_awaiting_xorbs_total");
    std::thread::scope(|s| {
        let a_waits = s.spawn(|| post_awaiting(&a, &first.shard, &hashes(&first)));
        assert!(wait_for(|| waiting_metric() == 1.0));
        let (status, v, took) = post_awaiting(&a, &second.shard, &hashes(&second));
        assert_eq!(status, 400, "{v}");
        assert!(reason(&v).contains("not stored"), "{v}");
        assert!(took < Duration::from_secs(5), "it waited: {took:?}");
        let b_waits = s.spawn(|| post_awaiting(&b, &other.shard, &hashes(&other)));
        assert!(wait_for(|| waiting_metric() == 2.0));
        for x in &other.xorbs {
            b.post_xorb(x);
        }
        let (status, v, _) = b_waits.join().unwrap();
        assert_eq!(status, 200, "{v}");
        for x in &first.xorbs {
            a.post_xorb(x);
        }
        let (status, v, _) = a_waits.join().unwrap();
        assert_eq!(status, 200, "{v}");
    });
    // The place is given back: the repository's next early shard waits again.
    let third = Upload::random(100_000, 34, 100);
    std::thread::scope(|s| {
        let waits = s.spawn(|| post_awaiting(&a, &third.shard, &hashes(&third)));
        assert!(wait_for(|| waiting_metric() == 3.0));
        for x in &third.xorbs {
            a.post_xorb(x);
        }
        let (status, v, _) = waits.join().unwrap();
        assert_eq!(status, 200, "{v}");
    });
}

/// A malformed or too long list is refused; a server with no wait neither offers nor honours
/// the header.
#[test]
fn the_await_header_is_checked_and_only_offered_when_honoured() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/repo", "write");
    let up = Upload::random(100_000, 27, 100);
    let (status, v, _) = post_awaiting(&cas, &up.shard, "not-a-hash");
    assert_eq!(status, 400, "{v}");
    let many = vec![up.xorbs[0].hash.to_hex(); 17].join(",");
    let (status, v, _) = post_awaiting(&cas, &up.shard, &many);
    assert_eq!(status, 400, "{v}");
    assert!(reason(&v).contains("at most 16"), "{v}");

    let off = TestServer::start_with(&["--shard-xorb-wait-ms", "0"]);
    let cas = Cas::new(&off, "org/repo", "write");
    let other = Upload::random(100_000, 28, 100);
    let (status, _, took) = post_awaiting(&cas, &other.shard, &hashes(&other));
    assert_eq!(status, 400);
    assert!(took < Duration::from_secs(5));
    assert_eq!(off.metric("git_xet_shards_awaiting_xorbs_total"), 0.0);
    cas.upload(&other);
    let r = cas.post_xorb_raw(&other.xorbs[0].hash.to_hex(), other.xorbs[0].bytes.clone());
    assert!(r.headers().get(LIMIT).is_none());
}

/// The `xet` upload action says the limit up front (`X-Xet-Await-Xorbs-Limit`, named after
/// the upload answers' header), so that a client's first shard can go with its xorbs; a
/// server that does not wait leaves it out, and another repository's token gets no action.
#[test]
fn upload_actions_say_the_await_limit_up_front() {
    use crate::lfs::batch;
    const ACTION_LIMIT: &str = "X-Xet-Await-Xorbs-Limit";
    let data = crate::support::random_bytes(5000, 41);
    let oid = sha256_hex(&data);
    let asked = [(oid.as_str(), data.len() as u64)];
    let upload_action = |server: &TestServer| {
        let token = server.token("org/ahead", "write");
        let (status, answer) = batch(
            server,
            "org/ahead",
            Some(&token),
            "upload",
            &["basic", "xet"],
            &asked,
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["transfer"], "xet", "{answer}");
        answer["objects"][0]["actions"]["upload"].clone()
    };
    // Header names only in messages: the action holds a token.
    let names = |action: &serde_json::Value| {
        let header = action["header"].as_object().cloned().unwrap_or_default();
        header.keys().cloned().collect::<Vec<_>>()
    };
    let server = TestServer::start();
    let action = upload_action(&server);
    assert_eq!(action["header"][ACTION_LIMIT], "16", "{:?}", names(&action));
    assert!(action["header"]["X-Xet-Access-Token"].is_string());

    let other = server.token("org/elsewhere", "write");
    let (status, answer) = batch(
        &server,
        "org/ahead",
        Some(&other),
        "upload",
        &["basic", "xet"],
        &asked,
    );
    assert_eq!(status, 404, "{answer}");
    assert!(answer.get("objects").is_none(), "{answer}");

    let off = TestServer::start_with(&["--shard-xorb-wait-ms", "0"]);
    let action = upload_action(&off);
    assert!(
        action["header"].get(ACTION_LIMIT).is_none(),
        "{:?}",
        names(&action)
    );
    assert!(action["header"]["X-Xet-Access-Token"].is_string());
}
