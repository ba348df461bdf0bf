//! Pushes are durable and a push whose client goes away never blocks the repository.
//!
//! Every git the server starts in a hosted repository, new or old, runs with git's fsync
//! settings. A client that goes away never blocks the repository: killed while sending its
//! pack, while the server's git holds the ref locks (paused there by a
//! `reference-transaction` hook), or after; by a raw smart-HTTP client and by a real
//! `git push`. The next push is accepted. A lock file planted by hand (as a git killed by
//! a crash leaves it) is reported by `check` and removed by the next push.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::common::{raw_request, wait_for};
use crate::gitenv::GitEnv;
use crate::support::{git_xet, random_bytes, write_file, TestServer};

const REPO: &str = "org/c2";

/// A pause in the hosted repository's ref update: while `pause` exists, the
/// `reference-transaction` hook (run by git with the ref locks taken, before it commits
/// them) waits, having created `paused`.
struct Pause {
    dir: tempfile::TempDir,
}

impl Pause {
    fn install(bare: &Path) -> Pause {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let hook = bare.join("hooks/reference-transaction");
        let script = format!(
            "#!/bin/sh\n[ \"$1\" = prepared ] || exit 0\ncat > /dev/null\n\
             [ -e '{d}/pause' ] || exit 0\ntouch '{d}/paused'\n\
             while [ -e '{d}/pause' ]; do sleep 0.05; done\n"
        );
        std::fs::write(&hook, script).unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        Pause { dir }
    }

    fn arm(&self) {
        let _ = std::fs::remove_file(self.dir.path().join("paused"));
        std::fs::write(self.dir.path().join("pause"), "").unwrap();
    }

    fn wait_paused(&self) {
        let paused = self.dir.path().join("paused");
        assert!(
            wait_for(|| paused.exists()),
            "the push never reached its ref update"
        );
    }

    fn release(&self) {
        let _ = std::fs::remove_file(self.dir.path().join("pause"));
    }
}

/// git's lock files in the repository.
fn lock_files(bare: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![bare.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && (dir != bare || path.ends_with("refs")) {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                found.push(path);
            }
        }
    }
    found
}

/// Waits until the server's git is done with the repository (no lock file left); a
/// repository that keeps one is what the next push then fails on.
fn settle(bare: &Path) {
    wait_for(|| lock_files(bare).is_empty());
}

fn commit(env: &GitEnv, work: &Path, name: &str, bytes: &[u8]) -> String {
    write_file(&work.join(name), bytes);
    env.git(work, &["add", name]);
    env.git(work, &["commit", "-q", "-m", name]);
    env.git(work, &["rev-parse", "HEAD"]).trim().to_string()
}

fn pkt(payload: &str) -> String {
    format!("{:04x}{payload}", payload.len() + 4)
}

