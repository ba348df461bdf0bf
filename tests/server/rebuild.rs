//! Disaster recovery and storage moves with real parts (our server, git, git-lfs, PostgreSQL,
//! Garage): `git xet server index rebuild` after the index is lost (the embedded SQLite file
//! deleted; the PostgreSQL database dropped), `index check` against a live index, and
//! `storage migrate` from the data directory to Garage and back while pushes run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::{garage, git_xet, postgres, random_bytes, write_file, TestServer};

/// Runs a command; (success, stdout, stderr).
fn run(cmd: &mut Command) -> (bool, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run git xet");
    (
        status.success(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

fn ok(cmd: &mut Command) -> String {
    let (ok, out, err) = run(cmd);
    assert!(ok, "{cmd:?} failed:\n{out}\n{err}");
    eprintln!("{out}{err}");
    out
}

/// A working copy of `repo` on `server`: cloned when it exists (a Hub-created repository
/// holds a first commit), else new.
fn work_copy(env: &GitEnv, server: &TestServer, repo: &str, name: &str) -> PathBuf {
    let work = env.home.path().join(name);
    let url = format!("{}/{repo}.git", server.url);
    let cloned = env.git_output(env.home.path(), &["clone", "-q", &url, name]);
    if cloned.status.success() {
        env.git(&work, &["lfs", "track", "*.bin"]);
    } else {
        let _ = std::fs::remove_dir_all(&work);
        env.new_repo(&work);
        env.git(&work, &["remote", "add", "origin", &url]);
    }
    work
}

/// Commits `files` in `work` and pushes them.
fn push(env: &GitEnv, work: &Path, files: &[(String, Vec<u8>)]) {
    for (name, data) in files {
        write_file(&work.join(name), data);
    }
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", "files"]);
    env.git(work, &["push", "-q", "origin", "HEAD:main"]);
}

/// Clones `repo` and asserts every file is bit-exact.
fn clones_bit_exact(env: &GitEnv, server: &TestServer, repo: &str, files: &[(String, Vec<u8>)]) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}/{repo}.git", server.url);
    env.git(dir.path(), &["clone", "-q", &url, "c"]);
    for (name, data) in files {
        let got = std::fs::read(dir.path().join("c").join(name)).unwrap();
        assert!(&got == data, "{repo}: {name} differs after the clone");
    }
    env.git(&dir.path().join("c"), &["lfs", "fsck"]);
}

/// Whether an anonymous clone of `repo` (LFS objects included) succeeds.
fn anonymous_clone_works(server: &TestServer, repo: &str) -> bool {
    let env = GitEnv::new(None);
    let url = format!("{}/{repo}.git", server.url);
    env.git_output(env.home.path(), &["clone", "-q", &url, "c"])
        .status
        .success()
}

/// The status of a git discovery request on `repo` with `token` as the Basic password.
fn discovery_status(server: &TestServer, repo: &str, token: &str) -> u16 {
    client()
        .get(format!(
            "{}/{repo}.git/info/refs?service=git-upload-pack",
            server.url
        ))
        .basic_auth("tester", Some(token))
        .send()
        .unwrap()
        .status()
        .as_u16()
}

fn create_private(server: &TestServer, token: &str, org: &str, name: &str) {
    let made = client()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(token)
        .json(&serde_json::json!({"name": name, "organization": org, "private": true}))
        .send()
        .unwrap();
    assert_eq!(made.status().as_u16(), 200, "{}", made.text().unwrap());
}

fn files(prefix: &str, seed: u64, sizes: &[usize]) -> Vec<(String, Vec<u8>)> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (format!("{prefix}{i}.bin"), random_bytes(n, seed + i as u64)))
        .collect()
}

/// The id of the token `token create` just made (the one `token list` did not show before).
fn new_token_id(server: &TestServer, before: &str) -> String {
    let after = ok(&mut server.admin(&["token", "list"]));
    after
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|id| *id != "ID" && !before.contains(id))
        .expect("a new token id")
        .to_string()
}

