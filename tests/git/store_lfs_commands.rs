//! git-lfs's own commands on clones that use the chunk store (docs/store.md, "git-lfs
//! commands"), run with real git-lfs beside a clone made by plain git-lfs from the same
//! server: what they print must be the same. The checked-out version stays whole in
//! `.git/lfs/objects` by default (here on the test directory's file system, ext4 or tmpfs,
//! where it is a second copy), older versions live only as chunks, and the commands that read
//! an old revision whole get it from `git lfs fetch` (served from local chunks) or
//! `git xet materialize`.

use std::path::{Path, PathBuf};

use crate::env::{assert_file_is, ok, remote_url, stderr, stdout, GitEnv};
use crate::store::{has_whole, version, XORB_SERVED};
use crate::store_fs::Xfs;
use crate::support::{lfs_objects, random_bytes, write_file, TestServer};

/// Writes version `n` of model.bin and of small.bin, commits and pushes; returns the commit.
fn push_version(env: &GitEnv, repo: &Path, n: usize) -> String {
    write_file(&repo.join("model.bin"), &version(n));
    write_file(
        &repo.join("small.bin"),
        &random_bytes(100 << 10, 800 + n as u64),
    );
    env.commit_all_and_push(repo, &format!("v{n}"));
    env.git(repo, &["rev-parse", "HEAD"]).trim().to_string()
}

/// stdout of a git-lfs command that must succeed.
fn lfs(env: &GitEnv, repo: &Path, args: &[&str]) -> String {
    let mut full = vec!["lfs"];
    full.extend_from_slice(args);
    stdout(&ok(
        env.git_logged(repo, &full),
        &format!("git {}", full.join(" ")),
    ))
}

/// The git-lfs commands that read the checked-out version, in the clone using git-xet and in
/// the clone of plain git-lfs: the same output, and fsck passes.
fn same_as_git_lfs(xet: (&GitEnv, &Path), plain: (&GitEnv, &Path), when: &str) {
    for args in [
        &["fsck"][..],
        &["ls-files", "--json"],
        &["ls-files", "--long", "--size"],
        &["status", "--porcelain"],
        &["status"],
    ] {
        assert_eq!(
            lfs(xet.0, xet.1, args),
            lfs(plain.0, plain.1, args),
            "git lfs {args:?} {when}"
        );
    }
    assert_eq!(lfs(xet.0, xet.1, &["fsck"]).trim(), "Git LFS fsck OK");
}

/// `git lfs checkout` writes a file from its whole object: removed, checked out as a
/// pointer, then written by git-lfs alone (no server needed).
fn lfs_checkout_restores(env: &GitEnv, repo: &Path, path: &str, expected: &[u8]) {
    std::fs::remove_file(repo.join(path)).unwrap();
    let out = env
        .command("git", repo)
        .args(["checkout", "--", path])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "checkout of the pointer");
    assert!(std::fs::metadata(repo.join(path)).unwrap().len() < 200);
    lfs(env, repo, &["checkout"]);
    assert_file_is(&repo.join(path), expected);
}

/// A clone of `remote` by `env` named `name`, in `dir` when given, else under `env`'s root.
fn clone_in(env: &GitEnv, remote: &str, dir: Option<&Path>, name: &str) -> PathBuf {
    let Some(dir) = dir else {
        return env.clone_ok(remote, name);
    };
    let target = dir.join(name);
    ok(
        env.git_logged(
            &env.dir("."),
            &["clone", "-q", remote, target.to_str().unwrap()],
        ),
        "clone",
    );
    target
}

#[test]
fn git_lfs_commands_see_what_git_lfs_sees_on_ext4() {
    // The test directory's file system: ext4 here (tmpfs where TMPDIR is one).
    git_lfs_commands_see_what_git_lfs_sees(None);
}

#[test]
fn git_lfs_commands_see_what_git_lfs_sees_on_tmpfs() {
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    git_lfs_commands_see_what_git_lfs_sees(Some(shm.path()));
}

#[test]
fn git_lfs_commands_see_what_git_lfs_sees_on_xfs_with_reflink() {
    let Some(xfs) = Xfs::make() else { return };
    git_lfs_commands_see_what_git_lfs_sees(Some(&xfs.mount()));
    drop(xfs);
}

