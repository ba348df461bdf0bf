//! A real Garage cluster (an S3-compatible distributed object store) for the tests: three
//! nodes on loopback with replication factor 3, the sqlite metadata engine and temporary
//! directories, a bucket and a key made by `garage` itself. Every node is stopped on drop,
//! and killed by the kernel if the test process dies first (PR_SET_PDEATHSIG).
//!
//! The binary: `GIT_XET_GARAGE`, else `$HOME/.cache/git-xet/garage/bin/garage` (where
//! `.ci/deps/20-garage.sh` installs it), else `garage` on PATH. Missing, [`Garage::start`]
//! returns `None` with a printed reason, and panics under `CI=true`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The S3 region the cluster answers to (clients must sign for it).
pub const REGION: &str = "garage";

/// The `garage` binary, if one runs.
pub fn garage_bin() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("GIT_XET_GARAGE") {
        candidates.push(PathBuf::from(path));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cache/git-xet/garage/bin/garage"));
    }
    candidates.push(PathBuf::from("garage"));
    candidates.into_iter().find(|bin| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The `garage` binary; `None` with a printed reason when it is missing and `CI` is unset,
/// a panic when it is missing under `CI=true`.
pub fn required_bin() -> Option<PathBuf> {
    let bin = garage_bin();
    if bin.is_none() {
        let why = "garage is not installed (run .ci/deps/20-garage.sh, or set GIT_XET_GARAGE)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
    }
    bin
}

/// One Garage node: its config, ports and (while it runs) its process.
struct Node {
    dir: PathBuf,
    rpc_port: u16,
    s3_port: u16,
    child: Option<Child>,
    /// `<id>@127.0.0.1:<rpc port>`, known once it first started.
    id: String,
}

impl Node {
    fn config(&self) -> PathBuf {
        self.dir.join("garage.toml")
    }

    fn rpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.rpc_port)
    }
}

/// A running three-node cluster with one bucket and a key allowed on it.
pub struct Garage {
    /// S3 endpoint of the first node, e.g. `http://127.0.0.1:40123`.
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    bin: PathBuf,
    nodes: Vec<Node>,
    dir: Option<tempfile::TempDir>,
}