#[test]
fn a_deleted_embedded_index_is_rebuilt_and_private_repositories_stay_private() {
    let mut server = TestServer::start_with(&["--anonymous-read"]);
    let writer = server.token("org/*", "write");
    let env = GitEnv::new(Some(&writer));
    let shared = random_bytes(700_000, 9);
    let mut public = files("p", 10, &[1_500_000, 300_000]);
    public.push(("shared.bin".into(), shared.clone()));
    let mut legacy = files("l", 20, &[400_000]);
    legacy.push(("shared.bin".into(), shared));
    let private = files("s", 30, &[900_000, 200_000]);
    let work = work_copy(&env, &server, "org/public", "public");
    push(&env, &work, &public);
    let work = work_copy(&env, &server, "org/legacy", "legacy");
    push(&env, &work, &legacy);
    create_private(&server, &writer, "org", "secret");
    let work = work_copy(&env, &server, "org/secret", "secret");
    push(&env, &work, &private);
    assert!(anonymous_clone_works(&server, "org/public"));
    assert!(!anonymous_clone_works(&server, "org/secret"));

    // A live index that nothing happened to matches a rebuild.
    let said = ok(&mut server.admin(&["index", "check"]));
    assert!(said.contains("the live index matches a rebuild"), "{said}");

    // A reader of the private repository whose token is revoked; the operator keeps the list.
    let before = ok(&mut server.admin(&["token", "list"]));
    let revoked = server.token("org/secret", "read");
    let revoked_id = new_token_id(&server, &before);
    assert_eq!(discovery_status(&server, "org/secret", &revoked), 200);
    ok(&mut server.admin(&["token", "revoke", &revoked_id]));
    let saved = server.data.parent().unwrap().join("tokens.txt");
    std::fs::write(&saved, ok(&mut server.admin(&["token", "list"]))).unwrap();
    // A repository made before repositories recorded their visibility: unknown.
    let legacy_dir = server.data.join("repos/org/legacy.git");
    ok(Command::new("git").arg("--git-dir").arg(&legacy_dir).args([
        "config",
        "--unset",
        "xet.private",
    ]));

    // Not while a server runs on the data directory.
    let (done, _, err) = run(&mut server.admin(&["index", "rebuild", "--forget-revocations"]));
    assert!(!done);
    assert!(err.contains("stop it before rebuilding its index"), "{err}");
    server.stop();
    for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        let _ = std::fs::remove_file(server.data.join(name));
    }
    // The secret survived in DATA/keys: old tokens stay valid, so the revocations must come
    // from somewhere, or be given up knowingly. Nothing is written before that is settled.
    let (done, _, err) = run(&mut server.admin(&["index", "rebuild"]));
    assert!(!done);
    assert!(err.contains("--revoked-tokens FILE"), "{err}");
    assert!(!server.data.join("index.sqlite").exists());
    let started = Instant::now();
    let revoked_list = format!("--revoked-tokens={}", saved.display());
    let said = ok(&mut server.admin(&["index", "rebuild", &revoked_list]));
    eprintln!("rebuild took {:?}", started.elapsed());
    assert!(said.contains("repositories: 3"), "{said}");
    assert!(
        said.contains("private repositories: 2 (1 without a record)"),
        "{said}"
    );
    server.restart();

    clones_bit_exact(&env, &server, "org/public", &public);
    clones_bit_exact(&env, &server, "org/legacy", &legacy);
    clones_bit_exact(&env, &server, "org/secret", &private);
    assert!(anonymous_clone_works(&server, "org/public"));
    assert!(!anonymous_clone_works(&server, "org/secret"));
    assert!(!anonymous_clone_works(&server, "org/legacy"));
    assert_eq!(discovery_status(&server, "org/secret", &writer), 200);
    assert_eq!(discovery_status(&server, "org/secret", &revoked), 403);

    let said = ok(&mut server.admin(&["index", "check"]));
    assert!(said.contains("the live index matches a rebuild"), "{said}");
    // A planted difference: the repository's own record now says private.
    ok(Command::new("git")
        .arg("--git-dir")
        .arg(server.data.join("repos/org/public.git"))
        .args(["config", "xet.private", "true"]));
    let (clean, out, _) = run(&mut server.admin(&["index", "check"]));
    assert!(!clean);
    assert!(
        out.contains("difference: org/public: public in the live index, private in a rebuild"),
        "{out}"
    );
    // And one in the data: a stored xorb lost.
    ok(Command::new("git")
        .arg("--git-dir")
        .arg(server.data.join("repos/org/public.git"))
        .args(["config", "xet.private", "false"]));
    let xorbs = server.data.join("xorbs");
    let lost = std::fs::read_dir(&xorbs)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&lost).unwrap();
    let (clean, out, _) = run(&mut server.admin(&["index", "check"]));
    assert!(!clean);
    let stem = lost.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(
        out.contains(&format!("difference: xorb {stem}: in only the live index")),
        "{out}"
    );
}

