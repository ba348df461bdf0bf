//! Upkeep with real git and the agent: a repository pushed, deleted with `repo delete`,
//! collected with `gc`; what other repositories share survives bit for bit. Hosted
//! repositories live in a `--git-dir` of their own.

use crate::env::{assert_file_is, stderr, GitEnv};
use crate::support::{git_xet, random_bytes, write_file, TestServer};

fn admin_ok(server: &TestServer, args: &[&str]) -> String {
    let out = git_xet()
        .arg("server")
        .args(args)
        .arg("--data")
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git xet server {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn figure(text: &str, label: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with(label)).unwrap();
    let bytes = line.split('(').nth(1).unwrap().split_whitespace().next();
    bytes.unwrap().parse().unwrap()
}

#[test]
fn a_deleted_repository_is_collected_and_shared_content_survives() {
    let repos = tempfile::tempdir().unwrap();
    let git_dir = repos.path().join("hosted");
    let server = TestServer::start_with(&["--no-fsync", "--git-dir", git_dir.to_str().unwrap()]);
    let url = |repo: &str| {
        format!(
            "http://x:{}@{}/{repo}.git",
            server.token(repo, "write"),
            server.addr()
        )
    };
    let shared = random_bytes(3 << 20, 41);
    let unique = random_bytes(5 << 20, 42);
    let env = GitEnv::with_agent(&[]);
    let a = env.lfs_repo("a", &url("org/a"));
    write_file(&a.join("shared.bin"), &shared);
    write_file(&a.join("unique.bin"), &unique);
    env.commit_all_and_push(&a, "a");
    let b = env.lfs_repo("b", &url("org/b"));
    write_file(&b.join("shared.bin"), &shared);
    env.commit_all_and_push(&b, "b");
    assert!(git_dir.join("org/a.git").is_dir(), "hosted under --git-dir");
    assert!(!server.data.join("repos/org/a.git").exists());

    let out = git_xet()
        .args(["server", "repo", "delete", "org/a", "--yes", "--data"])
        .arg(&server.data)
        .env("GIT_XET_SERVER_GIT_DIR", &git_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!git_dir.join("org/a.git").exists());
    let out = admin_ok(&server, &["gc", "--grace", "0"]);
    eprintln!("gc: {out}");
    // The unique file's xorbs hold about its size (random data does not compress).
    let freed = figure(&out, "xorbs freed:");
    let size = unique.len() as u64;
    assert!(
        freed >= size && freed < size + size / 10,
        "freed {freed} bytes for a {size}-byte file: {out}"
    );
    let out = admin_ok(&server, &["check", "--read-data"]);
    assert!(out.contains("no problems found"), "{out}");

    let fresh = GitEnv::with_agent(&[]);
    let clone = fresh.dir("clone");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", &url("org/b"), clone.to_str().unwrap()],
    );
    assert_file_is(&clone.join("shared.bin"), &shared);
    let gone = fresh.git_output(
        &fresh.dir("."),
        &[
            "clone",
            "-q",
            &url("org/a"),
            fresh.dir("gone").to_str().unwrap(),
        ],
    );
    assert!(!gone.status.success(), "org/a is gone");
    // And it can be pushed anew: the collected content is uploaded again (git-lfs believes
    // the remote has the objects of commits it pushed before, so they are pushed explicitly,
    // as the server's refusal of a plain re-push says).
    env.git(&a, &["lfs", "push", "--all", "origin"]);
    env.git(&a, &["push", "-q", "origin", "main"]);
    let again = fresh.dir("again");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", &url("org/a"), again.to_str().unwrap()],
    );
    assert_file_is(&again.join("unique.bin"), &unique);
    assert_file_is(&again.join("shared.bin"), &shared);
}