/// The body of a receive-pack request moving main from `old` to `new`: the command, a
/// flush, the pack of what `new` adds.
fn push_body(env: &GitEnv, work: &Path, old: &str, new: &str) -> Vec<u8> {
    let mut body = pkt(&format!(
        "{old} {new} refs/heads/main\0report-status side-band-64k agent=test\n"
    ))
    .into_bytes();
    body.extend_from_slice(b"0000");
    let mut pack = env
        .cmd("git", work)
        .args(["pack-objects", "--stdout", "--revs", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let revs = format!("{new}\n^{old}\n");
    pack.stdin
        .take()
        .unwrap()
        .write_all(revs.as_bytes())
        .unwrap();
    let out = pack.wait_with_output().unwrap();
    assert!(out.status.success());
    body.extend_from_slice(&out.stdout);
    body
}

/// Pushes a new commit with stock git and asserts the server took it.
fn push_accepted(env: &GitEnv, work: &Path, name: &str, seed: u64) {
    let tip = commit(env, work, name, &random_bytes(10_000, seed));
    let out = env.git_output(work, &["push", "origin", "HEAD:main"]);
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "the next push was refused:\n{text}");
    let listed = env.git(work, &["ls-remote", "origin", "refs/heads/main"]);
    assert!(listed.starts_with(&tip), "{listed}");
}

#[test]
fn a_client_killed_at_any_phase_of_its_push_does_not_block_the_next() {
    let server = TestServer::start();
    let token = server.token(REPO, "write");
    let env = GitEnv::new(Some(&token));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let remote = format!("{}/{REPO}.git", server.url);
    env.git(&work, &["remote", "add", "origin", &remote]);
    let base = commit(&env, &work, "a.txt", b"a\n");
    env.git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let bare = server.data.join(format!("repos/{REPO}.git"));
    let pause = Pause::install(&bare);
    let path = format!("/{REPO}.git/git-receive-pack");

    // 1. A raw client that sends half its pack and hangs up.
    let new = commit(&env, &work, "big.dat", &random_bytes(2_000_000, 1));
    let body = push_body(&env, &work, &base, &new);
    let mut stream = raw_request(&server, "POST", &path, &token, body.len());
    stream.write_all(&body[..body.len() / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(stream);
    settle(&bare);
    push_accepted(&env, &work, "after-upload.txt", 2);

    // 2. A raw client that sends it all, then hangs up while git holds the ref locks.
    let old = env.git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let new = commit(&env, &work, "two.dat", &random_bytes(100_000, 3));
    let body = push_body(&env, &work, &old, &new);
    pause.arm();
    let mut stream = raw_request(&server, "POST", &path, &token, body.len());
    stream.write_all(&body).unwrap();
    pause.wait_paused();
    stream.shutdown(std::net::Shutdown::Both).unwrap();
    drop(stream);
    // Time for the server to see the client gone (and for a server that killed git, to kill it).
    std::thread::sleep(Duration::from_millis(500));
    pause.release();
    settle(&bare);
    push_accepted(&env, &work, "after-ref-update.txt", 4);

    // 3. A real `git push`, killed (with its transport helper) in the same place.
    commit(&env, &work, "three.bin", &random_bytes(100_000, 5));
    pause.arm();
    let mut push = env.cmd("git", &work);
    push.args(["push", "-q", "origin", "HEAD:main"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut push, 0);
    let mut child = push.spawn().unwrap();
    pause.wait_paused();
    // SAFETY: signals the process group of the child this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    pause.release();
    settle(&bare);
    push_accepted(&env, &work, "after-git-push.txt", 6);

    // 4. A raw client that hangs up once the push is done, without reading the answer.
    let old = env.git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let new = commit(&env, &work, "four.dat", &random_bytes(100_000, 7));
    let body = push_body(&env, &work, &old, &new);
    let mut stream = raw_request(&server, "POST", &path, &token, body.len());
    stream.write_all(&body).unwrap();
    let mut first = [0u8; 1];
    stream.read_exact(&mut first).unwrap();
    drop(stream);
    // The first byte may come before the ref moved (git's keep-alive while the hook runs
    // on a loaded machine): the push still lands, and only then is the next one's
    // advertisement current. No lock file alone does not say it has landed.
    let main_at = || {
        env.git(&bare, &["rev-parse", "refs/heads/main"])
            .trim()
            .to_string()
    };
    assert!(
        wait_for(|| main_at() == new),
        "the push whose client hung up did not land: main at {}",
        main_at()
    );
    settle(&bare);
    push_accepted(&env, &work, "after-done.txt", 8);
    assert!(lock_files(&bare).is_empty(), "{:?}", lock_files(&bare));
}

fn check(server: &TestServer) -> (bool, String) {
    let out = git_xet()
        .args(["server", "check", "--data"])
        .arg(&server.data)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_stale_lock_file_is_reported_by_check_and_does_not_block_a_push() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token(REPO, "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let remote = format!("{}/{REPO}.git", server.url);
    env.git(&work, &["remote", "add", "origin", &remote]);
    commit(&env, &work, "a.txt", b"a\n");
    env.git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let (ok, text) = check(&server);
    assert!(ok && text.contains("git repositories checked: 1"), "{text}");

    // What a git killed in its ref transaction leaves.
    let bare = server.data.join(format!("repos/{REPO}.git"));
    let planted = [bare.join("HEAD.lock"), bare.join("refs/heads/main.lock")];
    for lock in &planted {
        std::fs::write(lock, "0000000000000000000000000000000000000000\n").unwrap();
    }
    let (ok, text) = check(&server);
    assert!(!ok, "{text}");
    for lock in &planted {
        let line = format!("git lock file {}", lock.display());
        assert!(text.contains(&line), "{text}");
    }
    push_accepted(&env, &work, "b.txt", 1);
    assert!(planted.iter().all(|l| !l.exists()));
    let (ok, text) = check(&server);
    assert!(ok, "{text}");
}

#[test]
fn the_server_runs_git_with_fsync_in_new_and_existing_repositories() {
    use std::os::unix::fs::PermissionsExt;
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token(REPO, "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    let remote = format!("{}/{REPO}.git", server.url);
    env.git(&work, &["remote", "add", "origin", &remote]);
    commit(&env, &work, "a.txt", b"a\n");
    env.git(&work, &["push", "-q", "origin", "HEAD:main"]);
    // An `update` hook (receive-pack runs it) records the settings git sees.
    let bare = server.data.join(format!("repos/{REPO}.git"));
    let seen = env.home.path().join("seen");
    let hook = bare.join("hooks/update");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\n{{ git config core.fsync; git config core.fsyncMethod; }} > '{}'\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    commit(&env, &work, "b.txt", b"b\n");
    env.git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let settings = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(settings, "committed\nfsync\n");
    // Given on the command line, not stored: a repository made before has them too.
    let stored = std::fs::read_to_string(bare.join("config")).unwrap();
    assert!(!stored.contains("fsync"), "{stored}");
}
