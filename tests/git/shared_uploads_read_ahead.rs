//! The coordinator's read-ahead of git-lfs (the lfs crate's `coordinator/read_ahead.rs`): it
//! uploads objects a Batch API answer lists before git-lfs hands them over, and only those
//! the push may contain. Real git, git-lfs, several agent processes and the server on
//! loopback, behind a proxy that can edit the lists the server gives.

use std::time::Duration;

use crate::env::{stderr, GitEnv};
use crate::shared_uploads::{assert_cloned, oid_of, small_files, stored_on};
use crate::shared_uploads_proxy::{repo_behind, ShardProxy};
use crate::support::{random_bytes, write_file, TestServer};

/// The coordinator reads ahead of git-lfs: for each Batch API answer it learns which objects
/// the answer announced (from the list its first upload actions carry, or, from a server that
/// does not send it, by asking) and registers those no agent has handed over yet, so that
/// git-lfs's next objects are answered as soon as they are handed over. Two Batch API
/// answers (git-lfs asks for 100 objects at a time), both read ahead; a bit-exact clone.
#[test]
fn the_coordinator_reads_ahead_of_git_lfs() {
    for strips_lists in [false, true] {
        let proxy = ShardProxy {
            strips_lists,
            ..ShardProxy::delaying("/not-held", Duration::ZERO)
        };
        let public = format!("http://{}", proxy.addr);
        let server = TestServer::start_with(&["--public-url", &public]);
        proxy.serve(server.listen_addr());
        let env = GitEnv::with_agent(&["--concurrency", "8"]);
        let (a, remote) = repo_behind(&env, &server, &proxy, "org/ahead");
        let files = small_files(&a, 150, 8);
        env.git(&a, &["add", "."]);
        env.git(&a, &["commit", "-qm", "ahead"]);
        let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
        assert!(out.status.success(), "push: {}", stderr(&out));
        let log = env.agent_log();
        let from = if strips_lists {
            "the server"
        } else {
            "the answer"
        };
        let queued: Vec<usize> = log
            .lines()
            .filter(|l| l.ends_with(&format!("(list from {from})")))
            .filter_map(|l| l.split("read ahead of git-lfs: ").nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse().ok())
            .collect();
        let asked = server.requests("upload_batch");
        match strips_lists {
            true => assert_eq!(asked, 2, "{log}"),
            // Asked only when an object without the list reached the coordinator first.
            false => assert!(asked <= 2, "{asked}\n{log}"),
        }
        // Eight agents hold eight objects at a time: most of each answer's objects were read
        // ahead of them.
        assert!(
            queued.len() == 2 && queued.iter().sum::<usize>() >= 100,
            "read ahead {queued:?} from {from}\n{log}"
        );
        assert_cloned(&remote, &files);
    }
}

/// An object whose stored copy no longer matches its oid (same size, other bytes), read
/// ahead or handed over: the push fails naming it, the server registers nothing under its
/// oid, and once the copy is right again the push completes.
#[test]
fn a_damaged_stored_object_fails_alone_when_read_ahead() {
    let server = TestServer::start();
    let remote = crate::env::remote_url(&server, "org/damaged", "write");
    let env = GitEnv::with_agent(&["--concurrency", "4"]);
    let a = env.lfs_repo("a", &remote);
    let files = small_files(&a, 120, 9);
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "damaged"]);
    // The last file of the second Batch API answer: read ahead while four agents hold others.
    let oid = oid_of(&files[119]);
    let stored = a
        .join(".git/lfs/objects")
        .join(&oid[..2])
        .join(&oid[2..4])
        .join(&oid);
    let original = std::fs::read(&stored).unwrap();
    std::fs::write(&stored, random_bytes(original.len(), 999)).unwrap();
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success(), "the push must fail");
    assert!(stderr(&out).contains(&oid[..12]), "{}", stderr(&out));
    assert!(!stored_on(&server, "org/damaged", &oid, original.len()));
    assert!(stored_on(
        &server,
        "org/damaged",
        &oid_of(&files[0]),
        files[0].len()
    ));

    std::fs::write(&stored, &original).unwrap();
    let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "push: {}", stderr(&out));
    assert_cloned(&remote, &files);
}

