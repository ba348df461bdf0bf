//! Several `git xet server` processes serving one deployment: a PostgreSQL index (real
//! PostgreSQL, crates/testkit/src/postgres.rs), one S3 object store (a real 3-node Garage,
//! tests/support/garage.rs) and one `--git-dir`, each process with a data directory of its
//! own. Real git, git-lfs and the agent push and clone through different processes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use git_xet_core::MerkleHash;
use git_xet_index::{DedupDomain, Index, PgIndex};

use crate::env::{assert_file_is, stderr, GitEnv};
use crate::support::garage::{self, Garage};
use crate::support::{git_xet, postgres, random_bytes, write_file, TestServer};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";

struct Deployment {
    db: postgres::PgDatabase,
    garage: &'static Garage,
    /// The deployment's key prefix in the Garage bucket.
    prefix: String,
    root: tempfile::TempDir,
    servers: Vec<TestServer>,
}

impl Deployment {
    /// `n` processes sharing the index, the store and the git directory; `None` when
    /// PostgreSQL or Garage is not installed (outside CI).
    fn start(n: usize) -> Option<Deployment> {
        let db = postgres::database()?;
        let garage = garage::shared()?;
        let prefix = garage::unique_prefix("multi");
        let root = tempfile::tempdir().unwrap();
        let git_dir = root.path().join("git");
        let args = [
            "--index",
            db.url.as_str(),
            "--git-dir",
            git_dir.to_str().unwrap(),
            "--no-fsync",
        ];
        let servers = (0..n)
            .map(|_| TestServer::start_on_garage(garage, &prefix, &args))
            .collect();
        Some(Deployment {
            db,
            garage,
            prefix,
            root,
            servers,
        })
    }

    /// A token from `token create --index`: no server's data directory involved.
    fn token(&self, repo: &str, scope: &str) -> String {
        self.user_token(repo, scope, None)
    }

    fn user_token(&self, repo: &str, scope: &str, user: Option<&str>) -> String {
        let out = git_xet()
            .args([
                "server", "token", "create", "--repo", repo, "--scope", scope,
            ])
            .args(user.map(|u| ["--user", u]).iter().flatten())
            .args(["--index", &self.db.url])
            .arg("--data")
            .arg(self.root.path().join("admin"))
            .output()
            .unwrap();
        assert!(out.status.success(), "token create: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// An admin command (`gc`, `check`, `repo delete`) on the shared deployment, from a data
    /// directory of its own: it must succeed; its stdout.
    fn admin(&self, args: &[&str]) -> String {
        let mut cmd = git_xet();
        cmd.arg("server")
            .args(args)
            .args(["--index", &self.db.url])
            .arg("--object-store")
            .arg(format!("s3://{}/{}", self.garage.bucket, self.prefix))
            .arg("--data")
            .arg(self.root.path().join("admin"))
            .env("GIT_XET_SERVER_GIT_DIR", self.root.path().join("git"));
        self.garage.apply_env(&mut cmd);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "git xet server {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn remote(&self, server: usize, repo: &str, token: &str) -> String {
        format!(
            "http://x:{token}@{}/{repo}.git",
            self.servers[server].addr()
        )
    }

    fn received(&self, server: usize) -> f64 {
        self.servers[server].metric(XORB_RECEIVED)
    }

    /// Every registered file rebuilds from registered xorbs that are in the store: nothing
    /// is half-registered.
    fn assert_consistent(&self) -> usize {
        let index = PgIndex::open(&self.db.url).unwrap();
        let files = self.db.sql("SELECT encode(hash, 'hex') FROM files");
        let stored = self.stored_keys();
        let mut n = 0;
        for hex in files.lines().filter(|l| !l.is_empty()) {
            let hash = hash_of(hex);
            let file = index
                .file(&hash, &DedupDomain::Server)
                .unwrap()
                .expect("listed file");
            for term in &file.terms {
                let xorb = index
                    .xorb(&term.xorb_hash)
                    .unwrap()
                    .unwrap_or_else(|| panic!("file {hex} uses unregistered xorb"));
                assert!(term.chunk_end as usize <= xorb.num_chunks());
                let key = self.xorb_key(&term.xorb_hash);
                assert!(stored.contains(&key), "{key} is not in the bucket");
            }
            n += 1;
        }
        n
    }

    fn xorb_key(&self, hash: &MerkleHash) -> String {
        let hex = hash.to_hex();
        format!("{}/xorbs/{}/{hex}.xorb", self.prefix, &hex[..2])
    }

    /// Every key under the deployment's prefix in the bucket.
    fn stored_keys(&self) -> HashSet<String> {
        use futures::TryStreamExt;
        use object_store::ObjectStore;
        let s3 = self.garage.s3_builder().build().unwrap();
        let prefix = object_store::path::Path::from(self.prefix.as_str());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let listed: Vec<_> = s3.list(Some(&prefix)).try_collect().await.unwrap();
            listed.into_iter().map(|m| m.location.to_string()).collect()
        })
    }
}

