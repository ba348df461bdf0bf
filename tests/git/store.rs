//! The per-user chunk store (docs/store.md): history kept as chunks, not whole copies; old
//! versions rebuilt offline and verified; clones sharing the store; a damaged chunk fetched
//! again; git-lfs commands and uninstalling after `git xet materialize`.

use std::path::{Path, PathBuf};

use crate::env::{assert_file_is, ok, remote_url, stderr, stdout, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";
const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";

/// Files under `dir`, recursively (0 when it does not exist).
fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                count_files(&p)
            } else {
                1
            }
        })
        .sum()
}

fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                bytes_under(&p)
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

/// `xorb/range size` of every stored range, for failure messages.
fn listing(chunks: &Path) -> String {
    let mut out = String::new();
    for xorb in std::fs::read_dir(chunks).into_iter().flatten().flatten() {
        for e in std::fs::read_dir(xorb.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            let name = xorb.file_name().to_string_lossy()[..8].to_string();
            out += &format!("{name}/{} {len}\n", e.file_name().to_string_lossy());
        }
    }
    out
}

/// Whole objects in a clone's `.git/lfs/objects`.
fn lfs_objects(repo: &Path) -> usize {
    count_files(&repo.join(".git/lfs/objects"))
}

/// Version `n` of a 3 MiB model: version 0 random, each next one with 64 KiB rewritten.
fn version(n: usize) -> Vec<u8> {
    let mut data = random_bytes(3 << 20, 700);
    for v in 1..=n {
        let edit = random_bytes(64 << 10, 700 + v as u64);
        let at = (v * 400_000) % (data.len() - edit.len());
        data[at..at + edit.len()].copy_from_slice(&edit);
    }
    data
}

/// Alice pushes `versions` versions of model.bin, one commit each; returns the commits.
fn push_versions(alice: &GitEnv, remote: &str, versions: usize) -> (PathBuf, Vec<String>) {
    let a = alice.lfs_repo("a", remote);
    let mut commits = Vec::new();
    for n in 0..versions {
        write_file(&a.join("model.bin"), &version(n));
        alice.git(&a, &["add", "."]);
        alice.git(&a, &["commit", "-qm", &format!("v{n}")]);
        commits.push(alice.git(&a, &["rev-parse", "HEAD"]));
    }
    ok(
        alice.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push",
    );
    (a, commits)
}

fn clone(env: &GitEnv, remote: &str, name: &str) -> PathBuf {
    let dir = env.root.path().join(name);
    ok(
        env.git_logged(
            &env.dir("."),
            &["clone", "-q", remote, dir.to_str().unwrap()],
        ),
        "clone",
    );
    dir
}

