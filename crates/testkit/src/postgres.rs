//! A real PostgreSQL for tests: Debian's server binaries, `initdb` into a temporary
//! directory and `pg_ctl start` on a free loopback port (its unix socket in that directory
//! too). PostgreSQL refuses to run as root, so when the tests run as root the cluster belongs
//! to `nobody`. Tests running at once share one cluster, each with a database of its own; the
//! cluster stops when the last test holding it drops it. A `PgCluster` is the guard: dropping
//! it (also while a failing test unwinds) stops its PostgreSQL, killing the postmaster if
//! `pg_ctl stop` could not.
//!
//! Without PostgreSQL installed (`.ci/deps/20-postgresql.sh` installs it) a test skips with
//! a printed reason, except under `CI`, where it fails.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};

pub struct PgCluster {
    bin: PathBuf,
    port: u16,
    /// The cluster's directory (`data/`, `log`, the socket), owned by `user`.
    dir: PathBuf,
    user: Option<&'static str>,
    _root: tempfile::TempDir,
}

/// One database of the shared cluster, for one test.
pub struct PgDatabase {
    /// `postgres://postgres@127.0.0.1:PORT/NAME`
    pub url: String,
    pub name: String,
    pub cluster: Arc<PgCluster>,
}

static SHARED: Mutex<Weak<PgCluster>> = Mutex::new(Weak::new());

/// Directory of the newest installed PostgreSQL's server binaries.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A database on the shared cluster, or `None` (with the reason printed) when PostgreSQL is
/// not installed and `CI` is unset.
pub fn database() -> Option<PgDatabase> {
    let cluster = cluster()?;
    let n = NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("xet_{}_{n}", std::process::id());
    cluster.run_client("createdb", &[&name]);
    Some(PgDatabase {
        url: cluster.url(&name),
        name,
        cluster,
    })
}

static NEXT_DB: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A cluster of the caller's own (not shared), for a test that stops it: dropping it stops
/// PostgreSQL. `None` as for [`database`].
pub fn own_cluster() -> Option<PgCluster> {
    let Some(bin) = bin_dir() else {
        let why = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
        return None;
    };
    Some(PgCluster::start(bin))
}

/// The running shared cluster, started if no test holds one.
pub fn cluster() -> Option<Arc<PgCluster>> {
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cluster) = shared.upgrade() {
        return Some(cluster);
    }
    let Some(bin) = bin_dir() else {
        let why = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; \
                   .ci/deps/20-postgresql.sh installs it)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
        return None;
    };
    let cluster = Arc::new(PgCluster::start(bin));
    *shared = Arc::downgrade(&cluster);
    Some(cluster)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl PgCluster {
    fn start(bin: PathBuf) -> PgCluster {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("pg");
        std::fs::create_dir(&dir).expect("cluster dir");
        let user = is_root().then_some("nobody");
        if user.is_some() {
            use std::os::unix::fs::PermissionsExt;
            // nobody must reach its directory through ours.
            std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            let status = Command::new("chown")
                .args(["nobody:", dir.to_str().expect("utf-8 path")])
                .status()
                .expect("run chown");
            assert!(status.success(), "chown nobody {}", dir.display());
        }
        let mut cluster = PgCluster {
            bin,
            port: 0,
            dir,
            user,
            _root: root,
        };
        let data = cluster.dir.join("data");
        cluster.run_server_tool(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        // PostgreSQL cannot bind port 0 and say which port it got; a free one can be taken
        // before it starts (see ports): try a few.
        for attempt in 1..=crate::ports::ATTEMPTS {
            cluster.port = crate::ports::candidate();
            let ok = cluster.pg_ctl_start();
            if ok {
                return cluster;
            }
            eprintln!(
                "pg_ctl start failed (attempt {attempt}): {}",
                cluster.log_text()
            );
        }
        panic!("PostgreSQL did not start; log:\n{}", cluster.log_text());
    }

    /// `pg_ctl start` on the cluster's port; whether it started.
    fn pg_ctl_start(&self) -> bool {
        let data = self.data_dir();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=300",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        self.server_tool("pg_ctl")
            .args(["-D", data.to_str().unwrap()])
            .args([
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl")
            .success()
    }

    /// Stops PostgreSQL (fast shutdown: sessions are ended), keeping its data and port for
    /// [`PgCluster::start_again`]. For a test of what its clients do meanwhile.
    pub fn stop(&self) {
        self.run_server_tool(
            "pg_ctl",
            &[
                "-D",
                self.data_dir().to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// Starts a cluster [`PgCluster::stop`] stopped again, on the same port.
    pub fn start_again(&self) {
        assert!(
            self.pg_ctl_start(),
            "PostgreSQL did not start again; log:\n{}",
            self.log_text()
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// A server binary (initdb, pg_ctl) run as the cluster's owner.
    fn server_tool(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        match self.user {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    fn run_server_tool(&self, tool: &str, args: &[&str]) {
        let out = self
            .server_tool(tool)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("run {tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A client tool (createdb, psql) over loopback TCP as the `postgres` role.
    pub fn run_client(&self, tool: &str, args: &[&str]) -> String {
        let out = Command::new(self.bin.join(tool))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The postmaster's process id (the first line of its `postmaster.pid`), while it runs.
    pub fn pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }
}

/// Whether process `pid` runs (exists and is not a zombie waiting to be reaped).
pub fn process_runs(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) STATE ...": COMM may hold spaces and parentheses, STATE follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

impl PgDatabase {
    /// Runs one SQL statement with psql and returns its unaligned, tuples-only output.
    pub fn sql(&self, statement: &str) -> String {
        self.cluster
            .run_client(
                "psql",
                &[
                    "-X",
                    "-A",
                    "-t",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-d",
                    &self.name,
                    "-c",
                    statement,
                ],
            )
            .trim()
            .to_string()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let pid = self.pid();
        let data = self.data_dir();
        let stopped = self
            .server_tool("pg_ctl")
            .args([
                "-D",
                data.to_str().unwrap_or_default(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if let (false, Some(pid)) = (stopped, pid) {
            // SAFETY: kill(2) with a pid read from the cluster's own postmaster.pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