fn hash_of(hex: &str) -> MerkleHash {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    MerkleHash::from_slice(&bytes).unwrap()
}

fn clone_into(env: &GitEnv, remote: &str, name: &str) -> std::path::PathBuf {
    let dir = env.root.path().join(name);
    env.git(
        env.root.path(),
        &["clone", "-q", remote, dir.to_str().unwrap()],
    );
    dir
}

fn push_files(
    env: &GitEnv,
    name: &str,
    remote: &str,
    files: &[(&str, &[u8])],
) -> std::path::PathBuf {
    let repo = env.lfs_repo(name, remote);
    for (path, bytes) in files {
        write_file(&repo.join(path), bytes);
    }
    env.commit_all_and_push(&repo, name);
    repo
}

#[test]
fn push_through_one_process_clone_through_another_and_dedup_across_them() {
    let Some(d) = Deployment::start(2) else {
        return;
    };
    let env = GitEnv::with_agent(&[]);
    let shared = random_bytes(8 << 20, 221);
    let token = d.token("org/first", "write");
    push_files(
        &env,
        "first",
        &d.remote(0, "org/first", &token),
        &[("shared.bin", &shared)],
    );
    assert!(d.received(0) >= shared.len() as f64);

    // Cloned through the other process: bit-exact (the token from `token create --index`
    // and the git repository in the shared --git-dir work there too).
    let reader = GitEnv::with_agent(&[]);
    let read = d.token("org/first", "read");
    let clone = clone_into(&reader, &d.remote(1, "org/first", &read), "clone");
    assert_file_is(&clone.join("shared.bin"), &shared);

    // The same content pushed to another repository through the other process: global
    // dedup finds it in the shared index, so only the new file's bytes travel.
    let unique = random_bytes(1 << 20, 222);
    let token = d.token("org/second", "write");
    push_files(
        &env,
        "second",
        &d.remote(1, "org/second", &token),
        &[("shared.bin", &shared), ("unique.bin", &unique)],
    );
    let second = d.received(1);
    eprintln!("second push through process 1 sent {second} xorb bytes");
    assert!(second >= unique.len() as f64, "{second}");
    assert!(
        second < (unique.len() + (256 << 10)) as f64,
        "the shared 8 MiB were uploaded again: {second} bytes"
    );
    let read = d.token("org/second", "read");
    let clone = clone_into(&reader, &d.remote(0, "org/second", &read), "clone2");
    assert_file_is(&clone.join("shared.bin"), &shared);
    assert_file_is(&clone.join("unique.bin"), &unique);
    assert_eq!(d.assert_consistent(), 2);
}

