//! `git xet shell` for a deployment whose index is PostgreSQL: the signing secret lives in
//! the index (no `DATA/keys/secret`), so the shell must read it there to hand out tokens the
//! servers accept. Real sshd, real PostgreSQL, real git and git-lfs; the keys are installed
//! with `git xet server user add --index`, or the URL reaches the shell through sshd's
//! `SetEnv` when it holds a password.

use std::process::{Command, Output};

use crate::env::{self, assert_same_file, stderr, GitEnv};
use crate::ssh_shell::payload;
use crate::sshd::{self, Sshd};
use crate::support::{git_xet, postgres, TestServer};

/// `user add NAME --key ... --data DATA ARGS... --authorized-keys FILE`.
fn user_add(sshd: &Sshd, server: &TestServer, name: &str, args: &[&str]) -> Output {
    sshd.user_add(server, name).args(args).output().unwrap()
}

/// Runs `command` over ssh, logged in with `user`'s key.
fn ssh(sshd: &Sshd, user: &str, command: &str) -> Output {
    let line = sshd.ssh_command_as(user);
    let mut words = line.split_whitespace();
    Command::new(words.next().unwrap())
        .args(words)
        .args(["-p", &sshd.port.to_string()])
        .arg(format!("{}@127.0.0.1", sshd.user))
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `git-lfs-authenticate` over ssh: the href and Authorization header it hands out.
fn authenticate(sshd: &Sshd, user: &str, repo: &str, op: &str) -> (String, String) {
    let out = env::ok(
        ssh(sshd, user, &format!("git-lfs-authenticate {repo} {op}")),
        "git-lfs-authenticate",
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        answer["href"].as_str().unwrap().to_string(),
        answer["header"]["Authorization"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

/// A Batch API download request for one object at `href` (with its host replaced by
/// `server`'s): the HTTP status and body.
fn batch(
    server: &TestServer,
    href: &str,
    authorization: &str,
    oid: &str,
    size: u64,
) -> (u16, String) {
    let path = href.split_once("/org/").map(|(_, p)| p).unwrap();
    let url = format!("{}/org/{path}/objects/batch", server.url);
    let body = serde_json::json!({
        "operation": "download",
        "transfers": ["basic"],
        "objects": [{"oid": oid, "size": size}],
    });
    let response = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(url)
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .header("Authorization", authorization)
        .body(body.to_string())
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().unwrap())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn ssh_on_a_postgres_index_hands_out_tokens_every_server_accepts() {
    if !sshd::available() {
        return;
    }
    let Some(db) = postgres::database() else {
        return;
    };
    let args = ["--index", db.url.as_str(), "--no-fsync"];
    let server = TestServer::start_with(&args);
    // A second process of the same deployment (its own data directory).
    let other = TestServer::start_with(&args);
    assert!(
        !server.data.join("keys/secret").exists(),
        "the secret lives in the index, not in the data directory"
    );
    let sshd = Sshd::start_empty(&["alice", "carol", "bob"]);
    for (name, extra) in [
        ("alice", &["--repo", "org/m:write", "--no-lfs-transfer"][..]),
        ("carol", &["--repo", "org/m:read"][..]),
    ] {
        let mut all = vec!["--index", db.url.as_str()];
        all.extend(extra);
        let out = user_add(&sshd, &server, name, &all);
        assert!(out.status.success(), "user add {name}: {}", stderr(&out));
    }
    // `user add` records the key's token in the index, so it needs to find it.
    let out = user_add(&sshd, &server, "bob", &["--repo", "org/m:write"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--index"), "{}", stderr(&out));
    // A key installed without the deployment's index in its line (the admin's environment
    // named it) cannot sign: the shell says what is missing.
    let out = sshd
        .user_add(&server, "bob")
        .args(["--repo", "org/m:write"])
        .env("GIT_XET_SERVER_INDEX", &db.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "user add bob: {}", stderr(&out));
    let keys = std::fs::read_to_string(sshd.authorized_keys()).unwrap();
    assert!(keys.contains(&format!("--index {}", db.url)), "{keys}");

    // Alice pushes with git-xet installed, her agent speaking XET with the token from
    // git-lfs-authenticate; the push itself runs the pre-receive check with a token the
    // shell minted.
    let url = sshd.url("org/m");
    let alice = GitEnv::with_agent(&[]).with_env("GIT_SSH_COMMAND", &sshd.ssh_command_as("alice"));
    let a = alice.lfs_repo("a", &url);
    let big = payload(21, 2 << 20);
    std::fs::write(a.join("big.bin"), &big).unwrap();
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "lfs over ssh"]);
    let xorb_in = server.metric("git_xet_xorb_bytes_received_total");
    env::ok(
        alice.git_output(&a, &["push", "-q", "origin", "main"]),
        "alice's push",
    );
    assert!(
        server.metric("git_xet_xorb_bytes_received_total") > xorb_in,
        "the agent uploaded xorbs with the shell's token"
    );

    // Carol clones with plain git-lfs (git-lfs-transfer, through the server's HTTP API
    // with the shell's token).
    let carol = GitEnv::plain_lfs().with_env("GIT_SSH_COMMAND", &sshd.ssh_command_as("carol"));
    let c = carol.dir("c");
    env::ok(
        carol.git_output(&c, &["clone", "-q", &url, "."]),
        "carol's clone",
    );
    assert_same_file(&a.join("big.bin"), &c.join("big.bin"));

    // The token git-lfs-authenticate hands out is accepted by both processes; the second
    // one answers 404 for the object only because its objects are its own in this test.
    let oid = sha256_hex(&big);
    let (href, authorization) = authenticate(&sshd, "carol", "org/m.git", "download");
    let (status, body) = batch(&server, &href, &authorization, &oid, big.len() as u64);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"download\""), "{body}");
    let (status, body) = batch(&other, &href, &authorization, &oid, big.len() as u64);
    assert_eq!(status, 200, "the other process accepts the token: {body}");
    let (status, body) = batch(&server, &href, "Bearer not-a-token", &oid, 1);
    assert_eq!(status, 401, "{body}");

    let out = ssh(&sshd, "bob", "git-lfs-authenticate org/m.git download");
    assert!(!out.status.success() && out.stdout.is_empty());
    let said = stderr(&out);
    assert!(said.contains("--index"), "{said}");
}

#[test]
fn a_password_goes_to_the_shell_through_sshd_not_authorized_keys() {
    if !sshd::available() {
        return;
    }
    let Some(db) = postgres::database() else {
        return;
    };
    let server = TestServer::start_with(&["--index", db.url.as_str(), "--no-fsync"]);
    // The test cluster trusts loopback, so any password is accepted: what matters is
    // where the URL travels.
    let secret_url = db
        .url
        .replace("postgres://postgres@", "postgres://postgres:hunter2@");
    let sshd = Sshd::start_empty_with(
        &["alice"],
        &format!("SetEnv GIT_XET_SERVER_INDEX=\"{secret_url}\"\n"),
    );
    let out = user_add(
        &sshd,
        &server,
        "alice",
        &["--repo", "org/m:read", "--index", &secret_url],
    );
    let said = stderr(&out);
    assert!(!out.status.success(), "a password URL is refused: {said}");
    assert!(said.contains("SetEnv GIT_XET_SERVER_INDEX"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
    assert_eq!(
        std::fs::read_to_string(sshd.authorized_keys()).unwrap(),
        "",
        "nothing written"
    );

    // The admin's environment names the index (to record the key's token); the line does not.
    let out = sshd
        .user_add(&server, "alice")
        .args(["--repo", "org/m:read"])
        .env("GIT_XET_SERVER_INDEX", &secret_url)
        .output()
        .unwrap();
    assert!(out.status.success(), "user add: {}", stderr(&out));
    assert!(!std::fs::read_to_string(sshd.authorized_keys())
        .unwrap()
        .contains("hunter2"));
    let (href, authorization) = authenticate(&sshd, "alice", "org/m", "download");
    let (status, body) = batch(&server, &href, &authorization, &"0".repeat(64), 1);
    assert_eq!(status, 200, "the server accepts the token: {body}");
}

/// The shell runs once per ssh command and may be newer than the servers: it reads the
/// secret and changes nothing in the index (no schema created or upgraded, no secret made).
#[test]
fn the_shell_reads_the_secret_without_touching_the_schema() {
    let Some(db) = postgres::database() else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let shell = || {
        git_xet()
            .args(["shell", "--user", "alice", "--repo", "org/m:read"])
            .args(["--url", "http://127.0.0.1:9", "--index", db.url.as_str()])
            .arg("--data")
            .arg(data.path())
            .env(
                "SSH_ORIGINAL_COMMAND",
                "git-lfs-authenticate org/m download",
            )
            .output()
            .unwrap()
    };
    let tables = || db.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'");

    // Before any server started: a clear refusal, and still no table.
    let out = shell();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no server secret yet"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tables().trim(), "0");

    // A server creates the schema and the secret; then the index is made to look one
    // migration behind, as when the shell is upgraded before the servers.
    let server = TestServer::start_with(&["--index", db.url.as_str(), "--no-fsync"]);
    drop(server);
    let latest = db.sql("SELECT max(version) FROM schema_migrations");
    db.sql(&format!(
        "DELETE FROM schema_migrations WHERE version = {}",
        latest.trim()
    ));
    let out = shell();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"href\""));
    // The removed migration was not applied again.
    let now = db.sql("SELECT COALESCE(max(version), 0) FROM schema_migrations");
    assert!(
        now.trim().parse::<i64>().unwrap() < latest.trim().parse::<i64>().unwrap(),
        "the shell migrated the schema: {now} (latest {latest})"
    );
}
