//! The everyday workflow through the `xet` transfer: push, clone, pull, checkout of
//! branches; dedup of a second version counted by the server; mixed clients.

use crate::env::{assert_file_is, ok, remote_url, stderr, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";
const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";
const BASIC_RECEIVED: &str = "git_xet_lfs_basic_bytes_received_total";
const BASIC_SERVED: &str = "git_xet_lfs_basic_bytes_served_total";

#[test]
fn push_clone_pull_and_checkout_go_through_xet() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/models", "write");
    let alice = GitEnv::with_agent(&[]);
    // The second user runs a single agent process (concurrent = false).
    let bob = GitEnv::with_agent(&["--concurrency", "1"]);

    let a = alice.lfs_repo("a", &remote);
    let big = random_bytes(6 << 20, 1);
    let small = random_bytes(10_000, 2);
    write_file(&a.join("weights/big.bin"), &big);
    write_file(&a.join("small.bin"), &small);
    std::fs::write(a.join("README"), "models\n").unwrap();
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "first"]);
    alice.git(&a, &["checkout", "-qb", "feature"]);
    let feature = random_bytes(3 << 20, 3);
    write_file(&a.join("feature.bin"), &feature);
    alice.git(&a, &["add", "feature.bin"]);
    alice.git(&a, &["commit", "-qm", "feature"]);
    ok(
        alice.git_logged(&a, &["push", "-q", "origin", "main", "feature"]),
        "push",
    );
    assert!(
        alice.agent_log().contains("upload done"),
        "the agent did the upload:\n{}",
        alice.agent_log()
    );
    assert!(server.metric(XORB_RECEIVED) > 0.0);
    assert_eq!(
        server.metric(BASIC_RECEIVED),
        0.0,
        "nothing went through basic"
    );

    let b = bob.clone_ok(&remote, "b");
    assert_file_is(&b.join("weights/big.bin"), &big);
    assert_file_is(&b.join("small.bin"), &small);
    assert!(!b.join("feature.bin").exists());
    bob.git(&b, &["checkout", "-q", "feature"]);
    assert_file_is(&b.join("feature.bin"), &feature);
    bob.lfs_fsck(&b);
    assert!(server.metric(XORB_SERVED) > 0.0);
    assert_eq!(
        server.metric(BASIC_SERVED),
        0.0,
        "nothing went through basic"
    );

    // A new commit on main reaches the other clone with `git pull`.
    alice.git(&a, &["checkout", "-q", "main"]);
    let v2 = random_bytes(1 << 20, 4);
    write_file(&a.join("small.bin"), &v2);
    alice.git(&a, &["commit", "-qam", "update small"]);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    bob.git(&b, &["checkout", "-q", "main"]);
    bob.git(&b, &["pull", "-q", "origin", "main"]);
    assert_file_is(&b.join("small.bin"), &v2);
    bob.lfs_fsck(&b);
    // The per-repository shard cache is where it belongs: one directory for this server.
    let servers: Vec<_> = a.join(".git/xet/servers").read_dir().unwrap().collect();
    assert_eq!(servers.len(), 1);
    let server_dir = servers[0].as_ref().unwrap().path();
    assert!(server_dir
        .join("shards")
        .read_dir()
        .unwrap()
        .next()
        .is_some());
}

/// A server that lost what it held (reset, restored from an old backup) refuses shards
/// that reuse xorbs the local cache remembers: the agent clears that server's cache and
/// uploads the object again, so the push succeeds by itself.
#[test]
fn a_push_to_a_server_that_lost_its_xorbs_uploads_them_again() {
    let mut server = TestServer::start();
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (a, files) = push_three_files(&alice, &remote_url(&server, "org/data", "write"), 50);

    server.reset();
    let remote = remote_url(&server, "org/data", "write");
    alice.git(&a, &["remote", "set-url", "origin", &remote]);
    // git-lfs's pre-push skips what origin/main already has: send every object first.
    ok(
        alice.git_logged(&a, &["lfs", "push", "--all", "origin"]),
        "lfs push to the reset server",
    );
    ok(
        alice.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push to the reset server",
    );
    assert!(
        alice.agent_log().contains("shard cache was cleared"),
        "{}",
        alice.agent_log()
    );
    assert!(server.metric(XORB_RECEIVED) >= 900_000.0);

    assert_clone_has(&bob, &remote, &files);
}

