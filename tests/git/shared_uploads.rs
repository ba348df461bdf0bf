//! Pushes of many small files: the agents of one push share a coordinator that uploads
//! what is in flight as one session (the lfs crate's `coordinator`). Real git, git-lfs, several agent
//! processes and the server on loopback; request counts from the server's metrics. The
//! coordinator's read-ahead has its own file (`shared_uploads_read_ahead.rs`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::env::{assert_file_is, stderr, GitEnv};
use crate::shared_uploads_proxy::{repo_behind, ShardProxy};
use crate::support::{random_bytes, write_file, TestServer};

/// `count` files of 1-4 KiB, each different; returns their contents.
pub(crate) fn small_files(repo: &Path, count: usize, seed: u64) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let data = random_bytes(1024 + (i % 4) * 1024, seed * 100_000 + i as u64);
            write_file(&repo.join(format!("d{}/f{i}.bin", i % 7)), &data);
            data
        })
        .collect()
}

pub(crate) fn assert_cloned(remote: &str, files: &[Vec<u8>]) {
    let fresh = GitEnv::with_agent(&[]);
    let b = fresh.dir("b");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", remote, b.to_str().unwrap()],
    );
    for (i, data) in files.iter().enumerate() {
        assert_file_is(&b.join(format!("d{}/f{i}.bin", i % 7)), data);
    }
}

/// Several hundred small files through eight agents: far fewer xorb and shard POSTs than
/// files, and a bit-exact clone. The same push with sharing off costs a shard per file, so
/// the count tells the two apart.
#[test]
fn a_push_of_many_small_files_shares_xorbs_and_shards_and_clones_bit_exact() {
    let server = TestServer::start();
    let remote = crate::env::remote_url(&server, "org/many", "write");
    let env = GitEnv::with_agent(&["--concurrency", "8"]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 300, 1);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "many"]);
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    let shards = server.requests("shard_upload");
    let xorbs = server.requests("xorb_upload");
    eprintln!("300 files: {xorbs} xorb POSTs, {shards} shard POSTs");
    assert!(
        shards <= 100 && xorbs <= 100,
        "{shards} shard and {xorbs} xorb POSTs for 300 files\n{}",
        env.agent_log()
    );
    assert!(env.agent_log().contains("batch registered"));
    // The upload action told the agent that the server waits for xorbs: each round's shard,
    // the first one's too, went with its xorb (one round trip, not two).
    let pipelined = server.metric("git_xet_shards_awaiting_xorbs_total");
    assert_eq!(
        pipelined, shards as f64,
        "{pipelined} of {shards} shards sent with their xorbs"
    );
    assert_cloned(&remote, &files);

    // Control: each agent alone registers each file with a shard of its own.
    let alone = GitEnv::with_agent(&["--concurrency", "8"]).with_env("GIT_XET_SHARED_UPLOADS", "0");
    let remote2 = crate::env::remote_url(&server, "org/alone", "write");
    let c = alone.lfs_repo("c", &remote2);
    small_files(&c, 24, 2);
    alone.commit_all_and_push(&c, "alone");
    assert_eq!(server.requests("shard_upload") - shards, 24);
}

/// A server that waits for xorbs too briefly: shards sent with their xorbs often fail, are
/// sent again once the xorbs are in, and every object arrives.
#[test]
fn shards_sent_too_early_are_sent_again_and_the_push_succeeds() {
    let server = TestServer::start_with(&["--shard-xorb-wait-ms", "1"]);
    let remote = crate::env::remote_url(&server, "org/early", "write");
    let env = GitEnv::with_agent(&["--concurrency", "8"]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 120, 5);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "many"]);
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    assert!(server.metric("git_xet_shards_awaiting_xorbs_total") >= 1.0);
    let shard_answers: Vec<String> = server
        .metrics()
        .lines()
        .filter(|l| l.contains("route=\"shard_upload\""))
        .map(str::to_string)
        .collect();
    eprintln!("shard answers (a 400 is a shard sent again): {shard_answers:?}");
    assert_cloned(&remote, &files);
}

