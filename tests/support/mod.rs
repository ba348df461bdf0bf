//! Shared integration-test support: run the real `git-xet` binary and a real `git xet server`
//! on loopback with a temporary data directory. Included by each test crate with
//! `mod support;`.
#![allow(dead_code)]

pub mod garage;
#[allow(unused_imports)]
pub use git_xet_testkit::ports;
#[allow(unused_imports)]
pub use git_xet_testkit::postgres;
#[path = "../../crates/core/tests/support/random.rs"]
mod random;
#[path = "../../crates/core/tests/support/xorbs.rs"]
pub mod xorbs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The git-xet binary under test.
pub fn git_xet_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_git-xet"))
}

/// The git-xet-server binary under test (what `git xet server|shell|pre-receive` exec).
pub fn git_xet_server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_git-xet-server"))
}

/// A command running the git-xet binary.
pub fn git_xet() -> Command {
    Command::new(git_xet_bin())
}

/// A `git xet server` on 127.0.0.1 with its own data directory, killed on drop.
pub struct TestServer {
    pub url: String,
    pub data: PathBuf,
    _data_dir: Option<tempfile::TempDir>,
    extra_args: Vec<String>,
    /// `s3://BUCKET/PREFIX` on the shared Garage under `GIT_XET_TEST_OBJECT_STORE=garage`.
    object_store: Option<String>,
    /// The `AWS_*` settings of that store.
    store_env: Vec<(&'static str, String)>,
    child: Option<Child>,
    log: PathBuf,
    /// The seconds the server adds to its clock (`start_with_clock`).
    clock: Option<tempfile::NamedTempFile>,
}

impl TestServer {
    /// Starts a server with a fresh data directory.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra command-line arguments. It listens on a port it chooses:
    /// `url` (the public URL when given) and [`TestServer::listen_addr`] say where.
    pub fn start_with(args: &[&str]) -> Self {
        let mut server = Self::start_deferred(args);
        if let Some(garage) = test_object_store(args) {
            server.use_garage(garage);
        }
        server.spawn(None);
        server
    }

    /// Starts a server whose object store is `s3://BUCKET/PREFIX` on `garage`, with a fresh
    /// data directory (staging files, the SQLite index, the secret).
    pub fn start_on_garage(garage: &garage::Garage, prefix: &str, args: &[&str]) -> Self {
        let mut args: Vec<&str> = args.to_vec();
        // Keeps test_object_store from choosing another store.
        let url = format!("s3://{}/{prefix}", garage.bucket);
        args.extend(["--object-store", &url]);
        let mut server = Self::start_deferred(&args);
        server.store_env = garage.env();
        server.spawn(None);
        server
    }

