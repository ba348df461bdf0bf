//! Upkeep against a real server on loopback: `repo delete`, `gc` (also racing uploads, at
//! the exact interleavings), `check` (a deleted xorb, a corrupted byte), the data-directory
//! lock, `--no-git` and options from the environment.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use git_xet_core::MerkleHash;

use crate::common::{client, json, wait_for, Cas, Upload};
use crate::gitenv::GitEnv;
use crate::support::{git_xet, random_bytes, write_file, TestServer};

fn admin(server: &TestServer, args: &[&str]) -> Output {
    git_xet()
        .arg("server")
        .args(args)
        .arg("--data")
        .arg(&server.data)
        .output()
        .expect("run git xet server admin command")
}

fn admin_ok(server: &TestServer, args: &[&str]) -> String {
    let out = admin(server, args);
    assert!(
        out.status.success(),
        "git xet server {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number after `label` in gc's output, e.g. `xorbs freed: 3 (...)`.
fn figure(text: &str, label: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} in:\n{text}"));
    line[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

fn xorb_path(server: &TestServer, hash: &MerkleHash) -> PathBuf {
    let hex = hash.to_hex();
    server
        .data
        .join("xorbs")
        .join(&hex[..2])
        .join(format!("{hex}.xorb"))
}

fn stored(server: &TestServer, hash: &MerkleHash) -> bool {
    xorb_path(server, hash).exists()
}

#[test]
fn gc_after_repo_delete_frees_unique_xorbs_and_keeps_shared_ones() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let a = Cas::new(&server, "org/a", "write");
    let b = Cas::new(&server, "org/b", "write");
    let shared = Upload::random(300_000, 1, 8);
    let unique = Upload::random(300_000, 2, 8);
    a.upload(&shared);
    a.upload(&unique);
    b.upload(&shared);

    // Within the grace period nothing goes, referenced or not.
    let out = admin_ok(&server, &["repo", "delete", "org/a", "--yes"]);
    assert!(out.contains("deleted org/a"), "{out}");
    let out = admin_ok(&server, &["gc"]);
    assert_eq!(
        figure(&out, "files unregistered:"),
        1,
        "org/a's own file: {out}"
    );
    assert_eq!(figure(&out, "xorbs freed:"), 0, "{out}");
    let out = admin_ok(&server, &["gc", "--grace", "0", "--dry-run"]);
    assert_eq!(
        figure(&out, "xorbs would free:"),
        unique.xorbs.len() as u64,
        "{out}"
    );
    assert!(unique.xorbs.iter().all(|x| stored(&server, &x.hash)));

    let out = admin_ok(&server, &["gc", "--grace", "0"]);
    let unique_bytes: u64 = unique.xorbs.iter().map(|x| x.bytes.len() as u64).sum();
    assert_eq!(
        figure(&out, "xorbs freed:"),
        unique.xorbs.len() as u64,
        "{out}"
    );
    assert!(out.contains(&format!("({unique_bytes} bytes")), "{out}");
    assert_eq!(
        figure(&out, "shards freed:"),
        1,
        "the unique file's shard: {out}"
    );
    assert!(unique.xorbs.iter().all(|x| !stored(&server, &x.hash)));
    assert!(shared.xorbs.iter().all(|x| stored(&server, &x.hash)));

    // What remains rebuilds, bit for bit, and verifies.
    assert_eq!(b.download(&shared.file_hash, None), shared.data);
    let out = admin_ok(&server, &["check", "--read-data"]);
    assert!(out.contains("no problems found"), "{out}");
    // org/a sees nothing any more; a second gc finds nothing.
    let (status, _) = json(a.reconstruction_raw(&shared.file_hash.to_hex(), None));
    assert_eq!(status, 404);
    let out = admin_ok(&server, &["gc", "--grace", "0"]);
    assert_eq!(figure(&out, "xorbs freed:"), 0, "{out}");

    // The deleted content can be pushed again (nothing stale answers "already stored").
    a.upload(&unique);
    assert_eq!(a.download(&unique.file_hash, None), unique.data);
}

/// A `gc --grace 0` run paused at its test hook.
struct PausedGc {
    child: Option<Child>,
    pause: tempfile::TempDir,
}

impl PausedGc {
    fn start(server: &TestServer) -> PausedGc {
        let pause = tempfile::tempdir().unwrap();
        let child = git_xet()
            .args(["server", "gc", "--grace", "0", "--data"])
            .arg(&server.data)
            .env("GIT_XET_GC_TEST_PAUSE", pause.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        PausedGc {
            child: Some(child),
            pause,
        }
    }

    fn wait_at(&self, step: &str) {
        let reached = self.pause.path().join(format!("{step}.reached"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !reached.exists() {
            assert!(Instant::now() < deadline, "gc never reached {step}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn go(&self, step: &str) {
        std::fs::write(self.pause.path().join(format!("{step}.go")), b"").unwrap();
    }

    fn finish(mut self) -> String {
        self.go("decided");
        self.go("condemned");
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "gc failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

impl Drop for PausedGc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_shard_registered_after_gc_decided_keeps_its_xorbs() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let cas = Cas::new(&server, "org/race", "write");
    let up = Upload::random(200_000, 3, 8);
    // The xorbs are stored, their shard not yet sent: unreferenced, and (grace 0) old enough.
    for x in &up.xorbs {
        cas.post_xorb(x);
    }
    let gc = PausedGc::start(&server);
    gc.wait_at("decided");
    // gc has listed them as garbage; the upload's shard arrives now.
    cas.post_shard(&up.shard);
    let out = gc.finish();
    // The condemning transaction saw the new reference: nothing was deleted.
    assert_eq!(figure(&out, "xorbs freed:"), 0, "{out}");
    assert!(up.xorbs.iter().all(|x| stored(&server, &x.hash)));
    assert_eq!(cas.download(&up.file_hash, None), up.data);
    let out = admin_ok(&server, &["check", "--read-data"]);
    assert!(out.contains("no problems found"), "{out}");
}

#[test]
fn a_shard_sent_after_gc_condemned_its_xorbs_is_refused_and_the_retry_works() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let cas = Cas::new(&server, "org/race", "write");
    let up = Upload::random(200_000, 4, 8);
    for x in &up.xorbs {
        cas.post_xorb(x);
    }
    let gc = PausedGc::start(&server);
    gc.wait_at("decided");
    gc.go("decided");
    gc.wait_at("condemned");
    // Between condemnation and deletion: the registration must not go through, or it would
    // reference xorbs about to vanish. Nor may a dedup query offer them.
    let (status, body) = json(cas.post_shard_raw(up.shard.to_upload_bytes()));
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("upload it again"),
        "the refusal says what to do: {body}"
    );
    let x0 = &up.xorbs[0];
    let again = cas.post_xorb_raw(&x0.hash.to_hex(), x0.bytes.clone());
    assert_eq!(
        again.status(),
        409,
        "re-uploading a condemned xorb is refused until gc is done"
    );
    let out = gc.finish();
    assert_eq!(figure(&out, "xorbs freed:"), up.xorbs.len() as u64, "{out}");
    assert!(up.xorbs.iter().all(|x| !stored(&server, &x.hash)));

    // The client's retry uploads everything again and succeeds.
    for x in &up.xorbs {
        assert!(cas.post_xorb(x), "stored anew");
    }
    cas.post_shard(&up.shard);
    assert_eq!(cas.download(&up.file_hash, None), up.data);
    let out = admin_ok(&server, &["check", "--read-data"]);
    assert!(out.contains("no problems found"), "{out}");
}

#[test]
fn check_finds_a_deleted_xorb_and_a_corrupted_byte() {
    let server = TestServer::start_with(&["--no-fsync"]);
    let cas = Cas::new(&server, "org/check", "write");
    let one = Upload::random(200_000, 5, 1);
    let two = Upload::random(200_000, 6, 1);
    assert!(two.xorbs.len() >= 2);
    cas.upload(&one);
    cas.upload(&two);
    let out = admin_ok(&server, &["check", "--read-data"]);
    assert!(out.contains("files checked: 2"), "{out}");

    std::fs::remove_file(xorb_path(&server, &one.xorbs[0].hash)).unwrap();
    let out = admin(&server, &["check"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "xorb {}: indexed but not stored",
            one.xorbs[0].hash
        )),
        "{err}"
    );

    // One byte flipped inside a chunk record: only reading the data finds it.
    let victim = xorb_path(&server, &two.xorbs[1].hash);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();
    let out = admin(&server, &["check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains(&two.xorbs[1].hash.to_hex()),
        "without --read-data the layout still looks right: {err}"
    );
    let out = admin(&server, &["check", "--read-data"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("xorb {}: corrupt", two.xorbs[1].hash)),
        "{err}"
    );
    assert!(err.contains("2 problems found"), "{err}");
}

#[test]
fn a_second_server_on_the_same_data_directory_is_refused() {
    let mut first = TestServer::start();
    let out = git_xet()
        .args(["server", "--listen", "127.0.0.1:0", "--data"])
        .arg(&first.data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let pid = first.pid().unwrap();
    assert!(
        err.contains("in use by another git xet server") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
    // The first one is untouched and still serves; once it stops, the directory is free.
    assert!(first.is_running());
    Cas::new(&first, "org/lock", "write").upload(&Upload::random(50_000, 7, 4));
    first.restart();
    assert!(first.is_running());
}

/// A server started from environment variables only, killed on drop.
struct EnvServer {
    child: Child,
    url: String,
}

impl Drop for EnvServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_from_env(dir: &Path, env: &[(&str, &str)]) -> EnvServer {
    let ready = dir.join("ready");
    let mut child = git_xet()
        .arg("server")
        .envs(env.iter().copied())
        .env("GIT_XET_SERVER_READY_FILE", &ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(|| std::fs::read_to_string(&ready).is_ok_and(|u| !u.trim().is_empty())),
        "server from environment not ready: {:?}",
        child.try_wait()
    );
    let url = std::fs::read_to_string(&ready).unwrap().trim().to_string();
    EnvServer { child, url }
}

#[test]
fn no_git_and_every_option_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    // Port 0: the server binds a port of its own and says which in DATA/server.json; not the
    // default port, so the listen setting came through.
    let server = start_from_env(
        dir.path(),
        &[
            ("GIT_XET_SERVER_LISTEN", "127.0.0.1:0"),
            ("GIT_XET_SERVER_DATA", data_s),
            ("GIT_XET_SERVER_NO_GIT", "true"),
            ("GIT_XET_SERVER_NO_FSYNC", "1"),
            ("GIT_XET_SERVER_PUBLIC_URL", "http://xet.example.invalid:9"),
        ],
    );
    // The ready file carries the public URL: that setting came through.
    assert_eq!(server.url, "http://xet.example.invalid:9");
    let urls: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("server.json")).unwrap()).unwrap();
    let addr = urls["internal_url"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":8484"),
        "listening on {addr}, not where GIT_XET_SERVER_LISTEN said"
    );
    assert!(
        data.join("index.sqlite").exists(),
        "the data directory came through"
    );
    let http = crate::common::client();
    let holder = std::fs::read_to_string(data.join("server.lock")).unwrap();
    assert_eq!(holder.trim(), server.child.id().to_string());

    let token = {
        let out = git_xet()
            .args([
                "server", "token", "create", "--repo", "org/x", "--scope", "write",
            ])
            .env("GIT_XET_SERVER_DATA", data_s)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let refs = http
        .get(format!(
            "http://{addr}/org/x.git/info/refs?service=git-upload-pack"
        ))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(refs.status(), 404);
    assert!(refs.text().unwrap().contains("--no-git"));
    // git-lfs still works, with hrefs at the public URL.
    let batch = http
        .post(format!("http://{addr}/org/x.git/info/lfs/objects/batch"))
        .bearer_auth(&token)
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .body(r#"{"operation":"upload","transfers":["basic"],"objects":[{"oid":"1111111111111111111111111111111111111111111111111111111111111111","size":5}]}"#)
        .send()
        .unwrap();
    assert_eq!(batch.status(), 200);
    let body = batch.text().unwrap();
    assert!(body.contains("http://xet.example.invalid:9/"), "{body}");
}

#[test]
fn repo_delete_needs_yes_and_an_existing_repository() {
    let server = TestServer::start();
    let cas = Cas::new(&server, "org/keep", "write");
    let up = Upload::random(50_000, 8, 4);
    cas.upload(&up);
    let out = admin(&server, &["repo", "delete", "org/keep"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert_eq!(
        cas.download(&up.file_hash, None),
        up.data,
        "nothing changed"
    );
    let out = admin(&server, &["repo", "delete", "org/none", "--yes"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    let out = admin(&server, &["repo", "delete", "../etc", "--yes"]);
    assert!(!out.status.success());
    assert_eq!(
        cas.download(&up.file_hash, None),
        up.data,
        "nothing changed"
    );
}

/// `repo delete` of a repository created private through the Hub API forgets that it was:
/// the same name pushed again later is as readable as any other new repository.
#[test]
fn a_repository_recreated_after_repo_delete_does_not_inherit_private() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let token = server.token("org/p", "write");
    let refs = || {
        client()
            .get(format!(
                "{}/org/p.git/info/refs?service=git-upload-pack",
                server.url
            ))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    let created = client()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(&token)
        .json(&serde_json::json!({ "name": "p", "organization": "org", "private": true }))
        .send()
        .unwrap();
    assert_eq!(created.status(), 200, "{}", created.text().unwrap());
    assert_eq!(refs(), 401, "private: no anonymous read");

    admin_ok(&server, &["repo", "delete", "org/p", "--yes"]);
    let env = GitEnv::new(Some(&token));
    let work = env.home.path().join("w");
    env.new_repo(&work);
    write_file(&work.join("a.bin"), &random_bytes(20_000, 5));
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "again"]);
    let remote = format!("{}/org/p.git", server.url);
    env.git(&work, &["push", "-q", &remote, "main"]);
    assert_eq!(refs(), 200, "a new repository is not private");
}
