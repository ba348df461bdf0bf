//! `git xet server` checks its remote engines before it listens: an S3 bucket that does not
//! exist, credentials the store refuses, an endpoint nobody listens on, a PostgreSQL that is
//! unreachable, refuses the role or lacks the database. Each stops the start within seconds,
//! with exit status 1 and a message naming what is wrong and what to do, and leaves nothing
//! in the data directory but what any failed start leaves (its lock file and an empty tmp/).
//! Against a real 3-node Garage and a real PostgreSQL.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::garage::{self, Garage};
use crate::support::ports::ClosedPort;
use crate::support::{git_xet, postgres, TestServer};

/// Runs `git xet server ARGS` on a fresh data directory with `env`; it must exit non-zero
/// within a few seconds, leaving only the lock file and an empty tmp/. Its stderr.
fn refused_start(args: &[&str], env: &[(&str, String)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("stderr");
    let started = Instant::now();
    let mut child = git_xet()
        .args(["server", "--listen", "127.0.0.1:0", "--no-fsync"])
        .arg("--data")
        .arg(&data)
        .arg("--ready-file")
        .arg(dir.path().join("ready"))
        .args(args)
        .env_remove("GIT_XET_SERVER_INDEX")
        .env_remove("GIT_XET_SERVER_OBJECT_STORE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?}: still running after 30 s:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let said = std::fs::read_to_string(&log).unwrap();
    eprintln!("{args:?} refused in {elapsed:?}: {said}");
    assert_eq!(status.code(), Some(1), "{args:?}: {said}");
    assert!(
        elapsed < Duration::from_secs(10),
        "{args:?}: refused after {elapsed:?}: {said}"
    );
    assert!(!dir.path().join("ready").exists(), "never ready");
    assert_eq!(entries(&data), ["server.lock", "tmp"], "{args:?}");
    assert!(entries(&data.join("tmp")).is_empty(), "{args:?}");
    said
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_says(said: &str, expected: &[&str]) {
    for e in expected {
        assert!(said.contains(e), "expected {e:?} in:\n{said}");
    }
}

/// The cluster's environment with `key` replaced by `value`.
fn env_with(garage: &Garage, key: &str, value: &str) -> Vec<(&'static str, String)> {
    garage
        .env()
        .into_iter()
        .map(|(k, v)| (k, if k == key { value.to_string() } else { v }))
        .collect()
}

#[test]
fn a_server_on_an_unusable_object_store_refuses_to_start_and_says_why() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let store = format!("s3://{}/{}", garage.bucket, garage::unique_prefix("probe"));
    let missing = "s3://no-such-bucket-here/xet";
    let said = refused_start(&["--object-store", missing], &garage.env());
    assert_says(
        &said,
        &[
            "--object-store s3://no-such-bucket-here: the bucket does not exist at http://127.0.0.1:",
            "garage bucket create no-such-bucket-here",
        ],
    );
    for (key, value) in [
        ("AWS_SECRET_ACCESS_KEY", "0".repeat(64)),
        ("AWS_ACCESS_KEY_ID", format!("GK{}", "0".repeat(24))),
    ] {
        let said = refused_start(&["--object-store", &store], &env_with(garage, key, &value));
        assert_says(
            &said,
            &[
                "refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                "403",
            ],
        );
        if key == "AWS_SECRET_ACCESS_KEY" {
            assert!(!said.contains(&value), "no secret in the message: {said}");
        }
    }
    let closed = ClosedPort::bind();
    let nobody = closed.url();
    let said = refused_start(
        &["--object-store", &store],
        &env_with(garage, "AWS_ENDPOINT_URL", &nobody),
    );
    assert_says(
        &said,
        &[
            &format!("cannot reach the object store at {nobody}: check AWS_ENDPOINT_URL"),
            "Connection refused",
        ],
    );
    let said = refused_start(
        &["--object-store", &store],
        &env_with(garage, "AWS_ALLOW_HTTP", "false"),
    );
    assert_says(&said, &["is plain http", "AWS_ALLOW_HTTP=true"]);
    // Admin commands open the store the same way.
    let dir = tempfile::tempdir().unwrap();
    // (The upkeep commands refuse a data directory without an index before anything else.)
    std::fs::write(dir.path().join("index.sqlite"), "").unwrap();
    let out = git_xet()
        .args(["server", "gc", "--dry-run", "--object-store", missing])
        .arg("--data")
        .arg(dir.path())
        .envs(garage.env())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert_says(&said, &["the bucket does not exist"]);

    // The same store with the right settings starts, and an empty prefix is fine.
    let server = TestServer::start_on_garage(garage, &garage::unique_prefix("probe-ok"), &[]);
    assert!(server.url.starts_with("http://127.0.0.1:"));
}

#[test]
fn a_server_on_an_unusable_postgres_index_refuses_to_start_and_says_why() {
    let Some(db) = postgres::database() else {
        return;
    };
    let port = db.cluster.port();
    let closed = ClosedPort::bind();
    let nobody = format!("postgres://postgres@127.0.0.1:{}/xet", closed.port());
    let said = refused_start(&["--index", &nobody], &[]);
    assert_says(
        &said,
        &[
            "cannot reach PostgreSQL",
            "Connection refused",
            "check the host and port",
        ],
    );
    let stranger = format!("postgres://stranger:pw@127.0.0.1:{port}/{}", db.name);
    let said = refused_start(&["--index", &stranger], &[]);
    assert_says(
        &said,
        &[
            "PostgreSQL refused the connection",
            "stranger",
            "check the user and password",
        ],
    );
    assert!(!said.contains(":pw@"), "no password in the message: {said}");
    let no_db = format!("postgres://postgres@127.0.0.1:{port}/no_such_db");
    let said = refused_start(&["--index", &no_db], &[]);
    assert_says(&said, &["no_such_db", "create the database"]);
}