/// Random lowercase hex of `bytes` bytes.
fn hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// Spawns `cmd` from one thread that lives as long as the process, so that the child's
/// PR_SET_PDEATHSIG (sent when the spawning thread ends) fires only when the test process
/// itself ends, however it ends.
fn spawn_tied_to_process(cmd: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("garage-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The senders live in a static: never reached, the thread stays.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawner thread");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    let mut cmd = cmd;
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    spawner
        .lock()
        .unwrap()
        .send((cmd, tx))
        .expect("spawner thread runs");
    rx.recv().expect("spawner replies")
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "garage: {what} after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Garage {
    /// Starts a fresh cluster, or returns `None` (printing why) when no `garage` binary is
    /// installed and `CI` is unset. Under `CI=true` a missing binary fails the test.
    pub fn start() -> Option<Garage> {
        let bin = required_bin()?;
        // A port seen free may be taken by another test before garage binds it (the node then
        // exits at start): a new cluster on new ports, twice at most.
        for _ in 0..2 {
            let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Garage::start_with(bin.clone())
            }));
            if let Ok(garage) = attempt {
                return Some(garage);
            }
        }
        Some(Garage::start_with(bin))
    }

    fn start_with(bin: PathBuf) -> Garage {
        let dir = tempfile::tempdir().expect("temp dir");
        let rpc_secret = hex(32);
        let ports = super::ports::candidates(9);
        let mut nodes = Vec::new();
        for i in 0..3 {
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let (rpc_port, s3_port, admin_port) =
                (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]);
            let config = format!(
                r#"metadata_dir = "{dir}/meta"
data_dir = "{dir}/data"
db_engine = "sqlite"
metadata_fsync = false
data_fsync = false
replication_factor = 3
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{rpc_secret}"

[s3_api]
s3_region = "{REGION}"
api_bind_addr = "127.0.0.1:{s3_port}"

[admin]
api_bind_addr = "127.0.0.1:{admin_port}"
"#,
                dir = node_dir.display(),
            );
            std::fs::write(node_dir.join("garage.toml"), config).unwrap();
            nodes.push(Node {
                dir: node_dir,
                rpc_port,
                s3_port,
                child: None,
                id: String::new(),
            });
        }
        let mut garage = Garage {
            endpoint: format!("http://127.0.0.1:{}", nodes[0].s3_port),
            bucket: "xet".into(),
            // Garage's key format: GK + 24 hex digits, and a 64-digit secret.
            access_key: format!("GK{}", hex(12)),
            secret_key: hex(32),
            bin,
            nodes,
            dir: Some(dir),
        };
        for i in 0..3 {
            garage.spawn_node(i);
        }
        for i in 0..3 {
            let id = garage.node_id(i);
            garage.nodes[i].id = id;
        }
        for i in 1..3 {
            let peer = garage.nodes[i].id.clone();
            garage.retry_admin(&format!("connecting node {i}"), &["node", "connect", &peer]);
        }
        for i in 0..3 {
            let id = garage.nodes[i].id.clone();
            let short = id.split('@').next().unwrap().to_string();
            let zone = format!("dc{i}");
            garage.admin_ok(&["layout", "assign", "-z", &zone, "-c", "1G", &short]);
        }
        garage.admin_ok(&["layout", "apply", "--version", "1"]);
        let bucket = garage.bucket.clone();
        garage.retry_admin("creating the bucket", &["bucket", "create", &bucket]);
        let (key, secret) = (garage.access_key.clone(), garage.secret_key.clone());
        garage.admin_ok(&["key", "import", "--yes", "-n", "xet-tests", &key, &secret]);
        garage.allow(&bucket);
        garage
    }

    /// The environment an `object_store` client (`AmazonS3Builder::from_env`) reads.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
    }

    /// An `object_store` client configuration for this cluster (node 0), for tests that look
    /// at the bucket themselves.
    pub fn s3_builder(&self) -> object_store::aws::AmazonS3Builder {
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_access_key_id(&self.access_key)
            .with_secret_access_key(&self.secret_key)
            .with_region(REGION)
            .with_allow_http(true)
            .with_bucket_name(&self.bucket)
    }

    /// Sets [`Garage::env`] on a command.
    pub fn apply_env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    /// S3 endpoint of node `i` (the first node's is [`Garage::endpoint`]).
    pub fn endpoint_of(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i].s3_port)
    }

    /// Creates another bucket the test key may read, write and own.
    pub fn create_bucket(&self, name: &str) {
        self.admin_ok(&["bucket", "create", name]);
        self.allow(name);
    }

    fn allow(&self, bucket: &str) {
        let key = self.access_key.clone();
        self.admin_ok(&[
            "bucket", "allow", "--read", "--write", "--owner", bucket, "--key", &key,
        ]);
    }

    /// Stops node `i` gracefully (SIGTERM, then SIGKILL after 10 s). Not node 0 if the test
    /// keeps using [`Garage::endpoint`]: stop 1 or 2, and talk to node 0.
    pub fn stop_node(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            // SAFETY: a signal to our own child.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
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

    /// Kills node `i` at once, like a crash.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a stopped node `i` again on its ports and data, and reconnects it.
    pub fn restart_node(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {i} is running");
        self.spawn_node(i);
        let from = if i == 0 { 1 } else { 0 };
        let peer = self.nodes[i].id.clone();
        self.retry_admin_on(
            from,
            &format!("reconnecting node {i}"),
            &["node", "connect", &peer],
        );
    }

    pub fn node_running(&mut self, i: usize) -> bool {
        self.nodes[i]
            .child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// The log of node `i` so far.
    pub fn node_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.nodes[i].dir.join("log")).unwrap_or_default()
    }

    fn spawn_node(&mut self, i: usize) {
        let node = &self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("log"))
            .expect("node log");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c")
            .arg(node.config())
            .arg("server")
            .env("RUST_LOG", "garage=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = spawn_tied_to_process(cmd).expect("spawn garage server");
        self.nodes[i].child = Some(child);
        let addr = self.nodes[i].rpc_addr();
        let s3 = format!("127.0.0.1:{}", self.nodes[i].s3_port);
        wait_until(
            &format!("node {i} not listening"),
            Duration::from_secs(30),
            || {
                if let Some(status) = self.nodes[i].child.as_mut().unwrap().try_wait().unwrap() {
                    panic!(
                        "garage node {i} exited with {status}:\n{}",
                        self.node_log(i)
                    );
                }
                TcpStream::connect(&addr).is_ok() && TcpStream::connect(&s3).is_ok()
            },
        );
    }

    fn node_id(&self, i: usize) -> String {
        let mut id = String::new();
        wait_until(
            &format!("no id for node {i}"),
            Duration::from_secs(30),
            || {
                let out = self.run(i, &["node", "id", "-q"]);
                id = String::from_utf8_lossy(&out.stdout).trim().to_string();
                out.status.success() && id.contains('@')
            },
        );
        id
    }

    fn run(&self, node: usize, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .arg("-c")
            .arg(self.nodes[node].config())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run garage")
    }

    /// Runs an admin command against node 0; panics with its output unless it succeeds.
    fn admin_ok(&self, args: &[&str]) -> String {
        let out = self.run(0, args);
        assert!(
            out.status.success(),
            "garage {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Retries an admin command for up to 30 s: right after start-up or a layout change
    /// the cluster may not answer yet.
    fn retry_admin(&self, what: &str, args: &[&str]) {
        self.retry_admin_on(0, what, args)
    }

    fn retry_admin_on(&self, node: usize, what: &str, args: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.run(node, args);
            if out.status.success() {
                return;
            }
            let last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(Instant::now() < deadline, "garage: {what} failed: {last}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
        // A test that wants to look at a failed cluster's files sets this.
        if std::env::var_os("GIT_XET_KEEP_GARAGE").is_some() {
            if let Some(dir) = self.dir.take() {
                eprintln!("garage files kept in {}", dir.keep().display());
            }
        }
    }
}

/// Every object under `prefix` in `bucket` as (key, bytes), with the client settings `env`
/// (as [`Garage::env`] gives them).
pub fn objects_under(
    env: &[(&'static str, String)],
    bucket: &str,
    prefix: &str,
) -> Vec<(String, Vec<u8>)> {
    use futures::TryStreamExt;
    use object_store::ObjectStore as _;
    let mut builder = object_store::aws::AmazonS3Builder::new().with_bucket_name(bucket);
    for (key, value) in env {
        let key = key
            .to_ascii_lowercase()
            .parse()
            .expect("an object_store setting");
        builder = builder.with_config(key, value);
    }
    let s3 = builder.build().expect("S3 client");
    let prefix = object_store::path::Path::from(prefix);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listed: Vec<_> = s3.list(Some(&prefix)).try_collect().await.unwrap();
        let mut out = Vec::new();
        for meta in listed {
            let bytes = s3.get(&meta.location).await.unwrap().bytes().await.unwrap();
            out.push((meta.location.to_string(), bytes.to_vec()));
        }
        out
    })
}

/// One cluster shared by every test of this test binary (started on first use), for
/// `GIT_XET_TEST_OBJECT_STORE=garage`: each user takes its own bucket prefix. Its nodes die
/// with the test process (PR_SET_PDEATHSIG); `None` when garage is missing (see
/// [`Garage::start`]).
pub fn shared() -> Option<&'static Garage> {
    SHARED
        .get_or_init(|| {
            let garage = Garage::start()?;
            // Statics are never dropped: stop the nodes and remove their files at exit.
            // SAFETY: registering a plain function with no captured state.
            unsafe {
                libc::atexit(stop_shared);
            }
            Some(garage)
        })
        .as_ref()
}

static SHARED: OnceLock<Option<Garage>> = OnceLock::new();

extern "C" fn stop_shared() {
    if let Some(Some(garage)) = SHARED.get() {
        for node in &garage.nodes {
            if let Some(child) = &node.child {
                // SAFETY: a signal to our own child.
                unsafe {
                    libc::kill(child.id() as i32, libc::SIGKILL);
                }
            }
        }
        if let Some(dir) = &garage.dir {
            let _ = std::fs::remove_dir_all(dir.path());
        }
    }
}

/// A prefix no other user of a shared cluster has.
pub fn unique_prefix(label: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
