//! A failure's request id reaches the user: what git-lfs and the agent print names the id
//! the server logged the failed request under (as JSON, `--log-format json`), so a user's
//! report finds the server's side of it.

use std::path::Path;

use crate::env::{remote_url, stderr, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

/// The ids quoted as `(request id ID)` in `text`.
fn quoted_ids(text: &str) -> Vec<String> {
    text.split("(request id ")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(id, _)| id.to_string()))
        .collect()
}

/// The JSON log lines of `server` with `request_id` `id`.
fn logged(server: &TestServer, id: &str) -> Vec<serde_json::Value> {
    server
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["request_id"] == id)
        .collect()
}

/// Files under `dir` (recursively).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn failed_pushes_and_downloads_print_the_request_id_the_server_logged() {
    let server = TestServer::start_with(&["--log-format", "json"]);
    let env = GitEnv::with_agent(&[]);
    let write = remote_url(&server, "org/ids", "write");
    let a = env.lfs_repo("a", &write);
    write_file(&a.join("data.bin"), &random_bytes(3 << 20, 61));
    env.commit_all_and_push(&a, "data");

    // git-lfs's own request refused (a read token pushing): it prints the server's message.
    let read = remote_url(&server, "org/ids", "read");
    env.git(&a, &["remote", "set-url", "origin", &read]);
    write_file(&a.join("more.bin"), &random_bytes(100_000, 62));
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "more"]);
    let out = env.git_output(&a, &["push", "origin", "main"]);
    let err = stderr(&out);
    eprintln!("push with a read token said:\n{err}");
    assert!(!out.status.success());
    let ids = quoted_ids(&err);
    assert!(!ids.is_empty(), "no request id in:\n{err}");
    assert!(
        ids.iter()
            .any(|id| logged(&server, id).iter().any(|l| l["status"] == 403)),
        "none of {ids:?} is a refused request in the server's log"
    );

    // The agent's download refused (the xorbs are gone from the store): the agent's error,
    // as git-lfs shows it, carries the id of the refused fetch.
    let xorbs: Vec<_> = files_under(&server.data.join("xorbs"));
    assert!(
        !xorbs.is_empty(),
        "no xorbs under {}",
        server.data.display()
    );
    xorbs.iter().for_each(|x| std::fs::remove_file(x).unwrap());
    let fresh = GitEnv::with_agent(&[]);
    let b = fresh.dir("b");
    let out = fresh.git_output(&fresh.dir("."), &["clone", &write, b.to_str().unwrap()]);
    let err = stderr(&out);
    eprintln!("clone with the xorbs gone said:\n{err}");
    let ids = quoted_ids(&err);
    assert!(!ids.is_empty(), "no request id in:\n{err}");
    assert!(
        ids.iter().any(|id| logged(&server, id)
            .iter()
            .any(|l| l["status"].as_u64().is_some_and(|s| s >= 400))),
        "none of {ids:?} is a failed request in the server's log:\n{}",
        server.log_text()
    );
}