#[test]
fn pulled_versions_live_as_chunks_and_check_out_offline() {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/store", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let a = alice.lfs_repo("a", &remote);
    write_file(&a.join("model.bin"), &version(0));
    alice.commit_all_and_push(&a, "v0");
    let b = clone(&bob, &remote, "b");
    assert_file_is(&b.join("model.bin"), &version(0));
    // Pull every version as it is pushed.
    for n in 1..4 {
        write_file(&a.join("model.bin"), &version(n));
        alice.commit_all_and_push(&a, &format!("v{n}"));
        ok(
            bob.git_logged(&b, &["pull", "-q", "origin", "main"]),
            "pull",
        );
        assert_file_is(&b.join("model.bin"), &version(n));
    }
    assert_eq!(
        lfs_objects(&b),
        0,
        "no whole object stays in .git/lfs/objects"
    );
    // The four versions cost the clone what they cost the server (which stores only them).
    let store = bytes_under(&bob.store_dir().join("chunks"));
    let server_bytes = server.metric(XORB_RECEIVED) as u64;
    assert!(
        store <= server_bytes + server_bytes / 20 && store < 4 * (3 << 20) / 2,
        "the store holds the versions as shared chunks: {store} bytes, the server \
         {server_bytes}\n{}",
        listing(&bob.store_dir().join("chunks"))
    );
    // `git status` (which may clean the file again) leaves nothing whole either.
    bob.git(&b, &["status", "--porcelain"]);
    assert_eq!(lfs_objects(&b), 0);

    // Offline: every version comes back from local chunks, bit-exact.
    server.stop();
    let log: Vec<String> = bob
        .git(&b, &["log", "--format=%H", "--reverse"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(log.len(), 4);
    for (n, commit) in log.iter().enumerate() {
        ok(
            bob.git_logged(&b, &["checkout", "-q", commit]),
            "offline checkout",
        );
        assert_file_is(&b.join("model.bin"), &version(n));
    }
    assert_eq!(lfs_objects(&b), 0);
}

#[test]
fn a_damaged_chunk_is_fetched_again_never_served() {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/damaged", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (_, commits) = push_versions(&alice, &remote, 2);
    let b = clone(&bob, &remote, "b");
    ok(
        bob.git_logged(&b, &["checkout", "-q", &commits[0]]),
        "checkout v0",
    );
    bob.git(&b, &["checkout", "-q", "main"]);
    // Flip a byte in the middle of every stored range.
    let damage = |store: &Path| {
        for xorb in std::fs::read_dir(store.join("chunks")).unwrap().flatten() {
            for entry in std::fs::read_dir(xorb.path()).unwrap().flatten() {
                let mut bytes = std::fs::read(entry.path()).unwrap();
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x40;
                std::fs::write(entry.path(), bytes).unwrap();
            }
        }
    };
    damage(&bob.store_dir());
    let served = server.metric(XORB_SERVED);
    ok(
        bob.git_logged(&b, &["checkout", "-q", &commits[0]]),
        "checkout",
    );
    assert_file_is(&b.join("model.bin"), &version(0));
    assert!(
        server.metric(XORB_SERVED) > served,
        "the damaged ranges were fetched again"
    );
    // Offline with damaged chunks: the checkout fails rather than write wrong bytes.
    bob.git(&b, &["checkout", "-q", "main"]);
    damage(&bob.store_dir());
    // A whole copy git-lfs kept (verified when it was fetched) is a good copy: the checkout
    // may then succeed, bit-exact. Without one it must fail.
    let whole = lfs_objects(&b);
    server.stop();
    let out = bob.git_output(&b, &["checkout", "-q", &commits[0]]);
    let now = std::fs::read(b.join("model.bin")).unwrap_or_default();
    assert!(
        !out.status.success() || (whole > 0 && now == version(0)),
        "no good copy anywhere: the checkout fails\n{}",
        stderr(&out)
    );
    // Whatever the file holds now, it is not version 0 with damaged bytes.
    assert!(
        now.len() != version(0).len() || now == version(0) || now == version(1),
        "damaged bytes reached the working tree"
    );
}

#[test]
fn a_second_clone_takes_its_objects_from_the_store_even_two_at_once() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/shared", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    push_versions(&alice, &remote, 2);
    let first = clone(&bob, &remote, "first");
    let served = server.metric(XORB_SERVED);
    let store = bytes_under(&bob.store_dir().join("chunks"));
    // Two more clones at once, sharing the store with the first.
    let spawn = |name: &str| {
        let dir = bob.root.path().join(name);
        bob.command("git", &bob.dir("."))
            .args(["clone", "-q", &remote, dir.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (c2, c3) = (spawn("second"), spawn("third"));
    for (child, name) in [(c2, "second"), (c3, "third")] {
        ok(child.wait_with_output().unwrap(), "concurrent clone");
        let dir = bob.root.path().join(name);
        assert_file_is(&dir.join("model.bin"), &version(1));
        assert_eq!(lfs_objects(&dir), 0);
    }
    assert_eq!(
        server.metric(XORB_SERVED),
        served,
        "no chunk crossed the network for the later clones"
    );
    assert_eq!(
        bytes_under(&bob.store_dir().join("chunks")),
        store,
        "nor was any stored twice"
    );
    assert_file_is(&first.join("model.bin"), &version(1));
}

#[test]
fn git_lfs_commands_and_uninstalling_after_materialize() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/lfscmds", "write");
    let mirror = remote_url(&server, "org/mirror", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (_, commits) = push_versions(&alice, &remote, 3);
    let b = clone(&bob, &remote, "b");
    for c in &commits {
        bob.git(&b, &["checkout", "-q", c]);
    }
    bob.git(&b, &["checkout", "-q", "main"]);
    assert_eq!(lfs_objects(&b), 0);

    // `git lfs fetch --all`: git-lfs asks the agent, which rebuilds from local chunks.
    let served = server.metric(XORB_SERVED);
    ok(
        bob.git_logged(&b, &["lfs", "fetch", "--all"]),
        "lfs fetch --all",
    );
    assert_eq!(lfs_objects(&b), 3);
    assert_eq!(
        server.metric(XORB_SERVED),
        served,
        "rebuilt, not downloaded"
    );
    bob.git(&b, &["lfs", "fsck"]);
    // `git lfs prune` drops the old versions again; fsck of HEAD still passes.
    ok(bob.git_output(&b, &["lfs", "prune"]), "lfs prune");
    bob.git(&b, &["lfs", "fsck"]);

    // `git xet materialize --all` puts every version back, from the store.
    let out = stdout(&ok(
        bob.xet_output(&b, &["materialize", "--all"]),
        "materialize",
    ));
    assert!(out.contains("3 objects whole"), "{out}");
    assert_eq!(lfs_objects(&b), 3);
    assert_eq!(server.metric(XORB_SERVED), served);
    // `git lfs push --all` to another remote reads them.
    bob.git(&b, &["remote", "add", "mirror", &mirror]);
    ok(
        bob.git_logged(&b, &["lfs", "push", "--all", "mirror"]),
        "lfs push --all",
    );
    // `git lfs checkout` writes a file whose object is whole.
    std::fs::remove_file(b.join("model.bin")).unwrap();
    let out = bob
        .command("git", &b)
        .args(["checkout", "--", "model.bin"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "checkout of the pointer");
    assert!(std::fs::metadata(b.join("model.bin")).unwrap().len() < 200);
    ok(bob.git_output(&b, &["lfs", "checkout"]), "lfs checkout");
    assert_file_is(&b.join("model.bin"), &version(2));

    // Uninstalled, with the store gone too: git-lfs alone checks out every version.
    bob.xet(&b, &["uninstall", "--global"]);
    std::fs::remove_dir_all(bob.store_dir()).unwrap();
    bob.git(&b, &["lfs", "install", "--skip-repo"]);
    for (n, c) in commits.iter().enumerate() {
        ok(
            bob.git_output(&b, &["checkout", "-q", c]),
            "checkout by git-lfs",
        );
        assert_file_is(&b.join("model.bin"), &version(n));
    }
    bob.git(&b, &["lfs", "fsck"]);
}

/// Makes every stored range an hour old (a prune spares ranges written in the last minutes).
fn age_store(store: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for xorb in std::fs::read_dir(store.join("chunks")).unwrap().flatten() {
        for entry in std::fs::read_dir(xorb.path()).unwrap().flatten() {
            let f = std::fs::File::options()
                .append(true)
                .open(entry.path())
                .unwrap();
            f.set_modified(old).unwrap();
        }
    }
}

#[test]
fn prune_keeps_what_live_clones_reference_and_drops_vanished_ones() {
    let mut server = TestServer::start();
    let remote = remote_url(&server, "org/kept", "write");
    let other_remote = remote_url(&server, "org/gone", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (_, commits) = push_versions(&alice, &remote, 2);
    let b = clone(&bob, &remote, "b");
    ok(
        bob.git_logged(&b, &["checkout", "-q", &commits[0]]),
        "checkout v0",
    );
    bob.git(&b, &["checkout", "-q", "main"]);
    // Another repository, cloned and then deleted.
    let carol = GitEnv::with_agent(&[]);
    let o = carol.lfs_repo("o", &other_remote);
    write_file(&o.join("other.bin"), &random_bytes(2 << 20, 900));
    carol.commit_all_and_push(&o, "other");
    let gone = clone(&bob, &other_remote, "gone");
    let before = bytes_under(&bob.store_dir().join("chunks"));
    assert!(before > (5 << 20), "both repositories are stored: {before}");
    std::fs::remove_dir_all(&gone).unwrap();
    age_store(&bob.store_dir());

    let dry = stdout(&ok(
        bob.xet_output(&b, &["prune", "--dry-run"]),
        "prune --dry-run",
    ));
    assert!(dry.contains("would delete"), "{dry}");
    assert_eq!(bytes_under(&bob.store_dir().join("chunks")), before);
    let out = stdout(&ok(bob.xet_output(&b, &["prune"]), "prune"));
    assert!(out.contains("forgot"), "{out}");
    let after = bytes_under(&bob.store_dir().join("chunks"));
    assert!(
        after < before - (1 << 20) && after > (3 << 20),
        "the vanished clone's chunks went, the live one's stayed: {before} -> {after}\n{out}"
    );
    // What the live clone references is still there: offline checkouts of both versions.
    server.stop();
    for (n, c) in commits.iter().enumerate() {
        ok(
            bob.git_logged(&b, &["checkout", "-q", c]),
            "offline checkout",
        );
        assert_file_is(&b.join("model.bin"), &version(n));
    }
}
