//! `git xet server backup`, `restore` and `backup verify` on real deployments: a backup taken
//! while git-lfs pushes run, restored into a fresh embedded deployment and into PostgreSQL +
//! Garage, where every repository clones bit-exact with the tokens made before the backup.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::gitenv::GitEnv;
use crate::support::garage;
use crate::support::postgres;
use crate::support::{git_xet, random_bytes, write_file, TestServer};

fn remote(server: &TestServer, repo: &str) -> String {
    format!("{}/{repo}.git", server.url)
}

fn admin(server: &TestServer, args: &[&str]) -> Output {
    server.admin(args).output().expect("run git xet server")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `git xet server backup verify --from DEST ARGS` (it takes no deployment options).
fn verify(dest: &str, args: &[&str]) -> Output {
    git_xet()
        .args(["server", "backup", "verify", "--from", dest])
        .args(args)
        .output()
        .expect("run backup verify")
}

fn verify_ok(dest: &str, args: &[&str]) {
    let out = verify(dest, args);
    assert!(out.status.success(), "verify {args:?}: {}", text(&out));
}

fn admin_ok(server: &TestServer, args: &[&str]) -> String {
    let out = admin(server, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    text(&out)
}

/// Commits `bytes` as LFS file `name` and pushes; returns the commit.
fn push_file(env: &GitEnv, work: &Path, name: &str, bytes: &[u8]) -> String {
    write_file(&work.join(name), bytes);
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", name]);
    env.git(work, &["push", "-q", "origin", "main"]);
    env.git(work, &["rev-parse", "HEAD"]).trim().to_string()
}

/// A working repository for `repo` on `server` with its first file pushed.
fn repo_with(env: &GitEnv, server: &TestServer, repo: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let work = env.home.path().join(repo.replace('/', "_"));
    env.new_repo(&work);
    env.git(&work, &["remote", "add", "origin", &remote(server, repo)]);
    for (name, bytes) in files {
        push_file(env, &work, name, bytes);
    }
    work
}

/// Clones `repo` and checks every file of `expected` bit-exact and HEAD at `head`.
fn assert_clone(
    env: &GitEnv,
    server: &TestServer,
    repo: &str,
    head: &str,
    expected: &[(&str, &[u8])],
) {
    let clone = env.home.path().join(format!("clone-{}", rand_suffix()));
    let target = clone.to_str().unwrap();
    env.git(
        env.home.path(),
        &["clone", "-q", &remote(server, repo), target],
    );
    assert_eq!(
        env.git(&clone, &["rev-parse", "HEAD"]).trim(),
        head,
        "{repo}"
    );
    for (name, bytes) in expected {
        let got = std::fs::read(clone.join(name)).unwrap();
        assert!(got == *bytes, "{repo}/{name} is not bit-exact");
    }
    env.git(&clone, &["lfs", "fsck"]);
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A fresh deployment to restore into: the server is started once (it creates its secret
/// and empty index, as a new deployment would), stopped, restored into, started again.
fn restore_into(target: &mut TestServer, backup: &str) {
    target.stop();
    let out = admin(target, &["restore", "--from", backup]);
    assert!(out.status.success(), "restore: {}", text(&out));
    target.restart();
}

#[test]
fn a_backup_taken_during_pushes_restores_bit_exact_with_the_old_tokens() {
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    let reader = server.token("org/a", "read");
    let env = GitEnv::new(Some(&token));
    let (a1, a2, b1) = (
        random_bytes(1_500_000, 1),
        random_bytes(700_000, 2),
        random_bytes(900_000, 3),
    );
    let wa = repo_with(
        &env,
        &server,
        "org/a",
        &[("one.bin", &a1), ("two.bin", &a2)],
    );
    let head_a = env.git(&wa, &["rev-parse", "HEAD"]).trim().to_string();
    let wb = repo_with(&env, &server, "org/b", &[("b.bin", &b1)]);
    let head_b = env.git(&wb, &["rev-parse", "HEAD"]).trim().to_string();

    // Pushes to org/c run while the backup does; each records its commit once acknowledged.
    let wc = repo_with(
        &env,
        &server,
        "org/c",
        &[("c0.bin", &random_bytes(300_000, 100))],
    );
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (acked, stop) = (acked.clone(), stop.clone());
        let env = GitEnv::new(Some(&token));
        let work = env.home.path().join("c");
        env.git(
            env.home.path(),
            &[
                "clone",
                "-q",
                &remote(&server, "org/c"),
                work.to_str().unwrap(),
            ],
        );
        std::thread::spawn(move || {
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) && n < 200 {
                let data = random_bytes(400_000, 100 + n);
                let commit = push_file(&env, &work, &format!("c{n}.bin"), &data);
                acked.lock().unwrap().push(commit);
                n += 1;
            }
        })
    };
    while acked.lock().unwrap().len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before_backup = acked.lock().unwrap().last().cloned().unwrap();
    let pushed_before = acked.lock().unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    let dir_dest = dir.path().to_str().unwrap().to_string();
    let out = admin_ok(&server, &["backup", "--to", &dir_dest]);
    assert!(out.contains("copied"), "{out}");
    // The same deployment backed up to S3 (Garage), restored into PostgreSQL + Garage.
    let engines = postgres::database().zip(garage::shared());
    let s3_dest = engines.as_ref().map(|(_, g)| {
        let dest = format!("s3://{}/{}", g.bucket, garage::unique_prefix("backup"));
        let out = server
            .admin(&["backup", "--to", &dest])
            .envs(g.env())
            .output()
            .unwrap();
        assert!(out.status.success(), "backup to S3: {}", text(&out));
        dest
    });
    stop.store(true, Ordering::Relaxed);
    pusher.join().unwrap();
    eprintln!(
        "pushes acknowledged: {pushed_before} before the backup, {} by its end",
        acked.lock().unwrap().len()
    );
    drop(wc);
    verify_ok(&dir_dest, &["--read-data"]);

    let mut targets: Vec<(TestServer, String, Option<postgres::PgDatabase>)> =
        vec![(TestServer::start(), dir_dest.clone(), None)];
    match (engines, s3_dest) {
        (Some((db, g)), Some(dest)) => {
            let out = git_xet()
                .args(["server", "backup", "verify", "--from", &dest, "--read-data"])
                .envs(g.env())
                .output()
                .unwrap();
            assert!(out.status.success(), "verify on S3: {}", text(&out));
            let prefix = garage::unique_prefix("restore");
            let target = TestServer::start_on_garage(g, &prefix, &["--index", &db.url]);
            targets.push((target, dest, Some(db)));
        }
        _ => eprintln!("skipping the S3 backup and the PostgreSQL + Garage restore: not installed"),
    }
    for (n, (mut target, from, _db)) in targets.into_iter().enumerate() {
        let label = format!("target{n}");
        restore_into(&mut target, &from);
        // The tokens made before the backup work on the restored deployment.
        let env = GitEnv::new(Some(&token));
        assert_clone(
            &env,
            &target,
            "org/a",
            &head_a,
            &[("one.bin", &a1), ("two.bin", &a2)],
        );
        assert_clone(&env, &target, "org/b", &head_b, &[("b.bin", &b1)]);
        let read_env = GitEnv::new(Some(&reader));
        assert_clone(&read_env, &target, "org/a", &head_a, &[("one.bin", &a1)]);
        // org/c: whatever its refs were at the backup, every LFS object they reach is there,
        // and the push acknowledged before the backup began is in it.
        let clone = env.home.path().join(format!("c-{label}"));
        env.git(
            env.home.path(),
            &[
                "clone",
                "-q",
                &remote(&target, "org/c"),
                clone.to_str().unwrap(),
            ],
        );
        env.git(
            &clone,
            &["merge-base", "--is-ancestor", &before_backup, "HEAD"],
        );
        env.git(&clone, &["lfs", "fsck"]);
        // And the restored deployment takes new pushes.
        let work = env.home.path().join(format!("new-{label}"));
        env.git(
            env.home.path(),
            &[
                "clone",
                "-q",
                &remote(&target, "org/a"),
                work.to_str().unwrap(),
            ],
        );
        push_file(&env, &work, "three.bin", &random_bytes(200_000, 7));
        admin_ok(&target, &["check", "--read-data"]);
    }
}

fn snapshot_dirs(dest: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dest.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn copied(out: &str) -> u64 {
    let line = out.lines().find(|l| l.starts_with("copied ")).expect(out);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn objects_in(dest: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for kind in ["xorbs", "shards"] {
        for fan in std::fs::read_dir(dest.join("objects").join(kind)).unwrap() {
            for f in std::fs::read_dir(fan.unwrap().path()).unwrap() {
                out.push(f.unwrap().path());
            }
        }
    }
    out
}

#[test]
fn a_second_backup_copies_only_new_objects_and_verify_names_what_is_damaged() {
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/inc", "write")));
    let work = repo_with(
        &env,
        &server,
        "org/inc",
        &[("a.bin", &random_bytes(2_000_000, 11))],
    );
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().to_str().unwrap();
    let first = copied(&admin_ok(&server, &["backup", "--to", to]));
    let stored = server.stored_count("xorbs") + server.stored_count("shards");
    assert_eq!(first as usize, stored);

    push_file(&env, &work, "b.bin", &random_bytes(600_000, 12));
    let new = server.stored_count("xorbs") + server.stored_count("shards") - stored;
    assert!(new >= 2, "a new xorb and shard");
    std::thread::sleep(std::time::Duration::from_millis(1100)); // snapshot names are seconds
    let second = copied(&admin_ok(&server, &["backup", "--to", to]));
    assert_eq!(
        second as usize, new,
        "the second backup copies only the new objects"
    );
    assert_eq!(snapshot_dirs(dest.path()).len(), 2);
    assert_eq!(objects_in(dest.path()).len(), stored + new);
    verify_ok(to, &[]);

    // A deleted object is named.
    let victim = objects_in(dest.path())
        .into_iter()
        .find(|p| p.to_string_lossy().contains("/xorbs/"))
        .unwrap();
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let out = verify(to, &[]);
    assert!(!out.status.success());
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        text(&out).contains(&format!("missing: objects/xorbs/{}/{name}", &name[..2])),
        "{}",
        text(&out)
    );

    // A flipped byte: same size, so only --read-data finds it.
    let mut damaged = saved.clone();
    damaged[saved.len() / 2] ^= 1;
    std::fs::write(&victim, &damaged).unwrap();
    verify_ok(to, &[]);
    let out = verify(to, &["--read-data"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(&format!("damaged: objects/xorbs/{}/{name}", &name[..2])),
        "{}",
        text(&out)
    );
    std::fs::write(&victim, &saved).unwrap();

    // A damaged snapshot file (an index table) is named; an earlier snapshot still verifies.
    let snaps = snapshot_dirs(dest.path());
    let files = snaps[1].join("index/files.jsonl");
    let mut bytes = std::fs::read(&files).unwrap();
    bytes[5] = if bytes[5] == b'a' { b'b' } else { b'a' };
    std::fs::write(&files, &bytes).unwrap();
    let out = verify(to, &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("damaged: snapshots/") && text(&out).contains("/index/files.jsonl"),
        "{}",
        text(&out)
    );
    let first_name = snaps[0].file_name().unwrap().to_str().unwrap().to_string();
    verify_ok(to, &["--snapshot", &first_name]);
    // A restore of the damaged snapshot refuses before changing anything.
    let mut target = TestServer::start();
    target.stop();
    let out = admin(&target, &["restore", "--from", to]);
    assert!(!out.status.success());
    assert!(text(&out).contains("damaged"), "{}", text(&out));
    assert!(!target.data.join("repos/org").exists());
}

#[test]
fn restore_refuses_a_deployment_that_holds_anything_and_changes_nothing() {
    let mut server = TestServer::start();
    let env = GitEnv::new(Some(&server.token("org/full", "write")));
    repo_with(
        &env,
        &server,
        "org/full",
        &[("a.bin", &random_bytes(300_000, 21))],
    );
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().to_str().unwrap();
    admin_ok(&server, &["backup", "--to", to]);

    // Into itself: it has repositories, objects and index records.
    server.stop();
    let index = std::fs::read(server.data.join("index.sqlite")).unwrap();
    let out = admin(&server, &["restore", "--from", to]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not empty"), "{}", text(&out));
    assert_eq!(
        std::fs::read(server.data.join("index.sqlite")).unwrap(),
        index
    );

    // Into a deployment holding only a token record.
    let mut other = TestServer::start();
    other.token("org/x", "read");
    other.stop();
    let out = admin(&other, &["restore", "--from", to]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("its index has records"),
        "{}",
        text(&out)
    );
    assert!(!other.data.join("repos/org").exists());
    assert_eq!(other.stored_count("xorbs"), 0);
}

#[test]
fn a_backup_without_the_secret_says_so_and_restores_only_with_it() {
    let server = TestServer::start();
    let token = server.token("org/s", "write");
    let env = GitEnv::new(Some(&token));
    let data = random_bytes(300_000, 31);
    let work = repo_with(&env, &server, "org/s", &[("s.bin", &data)]);
    let head = env.git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().to_str().unwrap();
    let out = admin_ok(&server, &["backup", "--to", to, "--exclude-secret"]);
    assert!(out.contains("secret excluded"), "{out}");
    let snap = snapshot_dirs(dest.path()).pop().unwrap();
    assert!(!snap.join("secret").exists());
    let manifest = std::fs::read_to_string(snap.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"secret_included\": false"),
        "{manifest}"
    );

    let mut target = TestServer::start();
    target.stop();
    let out = admin(&target, &["restore", "--from", to]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--secret-file"), "{}", text(&out));
    let secret = server.data.join("keys/secret");
    let out = admin(
        &target,
        &[
            "restore",
            "--from",
            to,
            "--secret-file",
            secret.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    target.restart();
    assert_clone(&env, &target, "org/s", &head, &[("s.bin", &data)]);
}

#[test]
fn a_postgresql_deployment_restores_into_the_embedded_one() {
    let Some(db) = postgres::database() else {
        return;
    };
    let server = TestServer::start_with(&["--index", &db.url]);
    let token = server.token("org/pg", "write");
    let env = GitEnv::new(Some(&token));
    let data = random_bytes(800_000, 41);
    let work = repo_with(&env, &server, "org/pg", &[("p.bin", &data)]);
    let head = env.git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().to_str().unwrap();
    admin_ok(&server, &["backup", "--to", to]);
    let manifest = std::fs::read_to_string(
        snapshot_dirs(dest.path())
            .pop()
            .unwrap()
            .join("manifest.json"),
    )
    .unwrap();
    assert!(
        manifest.contains("\"index_engine\": \"postgres\""),
        "{manifest}"
    );

    let mut target = TestServer::start();
    restore_into(&mut target, to);
    assert_clone(&env, &target, "org/pg", &head, &[("p.bin", &data)]);
    admin_ok(&target, &["check", "--read-data"]);
}

fn git_config(dir: &Path, key: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(["config", "--get", key])
        .output()
        .expect("run git config");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A restored repository's visibility is recorded in its git config as the restored index
/// holds it (where `index rebuild` reads it back), so the restored deployment matches a
/// rebuild of itself and a private repository stays private.
#[test]
fn restored_repositories_keep_their_visibility_for_a_later_rebuild() {
    let server = TestServer::start();
    let writer = server.token("org/*", "write");
    let env = GitEnv::new(Some(&writer));
    let made = reqwest::blocking::Client::new()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(&writer)
        .json(&serde_json::json!({"name": "hidden", "organization": "org", "private": true}))
        .send()
        .unwrap();
    assert_eq!(made.status().as_u16(), 200, "{}", made.text().unwrap());
    let hidden = random_bytes(200_000, 41);
    let open = random_bytes(200_000, 42);
    // create_repo made a first commit: work on a clone of it.
    let work = env.home.path().join("hidden");
    env.git(
        env.home.path(),
        &[
            "clone",
            "-q",
            &remote(&server, "org/hidden"),
            work.to_str().unwrap(),
        ],
    );
    env.git(&work, &["lfs", "track", "*.bin"]);
    let hidden_head = push_file(&env, &work, "h.bin", &hidden);
    let work = repo_with(&env, &server, "org/open", &[("o.bin", &open)]);
    let open_head = env.git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().to_str().unwrap();
    admin_ok(&server, &["backup", "--to", to]);

    let mut target = TestServer::start();
    restore_into(&mut target, to);
    let repos = target.data.join("repos/org");
    assert_eq!(git_config(&repos.join("hidden.git"), "xet.private"), "true");
    assert_eq!(git_config(&repos.join("open.git"), "xet.private"), "false");
    let said = admin_ok(&target, &["index", "check"]);
    assert!(said.contains("the live index matches a rebuild"), "{said}");
    assert_clone(
        &env,
        &target,
        "org/hidden",
        &hidden_head,
        &[("h.bin", &hidden)],
    );
    assert_clone(&env, &target, "org/open", &open_head, &[("o.bin", &open)]);
}
