//! A directory large enough for the server to keep its listing (2,000 entries and more)
//! pages like a small one: every name once, in order, on its page, directories first. The
//! kept listing of one repository never answers for another repository's same path, nor for
//! another commit of the same branch. Its page does not wait for the directory's last
//! commit, which the server looks up beside it; a small directory's page does.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::env::{remote_url, GitEnv};
use crate::support::TestServer;
use crate::web_pages::page;

/// Files in the big directory: over the size from which listings are kept, and not a
/// multiple of the page size, so the last page is a partial one.
const FILES: usize = 2_450;
const PER_PAGE: usize = 200;

/// One commit with `FILES` files `{prefix}NNNNN.txt` and two subdirectories under `big/`,
/// written by `git fast-import` (fast for thousands of files), pushed to `repo`.
fn push_big_directory(env: &GitEnv, server: &TestServer, name: &str, repo: &str, prefix: &str) {
    let dir = env.dir(name);
    env.git(&dir, &["init", "-q", "-b", "main"]);
    let mut stream = String::from(
        "commit refs/heads/main\ncommitter t <t@example.com> 1700000000 +0000\ndata 4\nbig\n",
    );
    for sub in ["sub-a", "sub-b"] {
        stream.push_str(&format!("M 100644 inline big/{sub}/x\ndata 2\nx\n"));
    }
    for i in 0..FILES {
        let body = format!("{prefix} {i}\n");
        stream.push_str(&format!(
            "M 100644 inline big/{prefix}{i:05}.txt\ndata {}\n{body}",
            body.len()
        ));
    }
    fast_import(env, &dir, &stream);
    let url = remote_url(server, repo, "write");
    env.git(&dir, &["push", "-q", &url, "main"]);
}

fn fast_import(env: &GitEnv, dir: &Path, stream: &str) {
    let mut import = env
        .command("git", dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    import
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(import.wait().unwrap().success());
}

/// The entry names a directory page of `repo` at `rev` links to, in page order.
fn names_on(body: &str, repo: &str, rev: &str) -> Vec<String> {
    let mut names = Vec::new();
    for kind in ["tree", "blob"] {
        let marker = format!("href=\"/{repo}/{kind}/{rev}/big/");
        for (at, _) in body.match_indices(&marker) {
            let rest = &body[at + marker.len()..];
            let name = &rest[..rest.find('"').unwrap()];
            names.push((at, name.to_string()));
        }
    }
    names.sort();
    names.into_iter().map(|(_, name)| name).collect()
}

fn listing(server: &TestServer, repo: &str, rev: &str, page_no: usize) -> Vec<String> {
    let path = match page_no {
        0 => format!("/{repo}/tree/{rev}/big"),
        n => format!("/{repo}/tree/{rev}/big?page={n}"),
    };
    let (status, body) = page(server, &path, None);
    assert_eq!(status, 200, "{path}: {body}");
    names_on(&body, repo, rev)
}

fn expected(prefix: &str) -> Vec<String> {
    let mut all = vec!["sub-a".to_string(), "sub-b".to_string()];
    all.extend((0..FILES).map(|i| format!("{prefix}{i:05}.txt")));
    all
}

#[test]
fn a_kept_directory_pages_every_entry_once_per_repository_and_commit() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let env = GitEnv::plain_lfs();
    push_big_directory(&env, &server, "a", "org/a", "a");
    push_big_directory(&env, &server, "b", "org/b", "b");

    let pages = (FILES + 2).div_ceil(PER_PAGE);
    for (repo, prefix) in [("org/a", "a"), ("org/b", "b")] {
        let mut seen = Vec::new();
        for n in 0..pages {
            let names = listing(&server, repo, "main", n);
            let want = if n + 1 < pages {
                PER_PAGE
            } else {
                FILES + 2 - n * PER_PAGE
            };
            assert_eq!(names.len(), want, "{repo} page {n}");
            seen.extend(names);
        }
        assert_eq!(seen, expected(prefix), "{repo}");
        // A page past the end lists nothing.
        assert!(listing(&server, repo, "main", pages).is_empty());
    }

    // The branch moves on: a file removed, one added. The old commit still lists what it
    // held; the branch lists the new tree, not the kept one.
    let dir = env.dir("a");
    let old = env.git(&dir, &["rev-parse", "HEAD"]).trim().to_string();
    fast_import(
        &env,
        &dir,
        "commit refs/heads/main\ncommitter t <t@example.com> 1700000100 +0000\ndata 8\nmove on\n\
         from refs/heads/main^0\nD big/a00000.txt\nM 100644 inline big/zz-new.txt\ndata 4\nnew\n",
    );
    let url = remote_url(&server, "org/a", "write");
    env.git(&dir, &["push", "-q", &url, "main"]);

    let first = listing(&server, "org/a", "main", 0);
    assert_eq!(&first[..3], ["sub-a", "sub-b", "a00001.txt"]);
    let last = listing(&server, "org/a", "main", pages - 1);
    assert_eq!(last.last().map(String::as_str), Some("zz-new.txt"));
    let at_old = listing(&server, "org/a", &old, 0);
    assert_eq!(&at_old[..3], ["sub-a", "sub-b", "a00000.txt"]);
}

/// Waits (up to 20 s) for `what`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not in 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's last-change lookups held (its `GIT_XET_WEB_TEST_PAUSE` hook) until the test
/// lets them go on: the large directory's first page answers meanwhile, its listing whole
/// and the last commit said to be looked up; a small directory's page waits for it; once the
/// lookups ran, the large directory's page names the commit.
#[test]
fn a_large_directory_lists_before_its_last_commit_is_known() {
    let pause = tempfile::tempdir().unwrap();
    let server = TestServer::start_with_env(
        None,
        &["--anonymous-read"],
        &[("GIT_XET_WEB_TEST_PAUSE", pause.path().display().to_string())],
    );
    let env = GitEnv::plain_lfs();
    push_big_directory(&env, &server, "a", "org/a", "a");
    let head = env.git(&env.dir("a"), &["rev-parse", "HEAD"]);
    let commit_link = format!("href=\"/org/a/commit/{}\"", head.trim());

    let asked = Instant::now();
    let (status, body) = page(&server, "/org/a/tree/main/big", None);
    assert_eq!(status, 200, "{body}");
    assert!(asked.elapsed() < Duration::from_secs(20));
    wait_until("the lookup reaches its pause", || {
        pause.path().join("last-change.reached").exists()
    });
    let names = names_on(&body, "org/a", "main");
    assert_eq!(names, expected("a")[..PER_PAGE], "{body}");
    assert!(body.contains("still being looked up"), "{body}");
    assert!(!body.contains(&commit_link), "{body}");

    std::thread::scope(|s| {
        let small = s.spawn(|| page(&server, "/org/a/tree/main/big/sub-a", None));
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            !small.is_finished(),
            "a small directory's page did not wait for its last commit"
        );
        std::fs::write(pause.path().join("last-change.go"), b"").unwrap();
        let (status, body) = small.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(&commit_link), "{body}");
        assert!(!body.contains("still being looked up"), "{body}");
    });

    wait_until("the large directory's page names its last commit", || {
        page(&server, "/org/a/tree/main/big", None)
            .1
            .contains(&commit_link)
    });
    let (_, body) = page(&server, "/org/a/tree/main/big?page=1", None);
    assert!(body.contains(&commit_link) && !body.contains("still being looked up"));
}