/// Bob's clone (in `dir` when given) beside Carol's plain git-lfs clone, after a clone, five
/// pulls, a commit and its push, checkouts of other revisions and one with the server down.
fn git_lfs_commands_see_what_git_lfs_sees(dir: Option<&Path>) {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/dropin", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let carol = GitEnv::plain_lfs();
    let a = alice.lfs_repo("a", &remote);
    let mut commits = vec![push_version(&alice, &a, 0)];

    // A fresh clone.
    let b = clone_in(&bob, &remote, dir, "b");
    let c = carol.clone_ok(&remote, "c");
    same_as_git_lfs((&bob, &b), (&carol, &c), "on a fresh clone");
    assert_eq!(lfs_objects(&b), 2, "model.bin and small.bin of HEAD");
    let status = stdout(&ok(bob.xet_output(&b, &["status", "--offline"]), "status"));
    let line = status
        .lines()
        .find(|l| l.ends_with("model.bin  (working tree, whole object, chunk store)"));
    assert!(line.is_some(), "{status}");

    // Five new versions, pulled one by one: only HEAD's objects stay whole.
    for n in 1..6 {
        commits.push(push_version(&alice, &a, n));
        for (env, repo) in [(&bob, &b), (&carol, &c)] {
            ok(
                env.git_logged(repo, &["pull", "-q", "origin", "main"]),
                "pull",
            );
        }
        assert_file_is(&b.join("model.bin"), &version(n));
    }
    same_as_git_lfs((&bob, &b), (&carol, &c), "after five pulls");
    assert_eq!(lfs_objects(&b), 2, "the older versions live as chunks");
    for old in &commits[..5] {
        assert!(!has_whole(&b, &bob, old, "model.bin"));
    }
    lfs_checkout_restores(&bob, &b, "model.bin", &version(5));

    // A local change, pushed with `git lfs push` of the current branch, then with git.
    let edit = random_bytes(200 << 10, 4242);
    for (env, repo) in [(&bob, &b), (&carol, &c)] {
        write_file(&repo.join("small.bin"), &edit);
        env.git(repo, &["commit", "-qam", "local edit"]);
    }
    same_as_git_lfs((&bob, &b), (&carol, &c), "after a commit");
    lfs(&bob, &b, &["push", "origin", "main"]);
    ok(
        bob.git_logged(&b, &["push", "-q", "origin", "main"]),
        "push",
    );
    // Carol takes Bob's commit (the same content as hers) instead of her own.
    carol.git(&c, &["fetch", "-q", "origin"]);
    carol.git(&c, &["reset", "-q", "--hard", "origin/main"]);
    same_as_git_lfs((&bob, &b), (&carol, &c), "after a push");

    // Checkouts of other revisions, the oldest with the server stopped.
    ok(
        bob.git_logged(&b, &["checkout", "-q", &commits[2]]),
        "checkout",
    );
    carol.git(&c, &["checkout", "-q", &commits[2]]);
    same_as_git_lfs((&bob, &b), (&carol, &c), "after a checkout of v2");
    server.stop();
    ok(
        bob.git_logged(&b, &["checkout", "-q", &commits[0]]),
        "offline checkout of the oldest version",
    );
    assert_file_is(&b.join("model.bin"), &version(0));
    assert_eq!(lfs(&bob, &b, &["fsck"]).trim(), "Git LFS fsck OK");
    assert_eq!(lfs_objects(&b), 2, "v2's objects left; v0's are whole");
    assert!(!has_whole(&b, &bob, &commits[2], "model.bin"));
    lfs_checkout_restores(&bob, &b, "model.bin", &version(0));
    let listed = lfs(&bob, &b, &["ls-files", "--json"]);
    assert_eq!(
        listed.matches("\"downloaded\": true").count(),
        2,
        "{listed}"
    );
}

#[test]
fn old_revisions_come_whole_from_local_chunks_on_ext4() {
    old_revisions_come_whole_from_git_lfs_fetch_or_materialize_served_by_local_chunks(None);
}

#[test]
fn old_revisions_come_whole_from_local_chunks_on_xfs_with_reflink() {
    let Some(xfs) = Xfs::make() else { return };
    old_revisions_come_whole_from_git_lfs_fetch_or_materialize_served_by_local_chunks(Some(
        &xfs.mount(),
    ));
    drop(xfs);
}

