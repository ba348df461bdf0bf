//! The "old" LFS server a migration starts from: giftless (a plain git-lfs server that is
//! not ours, fixtures/repos/giftless.sh), optionally needing credentials; and the fixture
//! repository built on it (fixtures/repos/build_lfs_repo.sh).
//!
//! Without giftless (no Python), `git xet server --basic-only` stands in locally, with a
//! printed reason; with `CI` set, its absence fails the test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::env::{assert_same_file, ok, remote_url, GitEnv};
use crate::support::TestServer;

pub enum OldLfs {
    Giftless {
        child: Child,
        port: u16,
        store: tempfile::TempDir,
        /// The JWT giftless wants, when it wants one.
        token: Option<String>,
    },
    Ours(TestServer),
}

impl Drop for OldLfs {
    fn drop(&mut self) {
        if let OldLfs::Giftless { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/repos")
}

/// Installs giftless once per test process (`giftless.sh install` skips what is there).
fn giftless_installed() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let out = std::process::Command::new(fixtures().join("giftless.sh"))
                .arg("install")
                .output()
                .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        })
        .clone()
}

impl OldLfs {
    /// Anonymous read/write.
    pub fn start() -> OldLfs {
        Self::start_with(false)
    }

    /// Needing credentials (a JWT for giftless, a token for ours) from git's credential
    /// helpers: [`OldLfs::credential_helper`].
    pub fn start_with_auth() -> OldLfs {
        Self::start_with(true)
    }

    fn start_with(auth: bool) -> OldLfs {
        match Self::giftless(auth) {
            Ok(g) => g,
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("giftless is required in CI (.ci/deps/10-giftless.sh installs it): {why}")
            }
            Err(why) => {
                eprintln!("giftless unavailable ({why}); using git xet server --basic-only");
                OldLfs::Ours(TestServer::start_with(&["--basic-only"]))
            }
        }
    }

    fn giftless(auth: bool) -> Result<OldLfs, String> {
        giftless_installed()?;
        let secret = format!("secret-{}", rand::random::<u32>());
        let token = if auth {
            let out = std::process::Command::new(fixtures().join("giftless.sh"))
                .args(["token", &secret])
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).into_owned());
            }
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            None
        };
        // giftless cannot bind port 0 and say which it got: another port when it exits
        // (could not bind) before listening.
        for _ in 0..crate::support::ports::ATTEMPTS {
            let port = crate::support::ports::candidate();
            let store = tempfile::tempdir().unwrap();
            let mut cmd = std::process::Command::new(fixtures().join("giftless.sh"));
            cmd.args(["serve", &port.to_string()])
                .arg(store.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if auth {
                cmd.env("GIFTLESS_JWT_SECRET", &secret);
            }
            let mut child = cmd.spawn().map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(30);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("giftless did not start listening".into());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if child.try_wait().map_err(|e| e.to_string())?.is_none() {
                return Ok(OldLfs::Giftless {
                    child,
                    port,
                    store,
                    token,
                });
            }
        }
        Err("giftless exited before listening on each port it was given".into())
    }

    pub fn is_giftless(&self) -> bool {
        matches!(self, OldLfs::Giftless { .. })
    }

    /// The fixture's endpoint; with credentials in it only for our anonymous stand-in
    /// (which needs a token and has no other way to get one).
    pub fn endpoint(&self) -> String {
        match self {
            OldLfs::Giftless { port, .. } => {
                format!("http://127.0.0.1:{port}/org/fixture.git/info/lfs")
            }
            OldLfs::Ours(s) => format!("{}/info/lfs", remote_url(s, "org/fixture", "write")),
        }
    }

    /// The endpoint without credentials, for a server that gets them from a helper.
    pub fn bare_endpoint(&self) -> String {
        match self {
            OldLfs::Giftless { .. } => self.endpoint(),
            OldLfs::Ours(s) => format!("http://{}/org/fixture.git/info/lfs", s.addr()),
        }
    }

    /// A `credential.helper` value that answers with this server's credentials.
    pub fn credential_helper(&self) -> String {
        let (user, password) = match self {
            OldLfs::Giftless { token, .. } => ("_jwt".to_string(), token.clone().unwrap()),
            OldLfs::Ours(s) => ("x".to_string(), s.token("org/fixture", "write")),
        };
        format!("!f() {{ echo username={user}; echo password={password}; }}; f")
    }

    /// Where giftless keeps the fixture's objects (`<store>/org/fixture/<oid>`).
    pub fn object_dir(&self) -> Option<PathBuf> {
        match self {
            OldLfs::Giftless { store, .. } => Some(store.path().join("org/fixture")),
            OldLfs::Ours(_) => None,
        }
    }
}

/// Builds the fixture (fixtures/repos/build_lfs_repo.sh) with its objects on `endpoint`.
pub fn build_fixture(env: &GitEnv, endpoint: &str) -> PathBuf {
    let dir = env.dir("fixture");
    let out = env
        .command(fixtures().join("build_lfs_repo.sh"), &dir)
        .arg(&dir)
        .arg(endpoint)
        .output()
        .unwrap();
    ok(out, "build_lfs_repo.sh");
    dir
}

pub const REFS: [&str; 4] = ["main", "feature", "release", "v1.0"];
pub const FILES: [&str; 6] = [
    "models/a.bin",
    "models/b.bin",
    "data/shared.bin",
    "data/shared-copy.bin",
    "data/part.bin",
    "data/small.bin",
];

/// Clones `url` into a fresh environment (agent installed) and checks that every ref's LFS
/// files are bit-exact with the fixture's work tree at the same ref. `configure` runs in
/// the clone before checking the refs out (e.g. a local `lfs.url`).
pub fn clone_and_compare(url: &str, fixture: &Path, source_env: &GitEnv, configure: &[&[&str]]) {
    let fresh = GitEnv::with_agent(&[]);
    let clone = fresh.dir("clone");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", url, clone.to_str().unwrap()],
    );
    for args in configure {
        fresh.git(&clone, args);
    }
    let source = fixture.join("work");
    for r in REFS {
        fresh.git(&clone, &["checkout", "-q", r]);
        source_env.git(&source, &["checkout", "-q", r]);
        fresh.lfs_fsck(&clone);
        for f in FILES {
            let (x, y) = (source.join(f), clone.join(f));
            assert_eq!(x.exists(), y.exists(), "{r}: {f}");
            if x.exists() {
                assert_same_file(&x, &y);
            }
        }
    }
}
