//! The tokens `git xet shell` mints for an ssh key (git-lfs-authenticate, git-lfs-transfer)
//! carry the id of the key's token record, which `user add` writes: `token revoke` on it
//! stops them, through a real OpenSSH sshd.

use std::time::{Duration, Instant};

use crate::env::{self, stderr};
use crate::ssh_shell::{site, Site};
use crate::support::{git_xet, TestServer};

fn token_admin(server: &TestServer, args: &[&str]) -> String {
    let out = git_xet()
        .args(["server", "token"])
        .args(args)
        .arg("--data")
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(out.status.success(), "token {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `git-lfs-authenticate` over ssh: the Authorization header it hands out.
fn authenticate(site: &Site, user: &str) -> String {
    let out = env::ok(
        site.ssh(user, Some("git-lfs-authenticate org/m download")),
        "git-lfs-authenticate",
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    answer["header"]["Authorization"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A Batch API download request with `authorization`: the HTTP status and body.
fn batch(server: &TestServer, authorization: &str) -> (u16, String) {
    let body = serde_json::json!({
        "operation": "download",
        "transfers": ["basic"],
        "objects": [{"oid": "0".repeat(64), "size": 1}],
    });
    let response = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/org/m.git/info/lfs/objects/batch", server.url))
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .header("Authorization", authorization)
        .body(body.to_string())
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().unwrap())
}

#[test]
fn revoking_a_keys_token_stops_the_tokens_the_shell_minted_for_it() {
    let Some(site) = site(&[
        ("alice", &["org/m:write", "--no-lfs-transfer"]),
        ("bob", &["org/m:read"]),
    ]) else {
        return;
    };
    let server = &site.server;
    // Each key has its token record: listed under its user, with its grants.
    let listing = token_admin(server, &["list"]);
    let row = |user: &str| -> Vec<String> {
        listing
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|r| r[1] == user)
            .unwrap_or_else(|| panic!("{user}'s key is not listed:\n{listing}"))
    };
    let alice = row("alice");
    assert_eq!(alice[2], "ssh:org/m:write", "{listing}");
    assert_eq!(alice[4], "active", "{listing}");
    assert_eq!(row("bob")[2], "ssh:org/m:read");

    let minted = authenticate(&site, "alice");
    let (status, body) = batch(server, &minted);
    assert_eq!(status, 200, "{body}");
    let bob = authenticate(&site, "bob");

    token_admin(server, &["revoke", &alice[0]]);
    let revoked_at = Instant::now();
    while batch(server, &minted).0 != 403 {
        assert!(
            revoked_at.elapsed() < Duration::from_secs(7),
            "a token minted over ssh still works {:?} after its key's token was revoked",
            revoked_at.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, body) = batch(server, &minted);
    assert!(body.contains("was revoked"), "{body}");
    // The shell mints no new token for the key (revoking_a_keys_token_stops_its_git_over_ssh);
    // bob's key is not touched.
    let (status, body) = batch(server, &bob);
    assert_eq!(status, 200, "{body}");
}

/// git over ssh reads no token: the shell itself refuses a key whose token was revoked, for
/// git commands and LFS alike, and tells the user why.
#[test]
fn revoking_a_keys_token_stops_its_git_over_ssh() {
    let Some(site) = site(&[("alice", &["org/m:write"]), ("bob", &["org/m:read"])]) else {
        return;
    };
    let server = &site.server;
    let listing = token_admin(server, &["list"]);
    let alice_id = listing
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|r| r.get(1) == Some(&"alice"))
        .map(|r| r[0].to_string())
        .unwrap_or_else(|| panic!("alice's key is not listed:\n{listing}"));
    let upload_pack = "git-upload-pack 'org/m.git'";
    let before = site.ssh("alice", Some(upload_pack));
    assert!(
        !stderr(&before).contains("revoked"),
        "refused before the revoke: {}",
        stderr(&before)
    );
    token_admin(server, &["revoke", &alice_id]);
    for command in [
        upload_pack,
        "git-receive-pack 'org/m.git'",
        "git-lfs-authenticate org/m download",
    ] {
        let out = site.ssh("alice", Some(command));
        assert!(
            !out.status.success(),
            "{command} still served after the revoke"
        );
        let err = stderr(&out);
        assert!(
            err.contains("ssh access was revoked") && err.contains(&alice_id),
            "{command}: {err}"
        );
    }
    let bob = site.ssh("bob", Some(upload_pack));
    assert!(!stderr(&bob).contains("revoked"), "{}", stderr(&bob));
}