/// The coordinator dies after its second batch is registered and before it answers: the
/// agents waiting on it upload their objects themselves, the object of its own agent fails,
/// and a second push completes; the clone is bit-exact.
#[test]
fn a_coordinator_killed_mid_push_loses_nothing_and_the_push_succeeds_on_retry() {
    let server = TestServer::start();
    let remote = crate::env::remote_url(&server, "org/killed", "write");
    let env = GitEnv::with_agent(&["--concurrency", "6"]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 150, 3);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "many"]);
    let out = env
        .command("git", &a)
        .args(["push", "-q", "origin", "main"])
        .env("GIT_XET_TEST_COORDINATOR_ABORT_AFTER", "2")
        .env("GIT_XET_LOG", env.root.path().join("agent.log"))
        .output()
        .unwrap();
    eprintln!("push with the coordinator aborting:\n{}", stderr(&out));
    assert!(
        !out.status.success(),
        "the coordinator's own object cannot have been answered"
    );
    assert!(server.requests("shard_upload") >= 2);
    // Nothing half-registered, nothing lost: the retry (a new coordinator) completes.
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "retry: {}", stderr(&out));
    assert_cloned(&remote, &files);
}

/// A server that refuses every shard: the push fails and no object is reported done,
/// although every xorb was accepted.
#[test]
fn no_object_is_reported_done_before_its_shard_is_registered() {
    let proxy = ShardProxy::bind(None);
    let public = format!("http://{}", proxy.addr);
    let server = TestServer::start_with(&["--public-url", &public]);
    proxy.serve(server.listen_addr());
    // git and the Batch API reach the server directly; the CAS URL names the proxy.
    let remote = format!(
        "http://x:{}@{}/org/refused.git",
        server.token("org/refused", "write"),
        server.listen_addr()
    );
    let env = GitEnv::with_agent(&["--concurrency", "4"]);
    let a = env.lfs_repo("a", &remote);
    small_files(&a, 20, 4);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "refused"]);
    let out = env.git_logged(&a, &["push", "origin", "main"]);
    assert!(!out.status.success(), "the push must fail");
    let log = env.agent_log();
    assert!(
        proxy.refused.load(Ordering::SeqCst) > 0,
        "no shard was sent\n{log}"
    );
    assert!(
        !log.contains("upload done"),
        "an object was reported done:\n{log}"
    );
    assert!(
        stderr(&out).contains("403"),
        "the refusal reaches the user: {}",
        stderr(&out)
    );
    // The branch was not pushed (the repository is created by its first push: none yet).
    let refs = env.git_output(&a, &["ls-remote", "origin"]);
    assert!(
        !String::from_utf8_lossy(&refs.stdout).contains("refs/heads/main"),
        "the branch was pushed"
    );
}

