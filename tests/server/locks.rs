//! File locking with real git-lfs (`lfs.locksverify true`): two users and an admin, each
//! with a token naming them; the server refuses a push changing another user's locked file
//! even when the client skips its own check; `git lfs locks` pages over hundreds of locks.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::{client, json as answer_of};
use crate::gitenv::GitEnv;
use crate::lfs::{lfs_url, LFS};
use crate::support::{random_bytes, TestServer};
use crate::tokens::user_token;

pub const REPO: &str = "studio/game";

pub fn remote(server: &TestServer) -> String {
    format!("{}/{REPO}.git", server.url)
}

/// A git environment for one user, verifying locks on push as git-lfs does by default.
pub fn user_env(token: &str) -> GitEnv {
    let env = GitEnv::new(Some(token));
    let home = env.home.path().to_path_buf();
    env.git(&home, &["config", "--global", "lfs.locksverify", "true"]);
    env
}

/// Writes a file even when git-lfs made it read-only (lockable files not locked by us).
pub fn overwrite(path: &Path, bytes: &[u8]) {
    if path.exists() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

pub fn clone(env: &GitEnv, server: &TestServer, name: &str) -> std::path::PathBuf {
    let dir = env.home.path().join(name);
    env.git(
        env.home.path(),
        &["clone", "-q", &remote(server), dir.to_str().unwrap()],
    );
    dir
}

pub fn stderr_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_locked_file_is_pushed_by_its_owner_only_and_force_unlocked_by_an_admin() {
    let server = TestServer::start();
    let alice = user_env(&user_token(&server, REPO, "write", "alice"));
    let bob = user_env(&user_token(&server, REPO, "write", "bob"));
    let admin = user_env(&user_token(&server, REPO, "admin", "admin"));

    let work = alice.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    alice.git(&work, &["init", "-q", "-b", "main"]);
    alice.git(&work, &["lfs", "track", "--lockable", "*.psd"]);
    alice.git(&work, &["lfs", "track", "*.bin"]);
    overwrite(&work.join("art.psd"), &random_bytes(300_000, 1));
    overwrite(&work.join("level.bin"), &random_bytes(200_000, 2));
    alice.git(&work, &["add", "."]);
    alice.git(&work, &["commit", "-q", "-m", "assets"]);
    alice.git(&work, &["remote", "add", "origin", &remote(&server)]);
    alice.git(&work, &["push", "-q", "-u", "origin", "main"]);
    let locked = alice.git(&work, &["lfs", "lock", "art.psd"]);
    assert!(locked.contains("Locked art.psd"), "{locked}");

    // Bob's change to the locked file: git-lfs's own check stops it...
    let bobs = clone(&bob, &server, "bob");
    let listed = bob.git(&bobs, &["lfs", "locks"]);
    assert!(
        listed.contains("art.psd") && listed.contains("alice"),
        "{listed}"
    );
    overwrite(&bobs.join("art.psd"), &random_bytes(300_000, 3));
    bob.git(&bobs, &["commit", "-q", "-am", "bob paints"]);
    let refused = stderr_of(&bob.git_output(&bobs, &["push", "origin", "main"]));
    assert!(
        refused.contains("art.psd") && refused.contains("alice"),
        "git-lfs let a push of a locked file through:\n{refused}"
    );
    // ... and when the client skips it, the server's hook does, naming path and owner.
    let skip = ["-c", "lfs.locksverify=false", "push", "origin", "main"];
    let out = bob.git_output(&bobs, &skip);
    let refused = stderr_of(&out);
    assert!(!out.status.success(), "the server accepted:\n{refused}");
    assert!(
        refused.contains("push rejected") && refused.contains("art.psd (locked by alice)"),
        "{refused}"
    );
    // A new branch carrying the change is refused the same way.
    let new_branch = [
        "-c",
        "lfs.locksverify=false",
        "push",
        "origin",
        "HEAD:refs/heads/bob-art",
    ];
    let refused = stderr_of(&bob.git_output(&bobs, &new_branch));
    assert!(refused.contains("art.psd (locked by alice)"), "{refused}");
    // Deleting or renaming it is changing it too.
    for change in [&["rm", "-q", "art.psd"][..], &["mv", "art.psd", "old.psd"]] {
        bob.git(&bobs, &["reset", "-q", "--hard", "origin/main"]);
        bob.git(&bobs, change);
        bob.git(&bobs, &["commit", "-q", "-m", "tidy"]);
        let refused = stderr_of(&bob.git_output(&bobs, &skip));
        assert!(
            refused.contains("art.psd (locked by alice)"),
            "{change:?}: {refused}"
        );
    }
    // Other files are Bob's to change.
    bob.git(&bobs, &["reset", "-q", "--hard", "origin/main"]);
    overwrite(&bobs.join("level.bin"), &random_bytes(200_000, 4));
    bob.git(&bobs, &["commit", "-q", "-am", "bob levels"]);
    bob.git(&bobs, &["push", "-q", "origin", "main"]);

    // The owner pushes her change.
    alice.git(&work, &["pull", "-q", "--rebase", "origin", "main"]);
    overwrite(&work.join("art.psd"), &random_bytes(300_000, 5));
    alice.git(&work, &["commit", "-q", "-am", "alice paints"]);
    alice.git(&work, &["push", "-q", "origin", "main"]);

    // Bob cannot remove her lock, forced or not; the admin can.
    let out = bob.git_output(&bobs, &["lfs", "unlock", "art.psd"]);
    assert!(!out.status.success(), "{}", stderr_of(&out));
    let out = bob.git_output(&bobs, &["lfs", "unlock", "--force", "art.psd"]);
    let text = stderr_of(&out);
    assert!(!out.status.success(), "bob forced an unlock: {text}");
    assert!(text.contains("admin"), "{text}");
    let admins = clone(&admin, &server, "admin");
    admin.git(&admins, &["lfs", "unlock", "--force", "art.psd"]);
    assert!(!bob.git(&bobs, &["lfs", "locks"]).contains("art.psd"));

    // Unlocked, Bob's change goes through, with git-lfs verifying.
    bob.git(&bobs, &["pull", "-q", "origin", "main"]);
    overwrite(&bobs.join("art.psd"), &random_bytes(300_000, 6));
    bob.git(&bobs, &["commit", "-q", "-am", "bob paints again"]);
    bob.git(&bobs, &["push", "-q", "origin", "main"]);
    let check = clone(&admin, &server, "check");
    assert_eq!(
        std::fs::read(check.join("art.psd")).unwrap(),
        random_bytes(300_000, 6)
    );
}

fn lock_request(server: &TestServer, token: &str, path: &str) -> (u16, Value) {
    answer_of(
        client()
            .post(lfs_url(server, REPO, "locks"))
            .basic_auth("x", Some(token))
            .header("Content-Type", LFS)
            .body(json!({"path": path, "ref": {"name": "refs/heads/main"}}).to_string())
            .send()
            .unwrap(),
    )
}

#[test]
fn git_lfs_lists_hundreds_of_locks_page_by_page_under_both_url_forms() {
    let server = TestServer::start();
    let alice_token = user_token(&server, REPO, "write", "alice");
    let bob_token = user_token(&server, REPO, "write", "bob");
    let mut ids = Vec::new();
    for i in 0..250 {
        let (status, body) = lock_request(&server, &alice_token, &format!("art/{i:03}.psd"));
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["lock"]["owner"]["name"], "alice");
        ids.push(body["lock"]["id"].as_str().unwrap().to_string());
    }
    let (status, taken) = lock_request(&server, &bob_token, "art/007.psd");
    assert_eq!(status, 409, "{taken}");
    assert_eq!(taken["lock"]["id"], ids[7].as_str());
    assert_eq!(taken["lock"]["owner"]["name"], "alice");
    assert!(taken["lock"]["locked_at"].as_str().unwrap().ends_with('Z'));

    // The server pages (100 by default), git-lfs follows the cursor.
    let (status, first) = answer_of(
        client()
            .get(lfs_url(&server, REPO, "locks"))
            .basic_auth("x", Some(&bob_token))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(first["locks"].as_array().unwrap().len(), 100);
    assert!(first["next_cursor"].is_string(), "{first}");
    let bob = user_env(&bob_token);
    let repo = bob.home.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    bob.git(&repo, &["init", "-q", "-b", "main"]);
    bob.git(&repo, &["remote", "add", "origin", &remote(&server)]);
    let listed = bob.git(&repo, &["lfs", "locks"]);
    let lines: Vec<&str> = listed.lines().filter(|l| l.contains(".psd")).collect();
    assert_eq!(lines.len(), 250, "{listed}");
    assert!(lines.iter().all(|l| l.contains("alice")));
    let one = bob.git(&repo, &["lfs", "locks", "--path", "art/042.psd"]);
    assert_eq!(one.lines().count(), 1, "{one}");
    let by_id = bob.git(&repo, &["lfs", "locks", "--id", &ids[9]]);
    assert!(
        by_id.contains("art/009.psd") && by_id.lines().count() == 1,
        "{by_id}"
    );
    let limited = bob.git(&repo, &["lfs", "locks", "--limit", "30"]);
    assert_eq!(limited.lines().count(), 30, "{limited}");
    // Verification pages too, and splits ours from theirs.
    let mut cursor = String::new();
    let (mut ours, mut theirs) = (0, 0);
    loop {
        let (status, page) = answer_of(
            client()
                .post(lfs_url(&server, REPO, "locks/verify"))
                .basic_auth("x", Some(&alice_token))
                .header("Content-Type", LFS)
                .body(json!({"cursor": cursor, "limit": 64}).to_string())
                .send()
                .unwrap(),
        );
        assert_eq!(status, 200, "{page}");
        ours += page["ours"].as_array().unwrap().len();
        theirs += page["theirs"].as_array().unwrap().len();
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    assert_eq!((ours, theirs), (250, 0));

    // The other URL form (no `.git`) is the same API.
    let other = format!("{}/{REPO}/info/lfs/locks?path=art/001.psd", server.url);
    let (status, found) = answer_of(
        client()
            .get(other)
            .basic_auth("x", Some(&bob_token))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(found["locks"][0]["id"], ids[1].as_str());
    let unlock = format!("{}/{REPO}/info/lfs/locks/{}/unlock", server.url, ids[1]);
    let r = client()
        .post(&unlock)
        .basic_auth("x", Some(&alice_token))
        .header("Content-Type", LFS)
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client()
        .post(&unlock)
        .basic_auth("x", Some(&alice_token))
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status(), 404, "unlocked twice");
    // Reading needs a token for the repository; locking needs write.
    let read = user_token(&server, REPO, "read", "reader");
    assert_eq!(lock_request(&server, &read, "x.psd").0, 403);
    let r = client()
        .get(lfs_url(&server, REPO, "locks"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    let (status, bad) = lock_request(&server, &alice_token, "");
    assert_eq!(status, 400, "{bad}");
}
