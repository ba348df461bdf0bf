//! The storage gauges of `/metrics` (`git_xet_stored_xorbs`, `git_xet_stored_xorb_bytes`,
//! `git_xet_registered_files`) say what the index holds when scraped: in a process other
//! than the one that stored it (two servers sharing a PostgreSQL index), and after `gc`.

use crate::common::{Cas, Upload};
use crate::support::{parse_metric, postgres, TestServer};

const REPO: &str = "org/gauges";

/// (xorbs, xorb bytes, files) as `server` reports them now.
fn gauges(server: &TestServer) -> (f64, f64, f64) {
    let text = server.metrics();
    (
        parse_metric(&text, "git_xet_stored_xorbs"),
        parse_metric(&text, "git_xet_stored_xorb_bytes"),
        parse_metric(&text, "git_xet_registered_files"),
    )
}

/// `git xet server ARGS` on `server`'s data, index and `store` (a directory; `None`: the
/// data directory).
fn admin_ok(server: &TestServer, store: Option<&str>, args: &[&str]) {
    let mut cmd = server.admin(args);
    if let Some(store) = store {
        cmd.args(["--object-store", store]);
    }
    let out = cmd.output().expect("run git xet server");
    assert!(
        out.status.success(),
        "git xet server {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn storage_gauges_follow_a_shared_index_across_processes_and_gc() {
    let Some(db) = postgres::database() else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let store = store.path().display().to_string();
    let args = ["--index", &db.url, "--object-store", &store, "--no-fsync"];
    let one = TestServer::start_with(&args);
    let two = TestServer::start_with(&args);
    assert_eq!(gauges(&two), (0.0, 0.0, 0.0));

    let up = Upload::random(300_000, 31, 2);
    assert!(up.xorbs.len() > 1);
    Cas::new(&one, REPO, "write").upload(&up);
    let bytes: usize = up.xorbs.iter().map(|x| x.bytes.len()).sum();
    let stored = (up.xorbs.len() as f64, bytes as f64, 1.0);
    assert_eq!(gauges(&two), stored, "the process that stored nothing");
    assert_eq!(gauges(&one), stored, "the process that stored it");

    admin_ok(&one, Some(&store), &["repo", "delete", REPO, "--yes"]);
    admin_ok(&one, Some(&store), &["gc", "--grace", "0"]);
    assert_eq!(
        gauges(&one),
        (0.0, 0.0, 0.0),
        "after gc, where it was stored"
    );
    assert_eq!(
        gauges(&two),
        (0.0, 0.0, 0.0),
        "after gc, in the other process"
    );
}

/// On one SQLite index too: what gc freed leaves the gauges of the running server.
#[test]
fn storage_gauges_drop_after_gc_on_sqlite() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let up = Upload::random(300_000, 32, 8);
    Cas::new(&server, REPO, "write").upload(&up);
    assert_eq!(gauges(&server).2, 1.0);
    admin_ok(&server, None, &["repo", "delete", REPO, "--yes"]);
    admin_ok(&server, None, &["gc", "--grace", "0"]);
    assert_eq!(gauges(&server), (0.0, 0.0, 0.0));
}
