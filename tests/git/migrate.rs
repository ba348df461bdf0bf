//! `git xet migrate` of the fixture repository, served by a plain LFS server that is not
//! ours (giftless) when it can be installed, else by `git xet server --basic-only`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::env::{assert_same_file, ok, remote_url, stderr, stdout, GitEnv};
use crate::support::TestServer;

/// The "old" LFS server the fixture lives on.
enum OldLfs {
    Giftless {
        child: Child,
        port: u16,
        _store: tempfile::TempDir,
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

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/repos")
}

impl OldLfs {
    fn start() -> OldLfs {
        match Self::giftless() {
            Ok(g) => g,
            Err(why) => {
                eprintln!("giftless unavailable ({why}); using git xet server --basic-only");
                OldLfs::Ours(TestServer::start_with(&["--basic-only"]))
            }
        }
    }

    fn giftless() -> Result<OldLfs, String> {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("giftless-venv");
        let install = std::process::Command::new(fixtures().join("giftless.sh"))
            .arg("install")
            .env("GIFTLESS_VENV", &venv)
            .output()
            .map_err(|e| e.to_string())?;
        if !install.status.success() {
            return Err(String::from_utf8_lossy(&install.stderr).into_owned());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(fixtures().join("giftless.sh"))
            .args(["serve", &port.to_string()])
            .arg(store.path())
            .env("GIFTLESS_VENV", &venv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("giftless did not start listening".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(OldLfs::Giftless {
            child,
            port,
            _store: store,
        })
    }

    fn endpoint(&self) -> String {
        match self {
            OldLfs::Giftless { port, .. } => {
                format!("http://127.0.0.1:{port}/org/fixture.git/info/lfs")
            }
            OldLfs::Ours(s) => format!("{}/info/lfs", remote_url(s, "org/fixture", "write")),
        }
    }
}

fn build_fixture(env: &GitEnv, old: &OldLfs) -> PathBuf {
    let dir = env.dir("fixture");
    let out = env
        .command(fixtures().join("build_lfs_repo.sh"), &dir)
        .arg(&dir)
        .arg(old.endpoint())
        .output()
        .unwrap();
    ok(out, "build_lfs_repo.sh");
    dir
}

const REFS: [&str; 4] = ["main", "feature", "release", "v1.0"];

#[test]
fn migrate_moves_every_object_and_a_xet_only_clone_checks_out_all_refs() {
    let old = OldLfs::start();
    let server = TestServer::start();
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old);
    let xet_remote = remote_url(&server, "org/migrated", "write");

    // A clone of the old repository (it has only main's objects locally).
    let work = env.dir("work");
    let lfsurl = format!("remote.origin.lfsurl={}", old.endpoint());
    env.git(
        &env.dir("."),
        &[
            "clone",
            "-q",
            "-c",
            &lfsurl,
            fixture.join("remote.git").to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    env.git(&work, &["remote", "add", "xet", &xet_remote]);
    for branch in ["feature", "release"] {
        env.git(
            &work,
            &["branch", "-q", branch, &format!("origin/{branch}")],
        );
    }

    // Interrupt a first run after its first upload...
    let mut first = env
        .command(crate::support::git_xet_bin(), &work)
        .args(["migrate", "xet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.contains("uploaded");
        seen.push(line);
        if done {
            break;
        }
    }
    let _ = first.kill();
    let _ = first.wait();
    assert!(
        seen.iter().any(|l| l.contains("uploaded")),
        "first run output:\n{}",
        seen.join("\n")
    );

    // ...and the re-run continues without sending it again.
    let out = ok(env.xet_output(&work, &["migrate", "xet"]), "migrate");
    let report = stdout(&out);
    assert!(
        report.contains("files:          7 ("),
        "{report}\n{}",
        stderr(&out)
    );
    let already = number_after(&report, "uploaded now, ");
    let uploaded = number_after(&report, "7 (");
    assert!(
        already >= 1,
        "the interrupted run's upload counts as done:\n{report}"
    );
    assert_eq!(uploaded + already, 7, "{report}");
    assert!(report.contains("dedup ratio:"), "{report}");
    assert!(
        stderr(&out).contains("verified: all 7 objects"),
        "{}",
        stderr(&out)
    );

    // Nothing left to send on a third run.
    let received = server.metric("git_xet_xorb_bytes_received_total");
    let out = ok(
        env.xet_output(&work, &["migrate", "xet", "--skip-verify"]),
        "migrate again",
    );
    assert!(
        stdout(&out).contains("0 uploaded now, 7 already on the server"),
        "{}",
        stdout(&out)
    );
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), received);

    // The git history moves with a plain push; the LFS objects are already there.
    env.git(&work, &["push", "-q", "xet", "main", "feature", "release"]);
    env.git(&work, &["push", "-q", "xet", "--tags"]);

    // A clone with only XET configured checks out every ref bit-exact.
    let fresh = GitEnv::with_agent(&[]);
    let clone = fresh.dir("clone");
    let basic_before = server.metric("git_xet_lfs_basic_bytes_served_total");
    fresh.git(
        &fresh.dir("."),
        &["clone", "-q", &xet_remote, clone.to_str().unwrap()],
    );
    let source = fixture.join("work");
    for r in REFS {
        fresh.git(&clone, &["checkout", "-q", r]);
        env.git(&source, &["checkout", "-q", r]);
        fresh.git(&clone, &["lfs", "fsck"]);
        for f in [
            "models/a.bin",
            "models/b.bin",
            "data/shared.bin",
            "data/shared-copy.bin",
            "data/part.bin",
            "data/small.bin",
        ] {
            let (x, y) = (source.join(f), clone.join(f));
            assert_eq!(x.exists(), y.exists(), "{r}: {f}");
            if x.exists() {
                assert_same_file(&x, &y);
            }
        }
    }
    assert_eq!(
        server.metric("git_xet_lfs_basic_bytes_served_total"),
        basic_before,
        "only XET was used"
    );
}

fn number_after(text: &str, marker: &str) -> u64 {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text}"))
        + marker.len()..];
    rest.chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn migrate_explains_a_server_without_xet() {
    let old = OldLfs::Ours(TestServer::start_with(&["--basic-only"]));
    let env = GitEnv::with_agent(&[]);
    let fixture = build_fixture(&env, &old);
    let work = fixture.join("work");
    let OldLfs::Ours(server) = &old else {
        unreachable!()
    };
    env.git(
        &work,
        &[
            "remote",
            "add",
            "plain",
            &remote_url(server, "org/fixture", "write"),
        ],
    );
    let out = env.xet_output(&work, &["migrate", "plain"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does not offer the `xet` transfer"),
        "{}",
        stderr(&out)
    );
}
