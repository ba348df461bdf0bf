//! File locking over ssh only: real git-lfs speaks `lock`, `list-lock` and `unlock` through
//! `git-lfs-transfer` (`git xet shell` behind a real sshd), which relays them to the
//! server's locking API under the key's user; a second user's push of the locked file is
//! refused by git-lfs's own check and, when skipped, by the server over ssh.

use std::path::Path;

use crate::env::{stderr, GitEnv};
use crate::ssh_shell::{payload, site, Session, Site};

/// Writes a file even when git-lfs made it read-only (lockable files locked by others).
fn overwrite(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

fn all_output(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(out))
}

/// `user`'s plain git-lfs over ssh, verifying locks on push and tracing what it runs.
fn user_env(site: &Site, user: &str) -> GitEnv {
    let env = site.env(user, true).with_env("GIT_TRACE", "1");
    let home = env.dir("install");
    env.git(&home, &["config", "--global", "lfs.locksverify", "true"]);
    env
}

/// Runs git-lfs's `args`; checks the locking went over git-lfs-transfer, never HTTP.
fn over_ssh(env: &GitEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    let out = env.git_output(dir, args);
    let trace = stderr(&out);
    assert!(
        trace.contains("git-lfs-transfer") && !trace.contains("git-lfs-authenticate"),
        "{args:?} did not go through git-lfs-transfer:\n{trace}"
    );
    out
}

#[test]
fn git_lfs_locks_over_git_lfs_transfer_and_the_locked_file_is_refused_to_others() {
    let Some(site) = site(&[("alice", &["org/art:write"]), ("bob", &["org/art:write"])]) else {
        return;
    };
    let url = site.sshd.url("org/art");
    let alice = user_env(&site, "alice");
    let a = alice.dir("a");
    alice.git(&a, &["init", "-q", "-b", "main"]);
    alice.git(&a, &["lfs", "track", "--lockable", "*.psd"]);
    alice.git(&a, &["remote", "add", "origin", &url]);
    overwrite(&a.join("art.psd"), &payload(1, 200_000));
    overwrite(&a.join("notes.psd"), &payload(2, 1000));
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "art"]);
    alice.git(&a, &["push", "-q", "-u", "origin", "main"]);

    let out = over_ssh(&alice, &a, &["lfs", "lock", "art.psd"]);
    let said = all_output(&out);
    assert!(
        out.status.success() && said.contains("Locked art.psd"),
        "{said}"
    );

    // Bob sees the lock, and his own lock on the same path is refused (409) naming it.
    let bob = user_env(&site, "bob");
    let b = bob.dir("b");
    bob.git(&b, &["clone", "-q", &url, "."]);
    let out = over_ssh(&bob, &b, &["lfs", "locks"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", all_output(&out));
    assert!(
        listed.contains("art.psd") && listed.contains("alice") && !listed.contains("notes.psd"),
        "{listed}"
    );
    let out = over_ssh(&bob, &b, &["lfs", "lock", "art.psd"]);
    let said = all_output(&out);
    assert!(!out.status.success(), "bob locked a locked file: {said}");
    assert!(said.contains("already locked"), "{said}");

    // Bob's change to it: git-lfs's verify (list-lock with refname) stops the push...
    overwrite(&b.join("art.psd"), &payload(3, 200_000));
    bob.git(&b, &["commit", "-qam", "bob paints"]);
    let out = over_ssh(&bob, &b, &["push", "origin", "main"]);
    let said = all_output(&out);
    assert!(!out.status.success(), "the push went through: {said}");
    assert!(
        said.contains("Unable to push locked files") && said.contains("art.psd"),
        "{said}"
    );
    // ... and when he skips it, the server refuses the push over ssh.
    let out = bob.git_output(
        &b,
        &["-c", "lfs.locksverify=false", "push", "origin", "main"],
    );
    let said = all_output(&out);
    assert!(!out.status.success(), "the server accepted: {said}");
    assert!(said.contains("art.psd (locked by alice)"), "{said}");

    // Bob cannot remove her lock, even forcing (403); an unknown id is 404.
    for args in [
        &["lfs", "unlock", "art.psd"][..],
        &["lfs", "unlock", "--force", "art.psd"],
    ] {
        let out = over_ssh(&bob, &b, args);
        let said = all_output(&out);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("locked by alice, not by you (bob)"),
            "{args:?}: {said}"
        );
    }
    let out = over_ssh(&bob, &b, &["lfs", "unlock", "--id", "0123456789abcdef"]);
    let said = all_output(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("there is no lock 0123456789abcdef"), "{said}");

    // Alice unlocks; the listing is empty and Bob's push goes through, verified.
    let out = over_ssh(&alice, &a, &["lfs", "unlock", "art.psd"]);
    let said = all_output(&out);
    assert!(
        out.status.success() && said.contains("Unlocked art.psd"),
        "{said}"
    );
    let out = over_ssh(&bob, &b, &["lfs", "locks"]);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        all_output(&out)
    );
    let out = bob.git_output(&b, &["push", "origin", "main"]);
    assert!(out.status.success(), "{}", all_output(&out));
}

#[test]
fn git_lfs_transfer_lock_commands_are_framed_as_git_lfs_reads_them() {
    let Some(site) = site(&[("alice", &["org/raw:write"])]) else {
        return;
    };
    let mut s = Session::start(&site, "alice", "git-lfs-transfer org/raw upload");
    assert_eq!(s.answer(), ["version=1", "locking"]);
    s.send(&[b"version 1\n", b"FLUSH"]);
    assert_eq!(s.answer(), ["status 200"]);
    // Locks go to the server's locking API: taken (201), held (409 with the lock), listed
    // as ours, released (200), then unknown (404).
    s.send(&[b"lock\n", b"path=a b.psd\n", b"FLUSH"]);
    let taken = s.answer();
    assert_eq!(taken[0], "status 201", "{taken:?}");
    let id = taken[1].strip_prefix("id=").expect("id first").to_string();
    assert_eq!(&taken[2..3], ["path=a b.psd"]);
    assert!(taken[3].starts_with("locked-at=20") && taken[4] == "ownername=alice");
    s.send(&[b"lock\n", b"path=a b.psd\n", b"FLUSH"]);
    let held = s.answer();
    assert_eq!(
        (&held[..2], &held[2..5]),
        (
            &["status 409".to_string(), format!("id={id}")][..],
            &taken[2..5]
        )
    );
    assert_eq!(held[5..], ["DELIM", "a b.psd is already locked by alice"]);
    s.send(&[b"list-lock\n", b"refname=refs/heads/main\n", b"FLUSH"]);
    let listed = s.answer();
    assert_eq!(listed[..3], ["status 200", "DELIM", &format!("lock {id}")]);
    assert!(listed.contains(&format!("owner {id} ours")), "{listed:?}");
    let unlock = format!("unlock {id}\n");
    s.send(&[unlock.as_bytes(), b"FLUSH"]);
    assert_eq!(
        s.answer()[..2],
        ["status 200".to_string(), format!("id={id}")]
    );
    s.send(&[unlock.as_bytes(), b"FLUSH"]);
    assert_eq!(s.answer()[0], "status 404");
    s.send(&[b"quit\n", b"FLUSH"]);
    assert_eq!(s.answer(), ["status 200"]);
    assert!(s.child.wait().unwrap().success());
}
