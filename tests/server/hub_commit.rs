//! The Hub commit flow (`POST /api/models/{repo}/commit/{branch}`) against a tree that git
//! wrote: paths are bytes to git, and a commit through the Hub keeps the files it does not
//! touch exactly as they were named, UTF-8 or not. With real git pushing to our server; the
//! real huggingface_hub client is exercised in tests/interop/hub.rs.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use base64::Engine;

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::TestServer;

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