/// git-lfs keeps every agent but the first idle until that agent's first object reports
/// progress or completes. The coordinator reports its own object's bytes once they are packed,
/// so the other agents start while that first round is still being registered: with each
/// shard registration held up, the second round holds their objects. (Reporting only at
/// completion, the other agents started after the first round and the second round was the
/// first agent's next object alone.)
#[test]
fn the_other_agents_start_while_the_first_round_is_registered() {
    // Without reading ahead (which would register the whole push at once): no list in the
    // Batch API answers, none to ask for.
    let proxy = ShardProxy {
        forgets_batches: true,
        strips_lists: true,
        ..ShardProxy::bind(Some(Duration::from_millis(1500)))
    };
    let public = format!("http://{}", proxy.addr);
    let server = TestServer::start_with(&["--public-url", &public]);
    proxy.serve(server.listen_addr());
    let env = GitEnv::with_agent(&["--concurrency", "8"]);
    let (a, remote) = repo_behind(&env, &server, &proxy, "org/ramp");
    let files = small_files(&a, 24, 5);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "ramp"]);
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    let log = env.agent_log();
    let rounds: Vec<usize> = log
        .lines()
        .filter_map(|l| l.split("batch registered: ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect();
    assert!(rounds.len() >= 2, "rounds {rounds:?}\n{log}");
    // git-lfs hands out one object first; the others' come once it is packed, into the
    // first batch (which waits for them) or the second (registering beside it), not after
    // the first registration.
    assert!(
        rounds[0] + rounds[1] >= 5,
        "the other agents' objects missed the first two rounds: {rounds:?}\n{log}"
    );
    // Batches overlap: one registers while the next gathers, so some two registrations end
    // closer together than the 1.5 s each shard is held (one after the other, never).
    let ended: Vec<f64> = log
        .lines()
        .filter(|l| l.contains("batch registered: "))
        .filter_map(|l| seconds_of_day(l.split(' ').next()?))
        .collect();
    assert!(
        ended.windows(2).any(|w| w[1] - w[0] < 0.7),
        "no two batches registered at once: {ended:?}\n{log}"
    );
    assert_cloned(&remote, &files);
}

pub(crate) fn oid_of(data: &[u8]) -> String {
    use sha2::Digest;
    git_xet_core::hash::sha256_hex(&sha2::Sha256::digest(data).into())
}

/// Whether the server has `oid` registered in `repo` (its Batch API offers a download).
pub(crate) fn stored_on(server: &TestServer, repo: &str, oid: &str, size: usize) -> bool {
    let body = serde_json::json!({
        "operation": "download",
        "transfers": ["basic"],
        "objects": [{"oid": oid, "size": size}],
    });
    let answer: serde_json::Value = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/{repo}.git/info/lfs/objects/batch", server.url))
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .basic_auth("x", Some(server.token(repo, "read")))
        .body(body.to_string())
        .send()
        .unwrap()
        .json()
        .unwrap();
    answer["objects"][0]["actions"].get("download").is_some()
}

/// Seconds since midnight of a log line's RFC 3339 timestamp (`2026-11-27T21:59:56.843176Z`).
fn seconds_of_day(stamp: &str) -> Option<f64> {
    let time = stamp.split('T').nth(1)?.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

/// The agents of a push other than the coordinator hand it their objects without running
/// git (the socket's path is plain when `.git` is a directory in the agent's directory): in
/// a push of 100 small files through eight agents, one agent (the coordinator) asked git
/// for the repository while several others uploaded through it.
#[test]
fn followers_join_the_coordinator_without_running_git() {
    let server = TestServer::start();
    let remote = crate::env::remote_url(&server, "org/quick", "write");
    let env = GitEnv::with_agent(&["--concurrency", "8"]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 100, 6);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "quick"]);
    let _ = std::fs::remove_file(env.root.path().join("agent.log"));
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    let log = env.agent_log();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    let rev_parses = count("running command=git rev-parse");
    let configs = count("config --list");
    let followers = count("following the push's coordinator (no environment lookup)");
    let registered: usize = log
        .lines()
        .filter_map(|l| l.split("batch registered: ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum();
    eprintln!("{rev_parses} rev-parse, {configs} config --list, {followers} quick followers");
    assert_eq!(rev_parses, 1, "only the coordinator asks git\n{log}");
    assert_eq!(configs, 1, "only the coordinator asks git\n{log}");
    assert!(followers >= 2, "{followers} agents followed\n{log}");
    assert_eq!(
        registered, 100,
        "every object went through the coordinator\n{log}"
    );
    assert!(!log.contains("uploading from this agent"), "{log}");
    assert_cloned(&remote, &files);
}

/// The server says in its `xet` upload action that it waits for xorbs, so a fresh agent's
/// first shard goes with its xorb: with the xorb's answer held up by a proxy, the shard is
/// sent (and waits at the server) before that answer. (Learning it only from the first
/// upload answer, the first shard waited for the xorb's answer.)
#[test]
fn the_first_upload_of_a_fresh_agent_sends_its_shard_with_its_xorb() {
    let proxy = ShardProxy::delaying("/xorbs/", Duration::from_millis(800));
    let public = format!("http://{}", proxy.addr);
    let server = TestServer::start_with(&["--public-url", &public]);
    proxy.serve(server.listen_addr());
    let remote = format!(
        "http://x:{}@{}/org/first.git",
        server.token("org/first", "write"),
        server.listen_addr()
    );
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 1, 7);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "one"]);
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    let events = proxy.events.lock().unwrap().clone();
    eprintln!("proxy events: {events:?}");
    let at = |what: &str| events.iter().position(|e| e == what);
    let (shard_sent, xorb_answered) = (at("shard received"), at("xorb answered"));
    assert!(
        shard_sent.is_some() && xorb_answered.is_some() && shard_sent < xorb_answered,
        "the shard waited for its xorb's answer: {events:?}"
    );
    assert_eq!(server.metric("git_xet_shards_awaiting_xorbs_total"), 1.0);
    assert_eq!(server.requests("shard_upload"), 1, "{events:?}");
    assert_cloned(&remote, &files);
}
