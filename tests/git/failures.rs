//! Failures through the whole stack: a server that dies mid-push, a wrong token, corrupt
//! data on the server, and the server's pre-receive hook.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::env::{assert_file_is, remote_url, stderr, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

#[test]
fn a_push_interrupted_by_the_server_dying_fails_clearly_and_a_re_push_works() {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/crash", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    // Several xorbs, uploaded in parallel: killing the server when the first one lands
    // usually stops the push before its shard is sent.
    let data = random_bytes(200 << 20, 21);
    write_file(&a.join("big.bin"), &data);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "big"]);

    let push = {
        let mut cmd = env.command("git", &a);
        cmd.args(["push", "origin", "main"])
            .env("GIT_XET_LOG", env.root.path().join("agent.log"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().unwrap()
    };
    // Kill the server once xorbs start arriving (or after a moment if they never do).
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.metric("git_xet_xorb_bytes_received_total") == 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill();
    let out = push.wait_with_output().unwrap();
    assert!(!out.status.success(), "the push must fail");
    let err = stderr(&out);
    eprintln!("push against a dying server said:\n{err}");
    assert!(
        err.contains("127.0.0.1") || err.contains("connect") || err.contains("error"),
        "no clear message:\n{err}"
    );

    // Back up: nothing is half-registered. The shard goes last and is registered atomically,
    // so the server holds either no file or the whole file (when the kill came after the
    // shard), and in both cases a re-push completes and a clone is bit-exact.
    server.restart();
    let registered = server.metric("git_xet_registered_files");
    eprintln!("files registered after the kill: {registered}");
    assert!(
        registered <= 1.0,
        "at most the one pushed file is registered"
    );
    env.git(&a, &["push", "-q", "origin", "main"]);
    let fresh = GitEnv::with_agent(&[]);
    let b = fresh.dir("b");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("big.bin"), &data);
}

#[test]
fn a_wrong_token_gives_a_clear_authentication_error() {
    let server = TestServer::start();
    let good = remote_url(&server, "org/auth", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &good);
    write_file(&a.join("f.bin"), &random_bytes(100_000, 31));
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "f"]);
    let bad = format!("http://x:not-a-token@{}/org/auth.git", server.addr());
    env.git(&a, &["remote", "set-url", "origin", &bad]);
    let out = env.git_output(&a, &["push", "origin", "main"]);
    assert!(!out.status.success());
    eprintln!("push with a wrong token said:\n{}", stderr(&out));
    let err = stderr(&out).to_lowercase();
    assert!(
        err.contains("401") || err.contains("auth") || err.contains("credentials"),
        "no clear authentication error:\n{err}"
    );
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), 0.0);

    // A read-only token can clone but not push.
    env.git(&a, &["remote", "set-url", "origin", &good]);
    env.git(&a, &["push", "-q", "origin", "main"]);
    let read = remote_url(&server, "org/auth", "read");
    env.git(&a, &["remote", "set-url", "origin", &read]);
    write_file(&a.join("g.bin"), &random_bytes(100_000, 32));
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "g"]);
    let out = env.git_output(&a, &["push", "origin", "main"]);
    assert!(!out.status.success(), "a read token must not push");
}

/// Xorb files in the server's data directory (the largest files there).
fn largest_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.metadata().map(|m| m.len() > 1 << 20).unwrap_or(false) {
                files.push(p);
            }
        }
    }
    files
}

#[test]
fn corrupt_data_on_the_server_never_reaches_the_working_tree() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/corrupt", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    let data = random_bytes(4 << 20, 41);
    write_file(&a.join("data.bin"), &data);
    env.commit_all_and_push(&a, "data");

    let xorbs = largest_files(&server.data);
    assert!(
        !xorbs.is_empty(),
        "no stored xorb found under {}",
        server.data.display()
    );
    for x in &xorbs {
        let mut bytes = std::fs::read(x).unwrap();
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 64] {
            *b ^= 0xA5;
        }
        std::fs::write(x, bytes).unwrap();
    }

    // Fetched in the delayed batch, and streamed to git as it arrives: in the second case
    // part of the file has reached git when the bad chunk shows up.
    for threshold in ["", "0"] {
        let mut fresh = GitEnv::with_agent(&[]);
        if !threshold.is_empty() {
            fresh = fresh.with_env("GIT_XET_STREAM_THRESHOLD", threshold);
        }
        let b = fresh.dir("b");
        let out = fresh.git_output(&fresh.dir("."), &["clone", &remote, b.to_str().unwrap()]);
        let err = stderr(&out);
        eprintln!("clone of corrupt data (stream threshold {threshold:?}) said:\n{err}");
        assert!(
            !out.status.success() || err.contains("error"),
            "the failure must be reported:\n{err}"
        );
        let in_tree = std::fs::read(b.join("data.bin")).unwrap_or_default();
        assert!(in_tree != data, "the download cannot have succeeded");
        assert!(
            in_tree.len() < 1024,
            "the working tree holds {} bytes of unverified data",
            in_tree.len()
        );
        let lfs_objects = b.join(".git/lfs/objects");
        assert!(
            largest_files(&lfs_objects).is_empty(),
            "no corrupt object in the LFS store"
        );
    }
}

#[test]
fn the_pre_receive_hook_rejects_pointers_to_objects_the_server_lacks() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/hook", "write");
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &remote);
    write_file(&a.join("ok.bin"), &random_bytes(50_000, 51));
    env.commit_all_and_push(&a, "ok");

    // A pointer whose object was never uploaded (--no-verify skips git-lfs's pre-push).
    write_file(&a.join("missing.bin"), &random_bytes(50_000, 52));
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "missing"]);
    let oid = env.git(&a, &["lfs", "ls-files", "--long"]);
    let out = env.git_output(&a, &["push", "--no-verify", "origin", "main"]);
    assert!(!out.status.success(), "the hook must reject the push");
    let err = stderr(&out);
    eprintln!("push of a pointer to a missing object said:\n{err}");
    let missing_oid = oid
        .lines()
        .find(|l| l.contains("missing.bin"))
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert!(
        err.contains(missing_oid),
        "the rejection names the object:\n{err}"
    );
    // With the object uploaded, the same push goes through.
    env.git(&a, &["push", "-q", "origin", "main"]);
}
