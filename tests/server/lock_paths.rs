//! A locked file stays locked on every path a change can take into the repository: a
//! direct commit, a merge on an existing or a new branch, an octopus merge, a rename, a
//! deletion, a tag (lightweight or annotated) pointing at such a commit. Real git and
//! git-lfs against the server; Bob skips git-lfs's own check, so the server's hook decides.

use std::path::Path;

use crate::gitenv::GitEnv;
use crate::locks::{clone, overwrite, remote, stderr_of, user_env};
use crate::support::{random_bytes, TestServer};
use crate::tokens::user_token;

const REPO: &str = crate::locks::REPO;
const LOCKED: &str = "art.psd (locked by alice)";

/// Pushes without git-lfs's client-side lock check; returns (accepted, output).
fn push(env: &GitEnv, dir: &Path, refspec: &str) -> (bool, String) {
    let args = ["-c", "lfs.locksverify=false", "push", "origin", refspec];
    let out = env.git_output(dir, &args);
    (out.status.success(), stderr_of(&out))
}

fn refused(env: &GitEnv, dir: &Path, refspec: &str, case: &str) {
    let (accepted, text) = push(env, dir, refspec);
    assert!(!accepted, "{case}: the server accepted:\n{text}");
    assert!(
        text.contains("push rejected") && text.contains(LOCKED),
        "{case}: {text}"
    );
}

/// Back to the server's main, no local branch or tag but main.
fn reset(env: &GitEnv, dir: &Path) {
    env.git(dir, &["checkout", "-q", "-f", "main"]);
    env.git(dir, &["reset", "-q", "--hard", "origin/main"]);
    let branches = env.git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads",
            "refs/tags",
        ],
    );
    for b in branches.lines().filter(|b| *b != "refs/heads/main") {
        env.git(dir, &["update-ref", "-d", b]);
    }
}

/// A commit on a new local branch from main changing `file`.
fn branch_commit(env: &GitEnv, dir: &Path, branch: &str, file: &str, seed: u64) {
    env.git(dir, &["checkout", "-q", "-b", branch, "main"]);
    overwrite(&dir.join(file), &random_bytes(1000, seed));
    env.git(dir, &["add", file]);
    env.git(dir, &["commit", "-q", "-m", branch]);
    env.git(dir, &["checkout", "-q", "main"]);
}

/// Merges `branches` into the checked-out branch, also writing `file` in the merge commit
/// itself (an "evil" merge: its own change shows only against its parents).
fn evil_merge(env: &GitEnv, dir: &Path, branches: &[&str], file: &str, seed: u64) {
    let mut args = vec!["merge", "-q", "--no-ff", "--no-commit"];
    args.extend(branches);
    env.git(dir, &args);
    overwrite(&dir.join(file), &random_bytes(300_000, seed));
    env.git(dir, &["add", file]);
    env.git(dir, &["commit", "-q", "-m", "merge"]);
}

