//! Token lifetimes: what the server mints never outlives the credential that asked for it,
//! is good for transfers only, and `token create` refuses tokens that could never work.

use serde_json::Value;

use crate::common::*;
use crate::lfs::{batch, lfs_url};
use crate::support::{git_xet, TestServer};

fn refresh(server: &TestServer, repo: &str, token: &str) -> (u16, Value) {
    json(
        client()
            .get(lfs_url(server, repo, "xet-write-token"))
            .basic_auth("x", Some(token))
            .send()
            .unwrap(),
    )
}

fn info_refs_status(server: &TestServer, repo: &str, token: &str) -> u16 {
    client()
        .get(format!(
            "{}/{repo}.git/info/refs?service=git-receive-pack",
            server.url
        ))
        .basic_auth("x", Some(token))
        .send()
        .unwrap()
        .status()
        .as_u16()
}

/// The CAS answer to a reconstruction of a file that does not exist: 404 when the token is
/// accepted, 401/403 when not.
fn cas_status(server: &TestServer, token: &str) -> u16 {
    Cas::with_token(server, token)
        .reconstruction_raw(&"ab".repeat(32), None)
        .status()
        .as_u16()
}

/// `git xet server token create --user`.
pub(crate) fn user_token(server: &TestServer, repo: &str, scope: &str, user: &str) -> String {
    let out = git_xet()
        .args([
            "server", "token", "create", "--repo", repo, "--scope", scope,
        ])
        .args(["--user", user, "--data"])
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn minted_tokens_expire_with_their_parent_and_cannot_mint_or_push() {
    let server = TestServer::start_with_clock(&[]);
    let parent = server.token_with_ttl("org/m", "write", Some(600));
    let parent_exp = git_xet_io::time::now_secs() + 600;
    let (status, minted) = refresh(&server, "org/m", &parent);
    assert_eq!(status, 200, "{minted}");
    let child = minted["accessToken"].as_str().unwrap().to_string();
    let exp = minted["exp"].as_u64().unwrap();
    assert!(
        exp <= parent_exp,
        "minted exp {exp} past the parent's {parent_exp}"
    );
    // Good for the CAS API while the parent lives, for nothing else.
    assert_eq!(cas_status(&server, &child), 404);
    assert_eq!(
        info_refs_status(&server, "org/m", &child),
        403,
        "no git access"
    );
    assert_eq!(
        refresh(&server, "org/m", &child).0,
        403,
        "cannot mint another"
    );
    let (status, _) = batch(&server, "org/m", Some(&child), "upload", &["basic"], &[]);
    assert_eq!(status, 403, "no Batch API");
    // Batch answers hand out the same kind of token.
    let oid = sha256_hex(b"tokens");
    let (status, answer) = batch(
        &server,
        "org/m",
        Some(&parent),
        "upload",
        &["xet"],
        &[(&oid, 6)],
    );
    assert_eq!(status, 200, "{answer}");
    let action = &answer["objects"][0]["actions"]["upload"]["header"];
    let cas_token = action["X-Xet-Access-Token"].as_str().unwrap().to_string();
    let cas_exp: u64 = action["X-Xet-Token-Expiration"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(cas_exp <= parent_exp);
    assert_eq!(info_refs_status(&server, "org/m", &cas_token), 403);
    assert_eq!(refresh(&server, "org/m", &cas_token).0, 403);
    // Once the parent expired, so did everything minted from it.
    server.advance_clock(601);
    assert_eq!(cas_status(&server, &child), 401);
    assert_eq!(cas_status(&server, &cas_token), 401);
    assert_eq!(refresh(&server, "org/m", &parent).0, 401);
}

#[test]
fn token_create_refuses_a_zero_lifetime_and_a_data_directory_without_a_secret() {
    let server = TestServer::start();
    let create = |args: &[&str]| {
        git_xet()
            .args([
                "server", "token", "create", "--repo", "org/m", "--scope", "read",
            ])
            .args(args)
            .output()
            .unwrap()
    };
    let data = server.data.to_str().unwrap();
    let out = create(&["--data", data, "--ttl", "0"]);
    assert!(!out.status.success(), "--ttl 0 must fail");
    assert!(out.stdout.is_empty(), "no token printed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ttl"));

    let home = tempfile::tempdir().unwrap();
    let typo = home.path().join("typo");
    let out = create(&["--data", typo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(
        err.contains("no server secret") && err.contains("--init"),
        "{err}"
    );
    assert!(!typo.exists(), "nothing created at a mistyped path");

    let out = create(&["--data", typo.to_str().unwrap(), "--init"]);
    assert!(out.status.success(), "--init creates a secret");
    assert!(typo.join("keys/secret").exists());
    // And the real data directory still works.
    let out = create(&["--data", data, "--ttl", "60"]);
    let token = String::from_utf8(out.stdout).unwrap();
    assert_eq!(cas_status(&server, token.trim()), 404);
}

fn token_admin(server: &TestServer, args: &[&str]) -> std::process::Output {
    git_xet()
        .args(["server", "token"])
        .args(args)
        .arg("--data")
        .arg(&server.data)
        .output()
        .unwrap()
}

#[test]
fn tokens_are_listed_without_their_text_and_a_revoked_one_is_refused_within_seconds() {
    // Its clock moves: the revocation cache's entries age without the test waiting.
    let server = TestServer::start_with_clock(&[]);
    let alice = user_token(&server, "org/m", "write", "alice");
    let bob = server.token("org/m", "read");
    let out = token_admin(&server, &["list"]);
    assert!(out.status.success());
    let listing = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = listing
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{listing}");
    assert_eq!(rows[0], ["ID", "USER", "RULES", "EXPIRES", "STATUS"]);
    let alice_row = rows.iter().find(|r| r[1] == "alice").expect("alice listed");
    assert_eq!(alice_row[2], "org/m:write");
    assert_eq!(alice_row[4], "active");
    let bob_row = rows
        .iter()
        .find(|r| r[2] == "org/m:read")
        .expect("bob listed");
    assert_eq!(bob_row[0], bob_row[1], "the user defaults to the id");
    for token in [&alice, &bob] {
        let (_, mac) = token.rsplit_once('.').unwrap();
        assert!(!listing.contains(mac), "a token's text is listed");
    }

    // Bob clones and holds a transfer token minted from his.
    let env = crate::gitenv::GitEnv::new(Some(&alice));
    let work = env.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    env.git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README"), "hello\n").unwrap();
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "one"]);
    let url = format!("{}/org/m.git", server.url);
    env.git(&work, &["remote", "add", "origin", &url]);
    env.git(&work, &["push", "-q", "origin", "main"]);
    let clone_as = |token: &str, name: &str| {
        env.set_token(token);
        let dir = env.home.path().join(name);
        let out = env.git_output(
            env.home.path(),
            &["clone", "-q", &url, dir.to_str().unwrap()],
        );
        let _ = std::fs::remove_dir_all(&dir);
        out
    };
    assert!(clone_as(&bob, "c0").status.success());
    let minted = client()
        .get(lfs_url(&server, "org/m", "xet-read-token"))
        .basic_auth("x", Some(&bob))
        .send()
        .unwrap();
    let minted: Value = minted.json().unwrap();
    let child = minted["accessToken"].as_str().unwrap().to_string();
    assert_eq!(
        cas_status(&server, &child),
        404,
        "accepted while bob's is valid"
    );

    let out = token_admin(&server, &["revoke", bob_row[0]]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each server process remembers an answer for the cache's TTL (5 s): once that has
    // passed on the server's clock, the revoked token is refused at its first request.
    server.advance_clock(5);
    // 403, which git and git-lfs show and stop at (git-lfs answers a 401 by asking its
    // credential helper again, forever when the helper keeps the revoked token).
    let out = clone_as(&bob, "refused");
    let shown = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(shown.contains("403"), "{shown}");
    let r = client()
        .get(format!("{url}/info/refs?service=git-upload-pack"))
        .basic_auth("x", Some(&bob))
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    let text = r.text().unwrap();
    assert!(text.contains("revoked"), "{text}");
    let mut lfs = env
        .cmd("git", &work)
        .args(["lfs", "locks"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while lfs.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            let _ = lfs.kill();
            panic!("git lfs locks keeps retrying a revoked token");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = lfs.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{shown}");
    assert!(shown.contains("was revoked"), "git-lfs shows why: {shown}");
    assert_eq!(
        cas_status(&server, &child),
        403,
        "minted from a revoked token"
    );
    assert!(
        clone_as(&alice, "still").status.success(),
        "alice unaffected"
    );
    let listing = String::from_utf8(token_admin(&server, &["list"]).stdout).unwrap();
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with(bob_row[0]) && l.ends_with("revoked")),
        "{listing}"
    );
    let out = token_admin(&server, &["revoke", "0123456789abcdef"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no token has the id"));
}
