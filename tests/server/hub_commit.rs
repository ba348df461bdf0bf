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
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
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
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
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
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ],
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
            (
                String::from_utf8(e[..tab].to_vec()).unwrap(),
                e[tab + 1..].to_vec(),
            )
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

/// A repository pushed with git whose tree has an entry of every kind: executable scripts
/// (`run.sh`, `tool.sh`), symlinks (`link` to a file, `swap` to a directory), a submodule's
/// entry (gitlink `vendor/lib`) and regular files; and the clone it was pushed from.
struct Kinds {
    server: TestServer,
    token: String,
    env: GitEnv,
    work: PathBuf,
}

const GITLINK: &str = "1234567890abcdef1234567890abcdef12345678";

fn kinds() -> Kinds {
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
        (
            ".gitmodules",
            "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ../lib.git\n",
            0o644,
        ),
    ] {
        std::fs::write(work.join(path), text).unwrap();
        std::fs::set_permissions(work.join(path), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    symlink("target.txt", work.join("link")).unwrap();
    symlink("docs", work.join("swap")).unwrap();
    env.git(&work, &["add", "."]);
    // A submodule's entry, as `git submodule add` records it: another repository's commit.
    let submodule = format!("160000,{GITLINK},vendor/lib");
    env.git(&work, &["update-index", "--add", "--cacheinfo", &submodule]);
    env.git(&work, &["commit", "-q", "-m", "a tree of every kind"]);
    let url = format!("{}/org/kinds.git", server.url);
    env.git(&work, &["remote", "add", "origin", &url]);
    env.git(&work, &["push", "-q", "origin", "main"]);
    Kinds {
        server,
        token,
        env,
        work,
    }
}

impl Kinds {
    /// Commits `files` (path, content) through the Hub API; the tree's entries before and
    /// after, as `(mode type id, path)`.
    #[allow(clippy::type_complexity)]
    fn commit(&self, files: &[(&str, &[u8])]) -> (Vec<(String, Vec<u8>)>, Vec<(String, Vec<u8>)>) {
        let mut lines = vec![header("named paths")];
        lines.extend(files.iter().map(|(path, content)| file_line(path, content)));
        let (status, answer) = hub_commit(
            &self.server,
            &self.token,
            "org/kinds",
            "main",
            ndjson(&lines),
        );
        assert_eq!(status, 200, "{answer}");
        self.env.git(&self.work, &["fetch", "-q", "origin"]);
        let before = entries(&self.env, &self.work, "main");
        let after = entries(&self.env, &self.work, "origin/main");
        // Whatever the commit did not name is exactly as it was.
        for entry in &before {
            if !files
                .iter()
                .any(|(path, _)| path.as_bytes() == entry.1.as_slice())
            {
                assert!(
                    after.contains(entry),
                    "{entry:?} changed or went: {after:?}"
                );
            }
        }
        (before, after)
    }

    /// Checks the Hub's commit out in the clone, as git would its own.
    fn check_out(&self) {
        self.env
            .git(&self.work, &["merge", "-q", "--ff-only", "origin/main"]);
    }
}

fn mode_of(entries: &[(String, Vec<u8>)], path: &[u8]) -> String {
    entries.iter().find(|e| e.1 == path).unwrap().0.clone()
}

#[test]
fn a_hub_commit_adding_a_file_keeps_the_submodule_entry() {
    let k = kinds();
    let (before, after) = k.commit(&[("new.txt", b"new\n")]);
    let gitlink = format!("160000 commit {GITLINK}");
    assert_eq!(mode_of(&before, b"vendor/lib"), gitlink);
    assert_eq!(
        mode_of(&after, b"vendor/lib"),
        gitlink,
        "the gitlink went: {after:?}"
    );
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    k.check_out();
}

#[test]
fn a_hub_commit_keeps_symlinks_and_a_file_it_writes_over_one_is_regular() {
    let k = kinds();
    let (before, after) = k.commit(&[("swap", b"a file now\n"), ("new.txt", b"new\n")]);
    let link = mode_of(&before, b"link");
    assert!(link.starts_with("120000 blob "), "{before:?}");
    assert_eq!(mode_of(&after, b"link"), link);
    assert!(mode_of(&before, b"swap").starts_with("120000 blob "));
    assert_eq!(
        mode_of(&after, b"swap"),
        format!("100644 blob {}", blob_id(b"a file now\n"))
    );
    k.check_out();
    assert_eq!(
        std::fs::read_link(k.work.join("link")).unwrap(),
        Path::new("target.txt")
    );
    assert_eq!(std::fs::read(k.work.join("swap")).unwrap(), b"a file now\n");
}

#[test]
fn a_hub_commit_keeps_executable_bits_of_files_it_changes_or_not() {
    use std::os::unix::fs::PermissionsExt;
    let k = kinds();
    let script = b"#!/bin/sh\necho changed\n";
    let (before, after) = k.commit(&[("run.sh", script)]);
    assert!(mode_of(&before, b"run.sh").starts_with("100755 "));
    assert_eq!(
        mode_of(&after, b"run.sh"),
        format!("100755 blob {}", blob_id(script))
    );
    assert_eq!(mode_of(&after, b"tool.sh"), mode_of(&before, b"tool.sh"));
    assert!(mode_of(&after, b"tool.sh").starts_with("100755 "));
    k.check_out();
    for script in ["run.sh", "tool.sh"] {
        let mode = std::fs::metadata(k.work.join(script))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{script} lost its executable bits");
    }
}

#[test]
fn a_hub_commit_keeps_every_entry_it_does_not_name() {
    let k = kinds();
    let (before, after) = k.commit(&[("docs/readme.md", b"# new docs\n")]);
    // Every other entry is compared in `commit`; none is added or lost.
    assert_eq!(after.len(), before.len(), "{after:?}");
    let changed: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
    let readme = format!("100644 blob {}", blob_id(b"# new docs\n"));
    assert_eq!(changed, [&(readme, b"docs/readme.md".to_vec())]);
    k.check_out();
    assert_eq!(
        std::fs::read(k.work.join("target.txt")).unwrap(),
        b"target\n"
    );
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
            ndjson(&[
                header("h"),
                good(),
                json!({"key": "file", "value": {"path": "x"}}),
            ]),
            400,
            "line 3",
        ),
        (
            ndjson(&[header("h"), good(), file_line("../x", b"x")]),
            400,
            "invalid path",
        ),
        (
            ndjson(&[header("h"), good(), file_line("a/.git/x", b"x")]),
            400,
            "invalid path",
        ),
        (
            ndjson(&[
                header("h"),
                good(),
                json!({"key": "deletedFile", "value": {"path": "nope"}}),
            ]),
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
        (
            ndjson(&[header("h"), good(), file_line("p.bin", pointer.as_bytes())]),
            400,
            &missing_oid,
        ),
    ];
    for (body, status, says) in cases {
        let (got, answer) = hub_commit(&server, &token, "org/bad", "main", body);
        assert_eq!(got, status, "{answer}");
        assert!(
            answer.to_string().contains(says),
            "{says:?} not in {answer}"
        );
        assert_eq!(rev_parse(&dir, "main"), head);
        assert_eq!(
            stored_objects(&dir),
            before,
            "a refused commit left objects"
        );
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
        lines.push(file_line(
            &format!("f/{:02}/{i:05}.txt", i % 100),
            format!("file {i}\n").as_bytes(),
        ));
    }
    // Just under the 10 MiB from which huggingface_hub sends files through LFS.
    let big = crate::support::random_bytes(10 * 1024 * 1024 - 1, 7);
    lines.push(file_line("big.dat", &big));
    let (status, answer) = hub_commit(&server, &token, "org/many", "main", ndjson(&lines));
    assert_eq!(status, 200, "{answer}");
    let dir = bare(&server, "org/many");
    let out = bare_git(&dir, &["ls-tree", "-r", "--name-only", "main"]);
    let names = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        names.lines().count(),
        10_002,
        "10,000 files, big.dat, .gitattributes"
    );
    assert_eq!(
        rev_parse(&dir, "main:f/34/01234.txt"),
        blob_id(b"file 1234\n")
    );
    assert_eq!(rev_parse(&dir, "main:big.dat"), blob_id(&big));
    assert!(!stored_objects(&dir).1, "the quarantine is gone");
}