#[test]
fn a_dropped_postgresql_index_is_rebuilt_with_the_old_secret_or_a_new_one() {
    let Some(db) = postgres::database() else {
        return;
    };
    let args = ["--anonymous-read", "--index", &db.url];
    let mut server = match garage::shared() {
        Some(g) => TestServer::start_on_garage(g, &garage::unique_prefix("rebuild"), &args),
        None => TestServer::start_with(&args),
    };
    let writer = server.token("org/*", "write");
    let env = GitEnv::new(Some(&writer));
    let public = files("p", 40, &[1_200_000, 250_000]);
    let private = files("s", 50, &[800_000]);
    let work = work_copy(&env, &server, "org/public", "public");
    push(&env, &work, &public);
    create_private(&server, &writer, "org", "secret");
    let work = work_copy(&env, &server, "org/secret", "secret");
    push(&env, &work, &private);
    // The operator's copy of the secret (e.g. from a backup).
    let hex = db.sql("SELECT encode(secret, 'hex') FROM server_secret");
    let secret: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex.trim()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let secret_file = server.data.parent().unwrap().join("secret");
    std::fs::write(&secret_file, secret).unwrap();

    let drop_database = |server: &mut TestServer| {
        server.stop();
        db.cluster.run_client("dropdb", &[&db.name]);
        db.cluster.run_client("createdb", &[&db.name]);
    };
    drop_database(&mut server);
    let secret_arg = format!("--secret-file={}", secret_file.display());
    let said = ok(&mut server.admin(&["index", "rebuild", "--forget-revocations", &secret_arg]));
    assert!(said.contains("repositories: 2"), "{said}");
    server.restart();
    clones_bit_exact(&env, &server, "org/public", &public);
    clones_bit_exact(&env, &server, "org/secret", &private);
    assert!(!anonymous_clone_works(&server, "org/secret"));
    assert!(anonymous_clone_works(&server, "org/public"));
    let said = ok(&mut server.admin(&["index", "check"]));
    assert!(said.contains("the live index matches a rebuild"), "{said}");

    // Without the secret: a new one, said loudly; every old token is refused.
    drop_database(&mut server);
    let (done, _, err) = run(&mut server.admin(&["index", "rebuild"]));
    assert!(done, "{err}");
    assert!(err.contains("NEW signing secret"), "{err}");
    server.restart();
    assert_eq!(discovery_status(&server, "org/secret", &writer), 401);
    let env = GitEnv::new(Some(&server.token("org/*", "read")));
    clones_bit_exact(&env, &server, "org/public", &public);
    clones_bit_exact(&env, &server, "org/secret", &private);
    assert!(!anonymous_clone_works(&server, "org/secret"));
}

/// Files by name, as pushed.
type Files = Vec<(String, Vec<u8>)>;