/// Eight pushers at once over three processes, each with content the others also push
/// (an 8 MiB file known beforehand, and a file each pair pushes at the same moment) and a
/// file of its own. Every repository clones bit-exact through another process, and the
/// known content is not uploaded again by anyone.
#[test]
fn eight_concurrent_pushers_over_three_processes() {
    let Some(d) = Deployment::start(3) else {
        return;
    };
    let common = random_bytes(8 << 20, 231);
    let seed = GitEnv::with_agent(&[]);
    let token = d.token("org/seed", "write");
    push_files(
        &seed,
        "seed",
        &d.remote(0, "org/seed", &token),
        &[("common.bin", &common)],
    );
    let before: f64 = (0..3).map(|i| d.received(i)).sum();

    let pairs: Vec<Vec<u8>> = (0..4).map(|p| random_bytes(2 << 20, 240 + p)).collect();
    let uniques: Vec<Vec<u8>> = (0..8).map(|i| random_bytes(1 << 20, 250 + i)).collect();
    let d = Arc::new(d);
    let pushers: Vec<_> = (0..8)
        .map(|i| {
            let d = d.clone();
            let (pair, unique, common) = (pairs[i / 2].clone(), uniques[i].clone(), common.clone());
            std::thread::spawn(move || {
                let env = GitEnv::with_agent(&[]);
                let repo = format!("team/r{i}");
                let remote = d.remote(i % 3, &repo, &d.token(&repo, "write"));
                push_files(
                    &env,
                    "work",
                    &remote,
                    &[
                        ("common.bin", &common),
                        ("pair.bin", &pair),
                        ("unique.bin", &unique),
                    ],
                );
            })
        })
        .collect();
    for p in pushers {
        p.join().expect("a pusher failed");
    }
    let sent: f64 = (0..3).map(|i| d.received(i)).sum::<f64>() - before;
    let new_bytes = (8 * (1 << 20) + 8 * (2 << 20)) as f64;
    eprintln!("8 pushers sent {sent} xorb bytes; new content is at most {new_bytes}");
    assert!(
        sent < new_bytes + (common.len() / 2) as f64,
        "the known 8 MiB file was uploaded again: {sent} bytes"
    );

    let reader = GitEnv::with_agent(&[]);
    for i in 0..8 {
        let repo = format!("team/r{i}");
        let remote = d.remote((i + 1) % 3, &repo, &d.token(&repo, "read"));
        let clone = clone_into(&reader, &remote, &format!("c{i}"));
        assert_file_is(&clone.join("common.bin"), &common);
        assert_file_is(&clone.join("pair.bin"), &pairs[i / 2]);
        assert_file_is(&clone.join("unique.bin"), &uniques[i]);
    }
    // common + 4 pair files + 8 unique files, each registered once.
    assert_eq!(d.assert_consistent(), 13);
}