/// A server whose lists also name local objects this push does not contain, whose oids and
/// sizes it knows (from public pointers, say): none of them reaches it, while the push's own
/// objects are read ahead as usual. The objects, each in `.git/lfs/objects`: one of a
/// commit no branch reaches any more, one of another remote's branch, one in the stash and
/// one cleaned by `git add` but never committed. Named in the Batch API answers' lists, and,
/// from a server that sends none, in the read-ahead route's.
#[test]
fn objects_the_push_does_not_contain_are_never_read_ahead() {
    let secrets: Vec<Vec<u8>> = (0..4)
        .map(|i| random_bytes(1024 + 512 * i, 70_000 + i as u64))
        .collect();
    let names: Vec<String> = secrets
        .iter()
        .map(|data| format!("{}:{}", oid_of(data), data.len()))
        .collect();
    for strips_lists in [false, true] {
        let proxy = ShardProxy {
            strips_lists,
            names_also: names.clone(),
            ..ShardProxy::delaying("/not-held", Duration::ZERO)
        };
        let public = format!("http://{}", proxy.addr);
        let server = TestServer::start_with(&["--public-url", &public]);
        proxy.serve(server.listen_addr());
        let env = GitEnv::with_agent(&["--concurrency", "8"]);
        let (a, remote) = repo_behind(&env, &server, &proxy, "org/scoped");
        let files = small_files(&a, 150, 10);
        env.git(&a, &["add", "."]);
        env.git(&a, &["commit", "-qm", "pushed"]);
        let commit_on = |branch: &str, path: &str, data: &[u8]| {
            env.git(&a, &["checkout", "-qb", branch]);
            write_file(&a.join(path), data);
            env.git(&a, &["add", path]);
            env.git(&a, &["commit", "-qm", branch]);
        };
        commit_on("dropped", "secret/dropped.bin", &secrets[0]);
        env.git(&a, &["checkout", "-q", "main"]);
        env.git(&a, &["branch", "-qD", "dropped"]);
        // What a fetch from another remote leaves.
        commit_on("theirs", "secret/theirs.bin", &secrets[1]);
        env.git(&a, &["update-ref", "refs/remotes/upstream/main", "HEAD"]);
        env.git(&a, &["checkout", "-q", "main"]);
        env.git(&a, &["branch", "-qD", "theirs"]);
        write_file(&a.join("d0/f0.bin"), &secrets[2]);
        env.git(&a, &["stash", "-q"]);
        write_file(&a.join("secret/staged.bin"), &secrets[3]);
        env.git(&a, &["add", "secret/staged.bin"]);
        env.git(&a, &["rm", "-q", "--cached", "secret/staged.bin"]);
        std::fs::remove_file(a.join("secret/staged.bin")).unwrap();
        for data in &secrets {
            let oid = oid_of(data);
            let stored = a.join(".git/lfs/objects").join(&oid[..2]).join(&oid[2..4]);
            assert!(stored.join(&oid).is_file(), "{oid} is not in the store");
        }

        let out = env.git_logged(&a, &["push", "-q", "origin", "main"]);
        assert!(out.status.success(), "push: {}", stderr(&out));
        let log = env.agent_log();
        for (data, name) in secrets.iter().zip(&names) {
            assert!(
                !stored_on(&server, "org/scoped", &oid_of(data), data.len()),
                "{name} reached the server (lists stripped: {strips_lists})\n{log}"
            );
        }
        assert!(
            log.contains("not reading ahead 4 objects the list names"),
            "{log}"
        );
        // The push's own objects were still read ahead, most of each answer's.
        let queued: usize = log
            .lines()
            .filter_map(|l| l.split("read ahead of git-lfs: ").nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
            .sum();
        assert!(queued >= 100, "read ahead {queued}\n{log}");
        assert_cloned(&remote, &files);
    }
}
