//! The Hub commit flow (`POST /api/models/{repo}/commit/{branch}`) against a tree that git
//! wrote: paths are bytes to git, and a commit through the Hub changes exactly the paths it
//! names (submodules, symlinks, modes and names that are not UTF-8 stay as they were). Its
//! request is read as it arrives: bad input, at any line, is refused and leaves no object in
//! the repository; a line too long for a regular file is refused saying to use LFS/XET. With
//! real git pushing to our server; the real huggingface_hub client is exercised in
//! tests/interop/hub.rs, locks and refs in tests/server/hub_locks.rs.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{json, Value};

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::TestServer;

/// A commit request's body: one JSON line each.
pub fn ndjson(lines: &[Value]) -> Vec<u8> {
    lines.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes()
}

pub fn header(summary: &str) -> Value {
    json!({"key": "header", "value": {"summary": summary}})
}

pub fn file_line(path: &str, content: &[u8]) -> Value {
    let content = base64::engine::general_purpose::STANDARD.encode(content);
    json!({"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}})
}

/// POSTs a commit of `body` onto `branch` of the model `repo`: status and answer.
pub fn hub_commit(
    server: &TestServer,
    token: &str,
    repo: &str,
    branch: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let answer = client()
        .post(format!("{}/api/models/{repo}/commit/{branch}", server.url))
        .bearer_auth(token)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The hosted bare repository of `repo`.
pub fn bare(server: &TestServer, repo: &str) -> PathBuf {
    server.data.join(format!("repos/{repo}.git"))
}

/// Runs git in the bare repository `dir` (outside any test environment: plumbing only).
pub fn bare_git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap()
}

/// Every object the bare repository stores (loose or packed), and whether a quarantine of a
/// write is left in its `objects/`.
pub fn stored_objects(dir: &Path) -> (Vec<String>, bool) {
    let out = bare_git(
        dir,
        &["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"],
    );
    assert!(out.status.success(), "{out:?}");
    let objects = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let left = std::fs::read_dir(dir.join("objects"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("hub-incoming-"));
    (objects, left)
}

/// `git hash-object` of `bytes`: the id a blob of them has.
pub fn blob_id(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `(mode, type, id, path)` of every entry of `rev`'s tree, recursively (submodules too).
fn entries(env: &GitEnv, work: &Path, rev: &str) -> Vec<(String, Vec<u8>)> {
    let out = env.git_output(work, &["ls-tree", "-r", "-z", rev]);
    assert!(out.status.success(), "{out:?}");
    out.stdout
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let tab = e.iter().position(|&b| b == b'\t').unwrap();
            (String::from_utf8(e[..tab].to_vec()).unwrap(), e[tab + 1..].to_vec())
        })
        .collect()
}

/// The paths of `rev`'s tree in `work`, as git stores them.
fn tree_paths(env: &GitEnv, work: &std::path::Path, rev: &str) -> Vec<Vec<u8>> {
    let out = env.git_output(work, &["ls-tree", "-r", "-z", "--name-only", rev]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut paths: Vec<Vec<u8>> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    paths.sort();
    paths
}

#[test]
fn a_hub_commit_keeps_file_names_that_are_not_utf8() {
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    let env = GitEnv::new(Some(&token));
    let work = env.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    env.git(&work, &["init", "-q", "-b", "main"]);
    // Latin-1 names (what an old archive unpacks to), one in a directory deleted below.
    let latin1 = b"caf\xe9.txt".to_vec();
    let in_dir = b"old/r\xe9sum\xe9.txt".to_vec();
    for name in [&latin1, &in_dir, &b"keep.txt".to_vec()] {
        let path = work.join(OsStr::from_bytes(name));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"bytes\n").unwrap();
    }
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "latin-1 names"]);
    let url = format!("{}/org/names.git", server.url);
    env.git(&work, &["remote", "add", "origin", &url]);
    env.git(&work, &["push", "-q", "origin", "main"]);

    let content = base64::engine::general_purpose::STANDARD.encode(b"added\n");
    let body = [
        serde_json::json!({"key": "header", "value": {"summary": "through the Hub"}}),
        serde_json::json!({"key": "file",
            "value": {"path": "added.txt", "content": content, "encoding": "base64"}}),
        serde_json::json!({"key": "deletedFolder", "value": {"path": "old"}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let answer = client()
        .post(format!("{}/api/models/org/names/commit/main", server.url))
        .bearer_auth(&token)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .unwrap();
    let status = answer.status().as_u16();
    assert_eq!(status, 200, "{}", answer.text().unwrap());

    env.git(&work, &["fetch", "-q", "origin"]);
    let expected: Vec<Vec<u8>> = vec![b"added.txt".to_vec(), latin1, b"keep.txt".to_vec()];
    let mut expected = expected;
    expected.sort();
    assert_eq!(
        tree_paths(&env, &work, "origin/main"),
        expected,
        "the Hub commit renamed or lost a file"
    );
    // The untouched file is the same blob it was.
    let blob = |rev: &str| env.git(&work, &["rev-parse", &format!("{rev}:keep.txt")]);
    assert_eq!(blob("origin/main"), blob("main"));
}

/// `create_repo` through the Hub API: a repository whose `main` holds `.gitattributes`.
pub fn create_repo(server: &TestServer, token: &str, repo: &str) {
    let (org, name) = repo.split_once('/').unwrap();
    let answer = client()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(token)
        .json(&json!({"name": name, "organization": org}))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200, "{}", answer.text().unwrap());
}

/// The commit `rev` names in the bare repository.
pub fn rev_parse(dir: &Path, rev: &str) -> String {
    let out = bare_git(dir, &["rev-parse", "--verify", rev]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_hub_commit_keeps_submodules_symlinks_and_modes_it_does_not_name() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    let env = GitEnv::new(Some(&token));
    let work = env.home.path().join("work");
    std::fs::create_dir_all(work.join("docs")).unwrap();
    env.git(&work, &["init", "-q", "-b", "main"]);
    for (path, text, mode) in [
        ("run.sh", "#!/bin/sh\necho run\n", 0o755),
        ("tool.sh", "#!/bin/sh\necho tool\n", 0o755),
        ("target.txt", "target\n", 0o644),
        ("docs/readme.md", "# docs\n", 0o644),
        (".gitmodules", "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ../lib.git\n", 0o644),
    ] {
        std::fs::write(work.join(path), text).unwrap();
        std::fs::set_permissions(work.join(path), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    symlink("target.txt", work.join("link")).unwrap();
    symlink("docs", work.join("swap")).unwrap();
    env.git(&work, &["add", "."]);
    // A submodule's entry, as `git submodule add` records it: another repository's commit.
    let submodule = "160000,1234567890abcdef1234567890abcdef12345678,vendor/lib";
    env.git(&work, &["update-index", "--add", "--cacheinfo", submodule]);
    env.git(&work, &["commit", "-q", "-m", "a tree of every kind"]);
    let url = format!("{}/org/kinds.git", server.url);
    env.git(&work, &["remote", "add", "origin", &url]);
    env.git(&work, &["push", "-q", "origin", "main"]);

    // Changes the executable script, replaces a symlink with a file, adds one.
    let body = ndjson(&[
        header("three paths"),
        file_line("run.sh", b"#!/bin/sh\necho changed\n"),
        file_line("swap", b"a file now\n"),
        file_line("new.txt", b"new\n"),
    ]);
    let (status, answer) = hub_commit(&server, &token, "org/kinds", "main", body);
    assert_eq!(status, 200, "{answer}");
    env.git(&work, &["fetch", "-q", "origin"]);
    let before = entries(&env, &work, "main");
    let after = entries(&env, &work, "origin/main");
    let named: [&[u8]; 3] = [b"run.sh", b"swap", b"new.txt"];
    for entry in &before {
        if !named.contains(&entry.1.as_slice()) {
            assert!(after.contains(entry), "{entry:?} changed or went: {after:?}");
        }
    }
    assert!(before.iter().any(|e| e.0.starts_with("160000 commit ")), "{before:?}");
    assert!(before.iter().any(|e| e.0.starts_with("120000 blob ")), "{before:?}");
    let at = |path: &[u8]| after.iter().find(|e| e.1 == path).unwrap().0.clone();
    let run_id = blob_id(b"#!/bin/sh\necho changed\n");
    assert_eq!(at(b"run.sh"), format!("100755 blob {run_id}"), "still executable");
    assert_eq!(at(b"swap"), format!("100644 blob {}", blob_id(b"a file now\n")));
    assert_eq!(at(b"new.txt"), format!("100644 blob {}", blob_id(b"new\n")));
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    // git checks the Hub's commit out as it would its own.
    env.git(&work, &["merge", "-q", "--ff-only", "origin/main"]);
    assert_eq!(std::fs::read_link(work.join("link")).unwrap(), Path::new("target.txt"));
    let mode = std::fs::metadata(work.join("run.sh")).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "run.sh lost its executable bits");
}

#[test]
fn bad_commit_requests_are_refused_at_any_line_and_leave_no_object() {
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    create_repo(&server, &token, "org/bad");
    let dir = bare(&server, "org/bad");
    let head = rev_parse(&dir, "main");
    let before = stored_objects(&dir);
    assert!(!before.1);
    let first = b"the first file of a commit that fails later\n";
    let good = || file_line("first.txt", first);
    let missing_oid = "ab".repeat(32);
    let pointer = format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{missing_oid}\nsize 12345\n"
    );
    let long_line = {
        let mut line = json!({"key": "file", "value": {"path": "big.txt", "encoding": "base64",
            "content": "A".repeat((16 << 20) + 1024)}})
        .to_string()
        .into_bytes();
        line.push(b'\n');
        line
    };
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (ndjson(&[good()]), 400, "header"),
        (
            ndjson(&[header("h"), good(), json!({"key": "file", "value": {"path": "x"}})]),
            400,
            "line 3",
        ),
        (ndjson(&[header("h"), good(), file_line("../x", b"x")]), 400, "invalid path"),
        (ndjson(&[header("h"), good(), file_line("a/.git/x", b"x")]), 400, "invalid path"),
        (
            ndjson(&[header("h"), good(), json!({"key": "deletedFile", "value": {"path": "nope"}})]),
            404,
            "doesn't exist",
        ),
        (
            ndjson(&[
                header("h"),
                good(),
                json!({"key": "lfsFile", "value": {"path": "w.bin", "oid": missing_oid, "size": 5}}),
            ]),
            400,
            "was not uploaded",
        ),
        (
            ndjson(&[header("h"), good(), json!({"key": "copyFile", "value": {}})]),
            400,
            "copyFile",
        ),
        (
            [ndjson(&[header("h"), good()]), long_line].concat(),
            413,
            "LFS/XET",
        ),
        // A pointer to an object the repository lacks: refused, as in a push.
        (ndjson(&[header("h"), good(), file_line("p.bin", pointer.as_bytes())]), 400, &missing_oid),
    ];
    for (body, status, says) in cases {
        let (got, answer) = hub_commit(&server, &token, "org/bad", "main", body);
        assert_eq!(got, status, "{answer}");
        assert!(answer.to_string().contains(says), "{says:?} not in {answer}");
        assert_eq!(rev_parse(&dir, "main"), head);
        assert_eq!(stored_objects(&dir), before, "a refused commit left objects");
    }
    // A body cut short: the connection closes mid-line.
    let body = ndjson(&[header("h"), good()]);
    let path = "/api/models/org/bad/commit/main";
    let mut stream = crate::common::raw_request(&server, "POST", path, &token, body.len() + 100);
    use std::io::Write;
    stream.write_all(&body).unwrap();
    stream.write_all(b"{\"key\": \"fi").unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
    assert!(
        crate::common::wait_for(|| stored_objects(&dir) == before),
        "a cut-short commit left objects"
    );
    assert_eq!(rev_parse(&dir, "main"), head);
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn a_hub_commit_of_ten_thousand_files_and_a_file_near_the_lfs_threshold() {
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    create_repo(&server, &token, "org/many");
    let mut lines = vec![header("many files")];
    for i in 0..10_000 {
        lines.push(file_line(&format!("f/{:02}/{i:05}.txt", i % 100), format!("file {i}\n").as_bytes()));
    }
    // Just under the 10 MiB from which huggingface_hub sends files through LFS.
    let big = crate::support::random_bytes(10 * 1024 * 1024 - 1, 7);
    lines.push(file_line("big.dat", &big));
    let (status, answer) = hub_commit(&server, &token, "org/many", "main", ndjson(&lines));
    assert_eq!(status, 200, "{answer}");
    let dir = bare(&server, "org/many");
    let out = bare_git(&dir, &["ls-tree", "-r", "--name-only", "main"]);
    let names = String::from_utf8(out.stdout).unwrap();
    assert_eq!(names.lines().count(), 10_002, "10,000 files, big.dat, .gitattributes");
    assert_eq!(rev_parse(&dir, "main:f/34/01234.txt"), blob_id(b"file 1234\n"));
    assert_eq!(rev_parse(&dir, "main:big.dat"), blob_id(&big));
    assert!(!stored_objects(&dir).1, "the quarantine is gone");
}