/// A shard in the local cache says what one server holds. Pushing the same repository to a
/// second server (a mirror) must upload every xorb again instead of deduplicating against
/// the first server's xorbs, which the second one would refuse.
#[test]
fn a_push_to_a_second_server_sends_what_that_server_lacks() {
    let first = TestServer::start();
    let second = TestServer::start();
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (a, files) = push_three_files(&alice, &remote_url(&first, "org/data", "write"), 40);

    // The cache layout of earlier versions (no server named) is dropped, not trusted.
    let servers = a.join(".git/xet/servers");
    let first_cache = servers.read_dir().unwrap().next().unwrap().unwrap().path();
    let legacy = a.join(".git/xet/shards");
    std::fs::create_dir_all(&legacy).unwrap();
    for shard in first_cache.join("shards").read_dir().unwrap() {
        let shard = shard.unwrap().path();
        std::fs::copy(&shard, legacy.join(shard.file_name().unwrap())).unwrap();
    }

    let mirror = remote_url(&second, "org/data", "write");
    alice.git(&a, &["remote", "add", "mirror", &mirror]);
    ok(
        alice.git_logged(&a, &["push", "-q", "mirror", "main"]),
        "push to the mirror",
    );
    assert!(
        second.metric(XORB_RECEIVED) >= 900_000.0,
        "the mirror received {} xorb bytes",
        second.metric(XORB_RECEIVED)
    );
    assert!(!legacy.exists(), "the unkeyed cache was removed");
    assert_eq!(servers.read_dir().unwrap().count(), 2);

    assert_clone_has(&bob, &mirror, &files);
}

/// A repository with three files of 300,000 bytes (`f0.bin`..), committed and pushed to
/// `remote`; returns it and the files' contents.
fn push_three_files(env: &GitEnv, remote: &str, seed: u64) -> (std::path::PathBuf, Vec<Vec<u8>>) {
    let a = env.lfs_repo("a", remote);
    let files: Vec<_> = (0..3).map(|i| random_bytes(300_000, seed + i)).collect();
    for (i, bytes) in files.iter().enumerate() {
        write_file(&a.join(format!("f{i}.bin")), bytes);
    }
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "data"]);
    ok(
        env.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push",
    );
    (a, files)
}

/// A clone of `remote` has the files of [`push_three_files`], bit-exact.
fn assert_clone_has(env: &GitEnv, remote: &str, files: &[Vec<u8>]) {
    let b = env.dir("b");
    ok(
        env.git_logged(&env.dir("."), &["clone", "-q", remote, b.to_str().unwrap()]),
        "clone",
    );
    for (i, bytes) in files.iter().enumerate() {
        assert_file_is(&b.join(format!("f{i}.bin")), bytes);
    }
}

#[test]
fn a_second_version_moves_only_the_changed_bytes() {
    const SIZE: usize = 64 << 20;
    let server = TestServer::start();
    let remote = remote_url(&server, "org/big", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);

    let a = alice.lfs_repo("a", &remote);
    let v1 = random_bytes(SIZE, 7);
    write_file(&a.join("model.bin"), &v1);
    alice.commit_all_and_push(&a, "v1");
    let b = bob.dir("b");
    bob.git(
        &bob.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("model.bin"), &v1);

    // v2: 1000 bytes inserted in the middle.
    let mut v2 = v1[..SIZE / 2].to_vec();
    v2.extend_from_slice(&random_bytes(1000, 8));
    v2.extend_from_slice(&v1[SIZE / 2..]);
    write_file(&a.join("model.bin"), &v2);
    alice.git(&a, &["commit", "-qam", "v2"]);
    let received = server.metric(XORB_RECEIVED);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let pushed = server.metric(XORB_RECEIVED) - received;
    assert!(pushed > 0.0, "the new chunks were sent");
    assert!(
        pushed <= 0.05 * SIZE as f64,
        "push of v2 sent {pushed} xorb bytes, over 5% of {SIZE}"
    );

    let served = server.metric(XORB_SERVED);
    bob.git(&b, &["pull", "-q", "origin", "main"]);
    let pulled = server.metric(XORB_SERVED) - served;
    assert_file_is(&b.join("model.bin"), &v2);
    assert!(
        pulled <= 0.05 * SIZE as f64,
        "pull of v2 fetched {pulled} xorb bytes, over 5% of {SIZE}"
    );
    eprintln!("v2 push sent {pushed} bytes, pull fetched {pulled} bytes (file {SIZE})");

    // Objects sent ahead with `git lfs push`: the `git push` that follows asks the server
    // about them again, and with nothing to move the server names `basic`, so git-lfs starts
    // no agent processes.
    write_file(&a.join("small.bin"), &random_bytes(1000, 9));
    alice.git(&a, &["add", "small.bin"]);
    alice.git(&a, &["commit", "-qm", "small"]);
    alice.git(&a, &["lfs", "push", "origin", "main"]);
    let received = server.metric(XORB_RECEIVED);
    let out = alice
        .command("git", &a)
        .args(["push", "-q", "origin", "main"])
        .env("GIT_TRACE", "1")
        .output()
        .unwrap();
    let trace = stderr(&ok(out, "git push"));
    assert!(trace.contains("tq: sending batch of size 1"), "{trace}");
    assert!(!trace.contains("git-xet transfer"), "{trace}");
    assert_eq!(server.metric(XORB_RECEIVED), received);
}