/// Pushes a new file to a repository in a loop (pausable), recording every failure.
struct Pusher {
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    idle: Arc<AtomicBool>,
    pushed: Arc<AtomicUsize>,
    files: Arc<Mutex<Files>>,
    failures: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pusher {
    fn start(env: GitEnv, work: PathBuf) -> Pusher {
        let p = Pusher {
            stop: Arc::default(),
            pause: Arc::default(),
            idle: Arc::default(),
            pushed: Arc::default(),
            files: Arc::default(),
            failures: Arc::default(),
            thread: None,
        };
        let (stop, pause, idle, pushed, files, failures) = (
            p.stop.clone(),
            p.pause.clone(),
            p.idle.clone(),
            p.pushed.clone(),
            p.files.clone(),
            p.failures.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                if pause.load(Ordering::SeqCst) {
                    idle.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                idle.store(false, Ordering::SeqCst);
                i += 1;
                let name = format!("during{i}.bin");
                let data = random_bytes(150_000 + (i as usize % 7) * 20_000, 1000 + i);
                write_file(&work.join(&name), &data);
                env.git(&work, &["add", "."]);
                env.git(&work, &["commit", "-q", "-m", &name]);
                let out = env.git_output(&work, &["push", "-q", "origin", "HEAD:main"]);
                if out.status.success() {
                    files.lock().unwrap().push((name, data));
                    pushed.fetch_add(1, Ordering::SeqCst);
                } else {
                    failures
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&out.stderr).into_owned());
                }
            }
        });
        Pusher {
            thread: Some(thread),
            ..p
        }
    }

    /// Waits until the pusher has pushed `n` more times.
    fn wait_pushes(&self, n: usize) {
        let target = self.pushed.load(Ordering::SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.pushed.load(Ordering::SeqCst) < target {
            assert!(Instant::now() < deadline, "{:?}", self.failures.lock());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Holds the pusher between pushes (a restart of the only server is an outage).
    fn hold(&self) {
        self.pause.store(true, Ordering::SeqCst);
        while !self.idle.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn resume(&self) {
        self.idle.store(false, Ordering::SeqCst);
        self.pause.store(false, Ordering::SeqCst);
    }

    fn finish(mut self) -> Files {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        let failures = self.failures.lock().unwrap();
        assert!(failures.is_empty(), "pushes failed: {failures:?}");
        self.files.lock().unwrap().clone()
    }
}

fn migrate(data: &Path, from: Option<&str>, to: &str, env: &[(&'static str, String)]) -> String {
    let mut cmd = git_xet();
    cmd.args(["server", "storage", "migrate", "--to", to])
        .arg("--data")
        .arg(data)
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(from) = from {
        cmd.args(["--object-store", from]);
    }
    ok(&mut cmd)
}

#[test]
fn the_object_store_moves_to_garage_and_back_while_pushes_run() {
    let Some(garage) = garage::shared() else {
        return;
    };
    let mut server = TestServer::start_with(&[]);
    assert!(!server.stores_on_s3());
    let writer = server.token("org/*", "write");
    let env = GitEnv::new(Some(&writer));
    let first = files("a", 60, &[2_000_000, 500_000, 120_000]);
    let work = work_copy(&env, &server, "org/first", "first");
    push(&env, &work, &first);
    let busy = work_copy(&env, &server, "org/busy", "busy");
    let pusher = Pusher::start(GitEnv::new(Some(&writer)), busy);
    pusher.wait_pushes(1);

    let s3 = format!("s3://{}/{}", garage.bucket, garage::unique_prefix("moved"));
    let data = server.data.clone();
    let data_url = data.display().to_string();
    // (1) The bulk copy, pushes running.
    let said = migrate(&data, None, &s3, &garage.env());
    assert!(said.contains("copied: "), "{said}");
    // Pushes that land in the old store only.
    pusher.wait_pushes(2);
    // (2) The servers write to the new store and read what it lacks from the old one.
    pusher.hold();
    server.restart_with(
        &["--object-store", &s3, "--object-store-fallback", &data_url],
        garage.env(),
    );
    pusher.resume();
    let so_far = pusher.files.lock().unwrap().clone();
    clones_bit_exact(&env, &server, "org/busy", &so_far);
    clones_bit_exact(&env, &server, "org/first", &first);
    pusher.wait_pushes(2);
    // (3) What the old store received in between is copied; the rest is there already.
    let said = migrate(&data, None, &s3, &garage.env());
    assert!(!said.contains("already there: 0\n"), "{said}");
    // Objects the clones above could read only through the fallback.
    assert!(!said.contains("copied: 0 "), "{said}");
    // (4) The fallback goes.
    pusher.hold();
    server.restart_with(&["--object-store", &s3], garage.env());
    pusher.resume();
    pusher.wait_pushes(2);
    let busy_files = pusher.finish();
    clones_bit_exact(&env, &server, "org/busy", &busy_files);
    clones_bit_exact(&env, &server, "org/first", &first);
    assert!(server.stores_on_s3());

    // And back to a directory.
    let back = data.parent().unwrap().join("objects-back");
    let said = migrate(&data, Some(&s3), &back.display().to_string(), &garage.env());
    assert!(said.contains("copied: "), "{said}");
    server.restart_with(&["--object-store", &back.display().to_string()], Vec::new());
    clones_bit_exact(&env, &server, "org/busy", &busy_files);
    clones_bit_exact(&env, &server, "org/first", &first);
    // Re-running copies nothing.
    let said = migrate(&data, Some(&s3), &back.display().to_string(), &garage.env());
    assert!(said.contains("copied: 0 "), "{said}");
}