/// Bob's clones (in `dir` when given) beside Carol's plain git-lfs clone: the git-lfs
/// commands that read an old revision whole.
fn old_revisions_come_whole_from_git_lfs_fetch_or_materialize_served_by_local_chunks(
    dir: Option<&Path>,
) {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/old", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let carol = GitEnv::plain_lfs();
    let a = alice.lfs_repo("a", &remote);
    let commits: Vec<String> = (0..3).map(|n| push_version(&alice, &a, n)).collect();
    let oldest = commits[0].as_str();
    let b = clone_in(&bob, &remote, dir, "b");
    for c in &commits {
        ok(bob.git_logged(&b, &["checkout", "-q", c]), "checkout");
    }
    bob.git(&b, &["checkout", "-q", "main"]);
    let c = carol.clone_ok(&remote, "c");

    // What git-lfs reads whole for an old revision is not there: a fresh git-lfs clone
    // fetched only HEAD's, this one keeps older versions as chunks. Both fail alike.
    let fsck_old = |env: &GitEnv, repo: &Path| env.git_output(repo, &["lfs", "fsck", oldest]);
    for (env, repo) in [(&bob, &b), (&carol, &c)] {
        let out = fsck_old(env, repo);
        assert!(!out.status.success(), "fsck of the oldest revision");
        assert!(stdout(&out).contains("openError"), "{}", stdout(&out));
    }
    let mirror = remote_url(&server, "org/old-mirror", "write");
    for (env, repo) in [(&bob, &b), (&carol, &c)] {
        env.git(repo, &["remote", "add", "mirror", &mirror]);
        let out = env.git_output(repo, &["lfs", "push", "--all", "mirror"]);
        assert!(!out.status.success(), "push --all without the old objects");
        // git-lfs's own check, made before any agent is asked: its words, not ours.
        assert!(
            stdout(&out).contains("(missing) model.bin"),
            "{}",
            stdout(&out)
        );
        let out = env.git_output(repo, &["push", "-q", "mirror", "main"]);
        assert!(!out.status.success(), "push of history without its objects");
    }

    // git-lfs's messages are its own; `git xet status` names the fix that needs no server.
    let status = stdout(&ok(bob.xet_output(&b, &["status", "--offline"]), "status"));
    assert!(
        status.contains(
            "`git xet materialize REV` before `git lfs fsck REV` or `git lfs push --all`"
        ),
        "{status}"
    );

    // git-lfs's own fixes, `git lfs fetch origin REV` and `git lfs fetch --all`: git-xet's
    // agent rebuilds each object from local chunks; no xorb byte crosses the network.
    let served = server.metric(XORB_SERVED);
    lfs(&bob, &b, &["fetch", "origin", oldest]);
    assert_eq!(lfs(&bob, &b, &["fsck", oldest]).trim(), "Git LFS fsck OK");
    lfs(&bob, &b, &["fetch", "--all"]);
    assert_eq!(
        server.metric(XORB_SERVED),
        served,
        "rebuilt, not downloaded"
    );
    lfs(&bob, &b, &["push", "--all", "mirror"]);
    ok(
        bob.git_logged(&b, &["push", "-q", "mirror", "main"]),
        "push",
    );
    // The mirror holds every version: plain git-lfs checks each out from it.
    let m = carol.clone_ok(&mirror, "m");
    for (n, commit) in commits.iter().enumerate() {
        carol.git(&m, &["checkout", "-q", commit]);
        assert_file_is(&m.join("model.bin"), &version(n));
    }
    lfs(&carol, &m, &["fsck"]);

    // `git xet materialize REV` does the same offline, for one revision.
    let b2 = clone_in(&bob, &remote, dir, "b2");
    server.stop();
    let out = fsck_old(&bob, &b2);
    assert!(!out.status.success(), "{}", stdout(&out));
    let said = stdout(&ok(
        bob.xet_output(&b2, &["materialize", oldest]),
        "materialize",
    ));
    assert!(said.contains("2 rebuilt from the chunk store"), "{said}");
    let out = ok(fsck_old(&bob, &b2), "fsck of the oldest after materialize");
    assert_eq!(stdout(&out).trim(), "Git LFS fsck OK", "{}", stderr(&out));
}