    /// A server with extra arguments and environment variables (test hooks), on `garage`
    /// under `prefix` when given; they stay set across restarts.
    pub fn start_with_env(
        garage: Option<(&garage::Garage, &str)>,
        args: &[&str],
        env: &[(&'static str, String)],
    ) -> Self {
        let url = garage.map(|(g, prefix)| format!("s3://{}/{prefix}", g.bucket));
        let mut args: Vec<&str> = args.to_vec();
        if let Some(url) = &url {
            args.extend(["--object-store", url]);
        }
        let mut server = Self::start_deferred(&args);
        if let Some((g, _)) = garage {
            server.store_env = g.env();
        } else if let Some(g) = test_object_store(&args) {
            server.use_garage(g);
        }
        server.store_env.extend(env.iter().cloned());
        server.spawn(None);
        server
    }

    /// A server with extra arguments whose clock [`TestServer::advance_clock`] moves (a test
    /// hook of builds with the `test-hooks` feature: `GIT_XET_TEST_CLOCK_FILE`).
    pub fn start_with_clock(args: &[&str]) -> Self {
        let clock = tempfile::NamedTempFile::new().expect("clock file");
        std::fs::write(clock.path(), "0").unwrap();
        let path = clock.path().display().to_string();
        let mut server = Self::start_with_env(None, args, &[("GIT_XET_TEST_CLOCK_FILE", path)]);
        server.clock = Some(clock);
        server
    }

    /// Moves the server's clock `secs` seconds forward (see [`TestServer::start_with_clock`]):
    /// what expires by then has expired for the server at its next request.
    pub fn advance_clock(&self, secs: u64) {
        let clock = self.clock.as_ref().expect("started with start_with_clock");
        let now: u64 = std::fs::read_to_string(clock.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::write(clock.path(), (now + secs).to_string()).unwrap();
    }

    /// `git xet server ARGS --data DATA`, with this server's object store, index and their
    /// settings: an upkeep command (check, gc, token) beside the running server.
    pub fn admin(&self, args: &[&str]) -> Command {
        let mut cmd = git_xet();
        cmd.arg("server").args(args).arg("--data").arg(&self.data);
        if let Some((bucket, prefix)) = self.s3_location() {
            cmd.args(["--object-store", &format!("s3://{bucket}/{prefix}")]);
        }
        if let Some(at) = self.extra_args.iter().position(|a| a == "--index") {
            cmd.args(&self.extra_args[at..(at + 2).min(self.extra_args.len())]);
        }
        cmd.envs(self.store_env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// A server set up but not started (`spawn` starts it).
    fn start_deferred(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        TestServer {
            url: String::new(),
            data,
            _data_dir: Some(dir),
            extra_args: args.iter().map(|s| s.to_string()).collect(),
            object_store: None,
            store_env: Vec::new(),
            child: None,
            log,
            clock: None,
        }
    }

    fn use_garage(&mut self, garage: &garage::Garage) {
        self.object_store = Some(format!(
            "s3://{}/{}",
            garage.bucket,
            garage::unique_prefix("server")
        ));
        self.store_env = garage.env();
    }

    /// The stored objects of `kind` (`"xorbs"` or `"shards"`), as (name, bytes): files under
    /// the data directory, or the keys under the server's S3 prefix when it stores there.
    pub fn stored_objects(&self, kind: &str) -> Vec<(String, Vec<u8>)> {
        match self.s3_location() {
            Some((bucket, prefix)) => {
                garage::objects_under(&self.store_env, &bucket, &format!("{prefix}/{kind}"))
            }
            None => files_under(&self.data.join(kind)),
        }
    }

    /// How many objects of `kind` are stored (see [`TestServer::stored_objects`]).
    pub fn stored_count(&self, kind: &str) -> usize {
        self.stored_objects(kind).len()
    }

    pub fn stores_on_s3(&self) -> bool {
        self.s3_location().is_some()
    }

    /// `s3://BUCKET/PREFIX` when this server stores on S3, for an admin command that must
    /// act on the same deployment.
    pub fn s3_store_url(&self) -> Option<String> {
        let (bucket, prefix) = self.s3_location()?;
        Some(format!("s3://{bucket}/{prefix}"))
    }

    /// Bucket and prefix of an `s3://` object store given to this server.
    fn s3_location(&self) -> Option<(String, String)> {
        let url = self.object_store.clone().or_else(|| {
            let at = self.extra_args.iter().position(|a| a == "--object-store")?;
            self.extra_args.get(at + 1).cloned()
        })?;
        let rest = url.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        Some((bucket.to_string(), prefix.trim_matches('/').to_string()))
    }

    /// Starts (or restarts) the process. With `listen`, binds that address (to keep the URL
    /// across a restart); otherwise an ephemeral port the server chooses and reports.
    fn spawn(&mut self, listen: Option<&str>) {
        // The address this server held until it stopped is free, but another process may bind
        // it (or connect from it) in the meantime: wait for it a little, then give up.
        for _ in 0..50 {
            match self.try_spawn(listen) {
                Ok(()) => return,
                Err(log) if listen.is_some() && log.contains("Address already in use") => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(log) => panic!("server exited before becoming ready; log:\n{log}"),
            }
        }
        panic!(
            "{} stayed in use by another process; log:\n{}",
            listen.unwrap_or_default(),
            self.log_text()
        );
    }

    /// One start; `Err` with the log when the server exited before it was ready.
    fn try_spawn(&mut self, listen: Option<&str>) -> Result<(), String> {
        let ready = self
            .data
            .with_extension(format!("ready-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let logged_before = std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        // The data directory is given relative to the server's working directory, as users
        // often do: the server must not depend on where its git commands run.
        let parent = self.data.parent().expect("data has a parent");
        let child = git_xet()
            .current_dir(parent)
            .arg("server")
            .args(["--listen", listen.unwrap_or("127.0.0.1:0")])
            .arg("--data")
            .arg(self.data.file_name().expect("data has a name"))
            .arg("--ready-file")
            .arg(&ready)
            .args(&self.extra_args)
            .args(
                self.object_store
                    .iter()
                    .flat_map(|url| ["--object-store", url.as_str()]),
            )
            .envs(self.store_env.iter().map(|(k, v)| (k, v)))
            .env("GIT_XET_LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn git xet server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(url) = std::fs::read_to_string(&ready) {
                if !url.trim().is_empty() {
                    self.url = url.trim().to_string();
                    return Ok(());
                }
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                let log = std::fs::read(&self.log).unwrap_or_default();
                let this_start = String::from_utf8_lossy(&log[logged_before.min(log.len())..]);
                return Err(format!("(exit {status})\n{this_start}"));
            }
            assert!(
                Instant::now() < deadline,
                "server not ready after 30s; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log so far (stderr).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Host and port, e.g. `127.0.0.1:43817`.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string()
    }

    /// Host and port of the listener (the server reports it in `DATA/server.json`), even
    /// when `url` is a `--public-url`. Plain-HTTP servers only (with TLS that file names a
    /// loopback listener of its own).
    pub fn listen_addr(&self) -> String {
        let text = std::fs::read_to_string(self.data.join("server.json")).expect("server.json");
        let urls: serde_json::Value = serde_json::from_str(&text).expect("server.json is JSON");
        let url = urls["internal_url"].as_str().expect("internal_url");
        url.trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string()
    }

    /// Waits until the server's log contains `text` (at most 20 s).
    pub fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.log_text().contains(text) {
            assert!(
                Instant::now() < deadline,
                "the server did not log {text:?} in 20 s; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Creates a token with `git xet server token create`.
    pub fn token(&self, repo: &str, scope: &str) -> String {
        self.token_with_ttl(repo, scope, None)
    }

    /// Through [`TestServer::admin`], so that it works on any deployment (PostgreSQL, S3).
    pub fn token_with_ttl(&self, repo: &str, scope: &str, ttl_secs: Option<u64>) -> String {
        let mut cmd = self.admin(&["token", "create", "--repo", repo, "--scope", scope]);
        if let Some(ttl) = ttl_secs {
            cmd.args(["--ttl", &ttl.to_string()]);
        }
        let out = cmd.output().expect("run token create");
        assert!(
            out.status.success(),
            "token create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A token signed with the server's secret that expired the second it was made.
    pub fn expired_token(&self, repo: &str, scope: &str) -> String {
        let keys = git_xet_identity::keys::Keys::load(&self.data).expect("server secret");
        let repo = git_xet_index::RepoName::parse(repo).unwrap();
        let scope = git_xet_identity::auth::Scope::parse(scope).unwrap();
        git_xet_identity::auth::issue(&keys, &repo, scope, 0).0
    }

    /// Sends SIGTERM and waits for a graceful exit.
    pub fn stop(&mut self) {
        self.terminate();
        self.wait_stopped();
    }

    /// Sends SIGTERM and returns at once ([`TestServer::wait_stopped`] waits for the exit).
    pub fn terminate(&self) {
        if let Some(child) = &self.child {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
        }
    }

    /// Waits up to 20 s for the process to exit, then kills it.
    pub fn wait_stopped(&mut self) {
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(20);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.wait();
        }
    }

    /// Kills the process at once (SIGKILL), like a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same address and data directory.
    pub fn restart(&mut self) {
        self.stop();
        let addr = self.addr();
        self.spawn(Some(&addr));
    }

    /// Starts the server again on the same address and data directory with other extra
    /// arguments and store settings (an operator changing its configuration).
    pub fn restart_with(&mut self, args: &[&str], store_env: Vec<(&'static str, String)>) {
        self.stop();
        self.extra_args = args.iter().map(|s| s.to_string()).collect();
        self.object_store = None;
        self.store_env = store_env;
        let addr = self.addr();
        self.spawn(Some(&addr));
    }

    /// Starts the server again on the same address with an empty data directory, as a
    /// server reset or restored from an old backup: everything it held is gone.
    pub fn reset(&mut self) {
        self.stop();
        let addr = self.addr();
        std::fs::remove_dir_all(&self.data).expect("remove the data directory");
        if let Some(garage) = self.object_store.as_ref().and(test_object_store(&[])) {
            self.use_garage(garage);
        }
        self.spawn(Some(&addr));
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// The Prometheus text from `GET /metrics`.
    pub fn metrics(&self) -> String {
        http_get(&format!("{}/metrics", self.url))
    }

    /// Requests the server has answered on `route` (a `git_xet_http_requests_total` label),
    /// any status. The server counts a request once its handler is done with it.
    pub fn requests(&self, route: &str) -> u64 {
        let label = format!("git_xet_http_requests_total{{route=\"{route}\",");
        self.metrics()
            .lines()
            .filter(|l| l.starts_with(&label))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    }

    /// Waits until [`TestServer::requests`] on `route` reaches `n` (at most 20 s).
    pub fn wait_for_requests(&self, route: &str, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.requests(route) < n {
            assert!(
                Instant::now() < deadline,
                "the server did not answer {n} {route} requests in 20 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The value of a metric (summed over all label sets), 0 when absent.
    pub fn metric(&self, name: &str) -> f64 {
        parse_metric(&self.metrics(), name)
    }
}

/// `GIT_XET_TEST_OBJECT_STORE=garage` runs every test server on the test binary's shared
/// Garage cluster, each under its own prefix (unless the test chose its own store).
fn test_object_store(args: &[&str]) -> Option<&'static garage::Garage> {
    if std::env::var("GIT_XET_TEST_OBJECT_STORE").ok()?.as_str() != "garage"
        || args.contains(&"--object-store")
    {
        return None;
    }
    Some(garage::shared().expect("GIT_XET_TEST_OBJECT_STORE=garage needs garage"))
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every file under `dir` (recursively) as (path, bytes); none when `dir` is absent.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
    out
}

/// Sum of a metric's samples in Prometheus text format.
pub fn parse_metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let metric = key.split('{').next()?;
            (metric == name)
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Minimal blocking HTTP GET over a fresh TCP connection (no client library needed).
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut stream = std::net::TcpStream::connect(host).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {url}: {head}");
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    out
}

pub use random::random_bytes;

/// The sum of `per_file` over the files under `dir`, recursively (0 when it does not exist).
pub fn sum_over_files(dir: &Path, per_file: &dyn Fn(&std::fs::DirEntry) -> u64) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                sum_over_files(&path, per_file)
            } else {
                per_file(&e)
            }
        })
        .sum()
}

/// Files under `dir`, recursively (0 when it does not exist).
pub fn count_files(dir: &Path) -> usize {
    sum_over_files(dir, &|_| 1) as usize
}

/// Whole objects in a clone's `.git/lfs/objects`.
pub fn lfs_objects(repo: &Path) -> usize {
    count_files(&repo.join(".git/lfs/objects"))
}

/// Where a clone keeps the whole object `oid` (`.git/lfs/objects/ab/cd/abcd...`).
pub fn lfs_object_path(repo: &Path, oid: &str) -> PathBuf {
    repo.join(".git/lfs/objects")
        .join(&oid[..2])
        .join(&oid[2..4])
        .join(oid)
}

/// Writes a file, creating parent directories.
pub fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}