/// kill -9 of the process a push goes through: the others keep serving, the push retried
/// through another process succeeds, and nothing is half-registered.
#[test]
fn a_process_killed_mid_push_leaves_the_others_serving() {
    let Some(mut d) = Deployment::start(2) else {
        return;
    };
    let env = GitEnv::with_agent(&[]);
    let earlier = random_bytes(1 << 20, 261);
    let token = d.token("org/kept", "write");
    push_files(
        &env,
        "kept",
        &d.remote(1, "org/kept", &token),
        &[("kept.bin", &earlier)],
    );

    let token = d.token("org/crash", "write");
    let big = random_bytes(96 << 20, 262);
    let repo = env.lfs_repo("crash", &d.remote(0, "org/crash", &token));
    write_file(&repo.join("big.bin"), &big);
    env.git(&repo, &["add", "."]);
    env.git(&repo, &["commit", "-qm", "big"]);
    let push = env
        .command("git", &repo)
        .args(["push", "origin", "main"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while d.received(0) == 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    d.servers[0].kill();
    let out = push.wait_with_output().unwrap();
    eprintln!(
        "push through the killed process: {} {}",
        out.status,
        stderr(&out)
    );

    // The survivor serves what was there, and the index holds only whole registrations.
    let reader = GitEnv::with_agent(&[]);
    let read = d.token("org/kept", "read");
    let clone = clone_into(&reader, &d.remote(1, "org/kept", &read), "kept");
    assert_file_is(&clone.join("kept.bin"), &earlier);
    let registered = d.assert_consistent();
    assert!(registered <= 2, "{registered} files registered");

    // The retry goes through the other process and completes.
    env.git(
        &repo,
        &[
            "remote",
            "set-url",
            "origin",
            &d.remote(1, "org/crash", &token),
        ],
    );
    env.git(&repo, &["push", "-q", "origin", "main"]);
    let read = d.token("org/crash", "read");
    let clone = clone_into(&reader, &d.remote(1, "org/crash", &read), "crash");
    assert_file_is(&clone.join("big.bin"), &big);
    assert_eq!(d.assert_consistent(), 2);
}

/// gc on the shared deployment: a repository pushed through one process and deleted, `gc
/// --grace 0` from an admin command frees its unique xorbs in the bucket and keeps the
/// shared ones; `check --read-data` passes and the other repository clones bit-exact
/// through the other process.
#[test]
fn gc_on_postgres_and_garage_frees_a_deleted_repositorys_unique_xorbs() {
    let Some(d) = Deployment::start(2) else {
        return;
    };
    let env = GitEnv::with_agent(&[]);
    let shared = random_bytes(3 << 20, 261);
    let unique = random_bytes(5 << 20, 262);
    let token = d.token("org/gone", "write");
    push_files(
        &env,
        "gone",
        &d.remote(0, "org/gone", &token),
        &[("shared.bin", &shared), ("unique.bin", &unique)],
    );
    let token = d.token("org/kept", "write");
    push_files(
        &env,
        "kept",
        &d.remote(1, "org/kept", &token),
        &[("shared.bin", &shared)],
    );
    let before = d.stored_keys();

    d.admin(&["repo", "delete", "org/gone", "--yes"]);
    let out = d.admin(&["gc", "--grace", "0"]);
    eprintln!("gc: {out}");
    let line = out.lines().find(|l| l.starts_with("xorbs freed:")).unwrap();
    let freed: u64 = line
        .split('(')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let size = unique.len() as u64;
    assert!(
        freed >= size && freed < size + size / 10,
        "freed {freed} bytes for a {size}-byte file: {out}"
    );
    let after = d.stored_keys();
    let removed: Vec<_> = before.difference(&after).collect();
    assert!(
        !removed.is_empty() && after.is_subset(&before),
        "{removed:?}"
    );
    assert!(
        d.db.sql("SELECT COUNT(*) FROM condemned_xorbs") == "0",
        "gc finished"
    );
    let out = d.admin(&["check", "--read-data"]);
    assert!(out.contains("no problems found"), "{out}");
    assert_eq!(d.assert_consistent(), 1, "only the kept repository's file");

    let reader = GitEnv::with_agent(&[]);
    let read = d.token("org/kept", "read");
    let clone = clone_into(&reader, &d.remote(1, "org/kept", &read), "kept");
    assert_file_is(&clone.join("shared.bin"), &shared);
}

/// Locks and token revocation live in the shared index: a lock taken through one process
/// is listed and holds through the other; a token listed and revoked by an admin command is
/// refused by both processes within seconds.
#[test]
fn locks_and_revoked_tokens_hold_across_processes() {
    let Some(d) = Deployment::start(2) else {
        return;
    };
    const REPO: &str = "studio/art";
    let alice = d.user_token(REPO, "write", Some("alice"));
    let bob = d.user_token(REPO, "write", Some("bob"));
    let env = GitEnv::with_agent(&[]);
    let repo = push_files(
        &env,
        "art",
        &d.remote(0, REPO, &alice),
        &[("art.psd", &random_bytes(64 << 10, 271))],
    );
    env.git(&repo, &["lfs", "lock", "art.psd"]);

    let bobs_env = GitEnv::with_agent(&[]);
    let bobs = clone_into(&bobs_env, &d.remote(1, REPO, &bob), "bobs");
    let listed = bobs_env.git(&bobs, &["lfs", "locks"]);
    assert!(
        listed.contains("art.psd") && listed.contains("alice"),
        "{listed}"
    );
    let taken = bobs_env.git_output(&bobs, &["lfs", "lock", "art.psd"]);
    assert!(
        !taken.status.success(),
        "bob locked alice's file through the other process"
    );

    let table = d.admin(&["token", "list"]);
    let bob_id = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("bob"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("bob's token is listed: {table}"))
        .to_string();
    d.admin(&["token", "revoke", &bob_id]);
    assert!(d
        .admin(&["token", "list"])
        .lines()
        .any(|l| l.starts_with(&bob_id) && l.ends_with("revoked")));
    let revoked_at = Instant::now();
    for server in 0..2 {
        loop {
            let out = bobs_env.git_output(
                bobs_env.root.path(),
                &["ls-remote", &d.remote(server, REPO, &bob)],
            );
            if !out.status.success() {
                break;
            }
            assert!(
                revoked_at.elapsed() < Duration::from_secs(8),
                "process {server} still accepts a revoked token after {:?}",
                revoked_at.elapsed()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    // Alice's token is not affected, and she unlocks through the other process.
    let alices = clone_into(&env, &d.remote(1, REPO, &alice), "alices");
    env.git(&alices, &["lfs", "unlock", "art.psd"]);
    assert!(!env.git(&alices, &["lfs", "locks"]).contains("art.psd"));
}
