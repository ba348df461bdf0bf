//! One tokio runtime per server process: a `git-xet-server` on PostgreSQL and S3 (Garage)
//! runs its backends' I/O on the process's runtime, so every thread it has is the main
//! thread or one of that runtime's (all named `git-xet-server`). The PostgreSQL pool used to
//! start a runtime of its own (threads `git-xet-postgres`), the S3 probe another.

use std::collections::BTreeMap;

use crate::common::*;
use crate::support::garage;
use crate::support::postgres;
use crate::support::TestServer;

/// Thread names of process `pid`, with how many threads carry each.
fn thread_names(pid: u32) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
            *names.entry(comm.trim().to_string()).or_insert(0) += 1;
        }
    }
    names
}

#[test]
fn a_server_on_postgres_and_s3_runs_one_runtime() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let Some(db) = postgres::database() else {
        return;
    };
    let prefix = garage::unique_prefix("runtimes");
    let server = TestServer::start_with_env(Some((garage, &prefix)), &["--index", &db.url], &[]);
    // The index and the store at work: an upload and a reconstruction.
    let cas = Cas::new(&server, "org/runtimes", "write");
    let upload = Upload::random(300_000, 41, 8);
    cas.upload(&upload);
    assert_eq!(cas.download(&upload.file_hash, None), upload.data);

    let names = thread_names(server.pid().expect("running"));
    eprintln!("threads of git-xet-server by name: {names:?}");
    let others: Vec<_> = names.keys().filter(|n| *n != "git-xet-server").collect();
    assert!(others.is_empty(), "threads of another runtime: {names:?}");
}