#[test]
fn a_locked_file_is_refused_on_every_path_a_change_takes() {
    let server = TestServer::start();
    let alice = user_env(&user_token(&server, REPO, "write", "alice"));
    let bob = user_env(&user_token(&server, REPO, "write", "bob"));
    let work = alice.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    alice.git(&work, &["init", "-q", "-b", "main"]);
    alice.git(&work, &["lfs", "track", "--lockable", "*.psd"]);
    overwrite(&work.join("art.psd"), &random_bytes(300_000, 1));
    overwrite(&work.join("notes.txt"), b"notes\n");
    alice.git(&work, &["add", "."]);
    alice.git(&work, &["commit", "-q", "-m", "assets"]);
    alice.git(&work, &["remote", "add", "origin", &remote(&server)]);
    alice.git(&work, &["push", "-q", "-u", "origin", "main"]);
    alice.git(&work, &["lfs", "lock", "art.psd"]);
    let b = clone(&bob, &server, "bob");

    // A direct commit.
    overwrite(&b.join("art.psd"), &random_bytes(300_000, 2));
    bob.git(&b, &["commit", "-q", "-am", "direct"]);
    refused(&bob, &b, "main", "a direct commit");

    // A merge on an existing branch whose side branch changes the file and whose merge
    // puts it back: main's old and new trees agree, one added commit does not.
    reset(&bob, &b);
    branch_commit(&bob, &b, "side", "art.psd", 3);
    bob.git(&b, &["merge", "-q", "--no-ff", "--no-commit", "side"]);
    bob.git(&b, &["checkout", "origin/main", "--", "art.psd"]);
    bob.git(&b, &["commit", "-q", "-m", "merge side, art unchanged"]);
    let net = bob.git(&b, &["diff", "--name-only", "origin/main", "HEAD"]);
    assert!(!net.contains("art.psd"), "{net}");
    refused(&bob, &b, "main", "a merge on an existing branch");

    // An evil merge on a new branch: the change is in the merge commit alone.
    reset(&bob, &b);
    branch_commit(&bob, &b, "x", "x.txt", 4);
    branch_commit(&bob, &b, "y", "y.txt", 5);
    bob.git(&b, &["checkout", "-q", "x"]);
    evil_merge(&bob, &b, &["y"], "art.psd", 6);
    refused(
        &bob,
        &b,
        "HEAD:refs/heads/merged",
        "a merge on a new branch",
    );
    // ... and tags pointing at it, lightweight and annotated.
    bob.git(&b, &["tag", "light"]);
    refused(&bob, &b, "refs/tags/light", "a lightweight tag");
    bob.git(&b, &["tag", "-a", "-m", "release", "annotated"]);
    refused(&bob, &b, "refs/tags/annotated", "an annotated tag");

    // An octopus merge on a new branch.
    reset(&bob, &b);
    for (i, name) in ["p", "q", "r"].iter().enumerate() {
        branch_commit(&bob, &b, name, &format!("{name}.txt"), 10 + i as u64);
    }
    evil_merge(&bob, &b, &["p", "q", "r"], "art.psd", 14);
    let parents = bob.git(&b, &["rev-list", "--parents", "-1", "HEAD"]);
    assert_eq!(
        parents.split_whitespace().count(),
        5,
        "four parents: {parents}"
    );
    refused(&bob, &b, "HEAD:refs/heads/octopus", "an octopus merge");

    // Renaming it away, deleting it: on main and inside a merge on a new branch.
    for (i, change) in [&["mv", "art.psd", "old.psd"][..], &["rm", "-q", "art.psd"]]
        .into_iter()
        .enumerate()
    {
        reset(&bob, &b);
        bob.git(&b, change);
        bob.git(&b, &["commit", "-q", "-m", "tidy"]);
        refused(&bob, &b, "main", &format!("{change:?} on main"));
        reset(&bob, &b);
        branch_commit(&bob, &b, "m", "m.txt", 20 + i as u64);
        bob.git(&b, &["merge", "-q", "--no-ff", "--no-commit", "m"]);
        bob.git(&b, change);
        bob.git(&b, &["commit", "-q", "-m", "merge and tidy"]);
        refused(
            &bob,
            &b,
            "HEAD:refs/heads/tidy",
            &format!("{change:?} in a merge"),
        );
    }

    // What does not touch the locked file goes through, merges and tags included.
    reset(&bob, &b);
    branch_commit(&bob, &b, "x", "x.txt", 30);
    branch_commit(&bob, &b, "y", "y.txt", 31);
    bob.git(&b, &["checkout", "-q", "x"]);
    evil_merge(&bob, &b, &["y"], "notes.txt", 32);
    bob.git(&b, &["tag", "-a", "-m", "ok", "fine"]);
    for refspec in ["HEAD:refs/heads/merged", "refs/tags/fine", "HEAD:main"] {
        let (accepted, text) = push(&bob, &b, refspec);
        assert!(accepted, "{refspec}: {text}");
    }
    let tip = bob.git(&b, &["rev-parse", "HEAD"]);
    let listed = bob.git(&b, &["ls-remote", "origin", "refs/heads/main"]);
    assert!(listed.starts_with(tip.trim()), "{listed}");
}