#[test]
fn agent_and_plain_git_lfs_users_share_a_repository() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/mixed", "write");
    let xet_user = GitEnv::with_agent(&[]);
    let lfs_user = GitEnv::plain_lfs();

    let x = xet_user.lfs_repo("x", &remote);
    let from_xet = random_bytes(2 << 20, 11);
    write_file(&x.join("from-xet.bin"), &from_xet);
    xet_user.commit_all_and_push(&x, "from the xet user");

    let l = lfs_user.dir("l");
    ok(
        lfs_user.git_output(
            &lfs_user.dir("."),
            &["clone", "-q", &remote, l.to_str().unwrap()],
        ),
        "plain clone",
    );
    assert_file_is(&l.join("from-xet.bin"), &from_xet);
    let basic_served = server.metric(BASIC_SERVED);
    assert!(
        basic_served >= from_xet.len() as f64,
        "the plain client downloaded with basic"
    );

    let from_lfs = random_bytes(3 << 20, 12);
    write_file(&l.join("from-lfs.bin"), &from_lfs);
    lfs_user.git(&l, &["add", "from-lfs.bin"]);
    lfs_user.git(&l, &["commit", "-qm", "from the plain user"]);
    let out = lfs_user.git_output(&l, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "plain push: {}", stderr(&out));
    assert!(server.metric(BASIC_RECEIVED) >= from_lfs.len() as f64);

    xet_user.git(&x, &["pull", "-q", "origin", "main"]);
    assert_file_is(&x.join("from-lfs.bin"), &from_lfs);
    assert_eq!(
        server.metric(BASIC_SERVED),
        basic_served,
        "the xet user pulled through xet"
    );
    xet_user.lfs_fsck(&x);
}

/// `lfs.storage` moves git-lfs's store, and the agent follows it: a second version is
/// rebuilt from the first one found there, so only the changed bytes cross the network.
#[test]
fn the_agent_follows_a_custom_lfs_storage_directory() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/storage", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    let mut data = random_bytes(4 << 20, 41);
    write_file(&a.join("w.bin"), &data);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "one"]);
    ok(
        env.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push",
    );

    // A clone whose git-lfs store is elsewhere; git-lfs itself downloads, through the agent.
    let storage = env.dir("elsewhere");
    let b = env.dir("b");
    let no_smudge = |args: &[&str], dir: &std::path::Path| {
        let out = env
            .command("git", dir)
            .args(args)
            .env("GIT_LFS_SKIP_SMUDGE", "1")
            .output()
            .unwrap();
        ok(out, &args.join(" "));
    };
    no_smudge(
        &["clone", "-q", &remote, b.to_str().unwrap()],
        &env.dir("."),
    );
    env.git(&b, &["config", "lfs.storage", storage.to_str().unwrap()]);
    ok(env.git_logged(&b, &["lfs", "pull"]), "git lfs pull");
    assert_file_is(&b.join("w.bin"), &data);
    assert!(storage.join("objects").is_dir());
    assert!(!b.join(".git/lfs/objects").exists());

    // A second version: 64 KiB changed.
    data[1 << 20..(1 << 20) + (64 << 10)].copy_from_slice(&random_bytes(64 << 10, 42));
    write_file(&a.join("w.bin"), &data);
    env.git(&a, &["commit", "-qam", "two"]);
    ok(
        env.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push",
    );
    no_smudge(&["pull", "-q", "origin", "main"], &b);
    let served = server.metric(XORB_SERVED);
    ok(env.git_logged(&b, &["lfs", "pull"]), "git lfs pull");
    assert_file_is(&b.join("w.bin"), &data);
    let fetched = server.metric(XORB_SERVED) - served;
    assert!(
        fetched < (1 << 20) as f64,
        "{fetched} bytes fetched: the first version in {} was not reused",
        storage.display()
    );
}
