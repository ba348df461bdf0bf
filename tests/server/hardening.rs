//! Smaller hardening checks: push discovery (`info/refs?service=git-receive-pack`)
//! creates nothing, the push does; an upload the disk cannot hold is refused before it is
//! read.

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::{write_file, TestServer};

#[test]
fn push_discovery_creates_no_repository_and_the_first_push_does() {
    let server = TestServer::start();
    let token = server.token("org/fresh", "write");
    let bare = server.data.join("repos/org/fresh.git");
    let r = client()
        .get(format!("{}/org/fresh.git/info/refs", server.url))
        .query(&[("service", "git-receive-pack")])
        .basic_auth("x", Some(&token))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "application/x-git-receive-pack-advertisement"
    );
    let body = r.text().unwrap();
    assert!(
        body.contains("capabilities^{}"),
        "an empty repository's refs: {body}"
    );
    assert!(!bare.exists(), "discovery created {}", bare.display());
    // A clone of it is still "does not exist".
    let r = client()
        .get(format!("{}/org/fresh.git/info/refs", server.url))
        .query(&[("service", "git-upload-pack")])
        .basic_auth("x", Some(&token))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);

    let env = GitEnv::new(Some(&token));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    write_file(&work.join("README.md"), b"hello\n");
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "one"]);
    let remote = format!("{}/org/fresh.git", server.url);
    env.git(&work, &["push", "-q", &remote, "main"]);
    assert!(
        bare.join("HEAD").exists(),
        "the push created the repository"
    );
    let head = env.git(&work, &["rev-parse", "HEAD"]);
    let listed = env.git(&work, &["ls-remote", &remote, "refs/heads/main"]);
    assert!(listed.starts_with(head.trim()), "{listed}");
}

/// A basic upload declaring more than the disk has free is refused with 507 before its body
/// is read (it used to be staged until the disk filled).
#[test]
fn an_upload_larger_than_the_free_space_is_507_before_its_body() {
    use std::io::{Read, Write};
    let server = TestServer::start_with(&["--max-object-size", "18000000000000000000"]);
    let token = server.token("org/big", "write");
    let path = format!("/org/big.git/info/lfs/objects/{}", "ab".repeat(32));
    let mut answer = [0u8; 4096];
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 17000000000000000000\r\n\r\nabc"
    )
    .unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let n = s.read(&mut answer).expect("an answer before the body");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 507"), "{text}");
    assert!(text.contains("out of disk space"), "{text}");
}

/// A tmpfs mounted over a server's data directory, with the server on it; dropping it stops
/// the server, then unmounts (also when the test fails).
struct ServerOnTmpfs {
    server: TestServer,
    mount: Option<std::path::PathBuf>,
}

impl ServerOnTmpfs {
    /// A server whose data directory is a tmpfs of `size` (e.g. "16m"); `None`, with the
    /// reason printed, when mounting is not possible here and CI is unset. Needs root.
    fn start(size: &str) -> Option<ServerOnTmpfs> {
        let mut server = TestServer::start();
        server.stop();
        let data = server.data.clone();
        let saved = data.with_extension("before-tmpfs");
        std::fs::rename(&data, &saved).unwrap();
        std::fs::create_dir(&data).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&data)
            .output();
        let ok = mounted.as_ref().is_ok_and(|o| o.status.success());
        if !ok {
            let why = match &mounted {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var_os("CI").is_none(),
                "mounting a tmpfs (needs root) failed under CI: {why}"
            );
            eprintln!("skipped: cannot mount a tmpfs here (needs root): {why}");
            return None;
        }
        let guard = ServerOnTmpfs {
            server,
            mount: Some(data.clone()),
        };
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(saved.join("."))
            .arg(&data)
            .status()
            .unwrap();
        assert!(copied.success(), "copying the data directory to the tmpfs");
        let mut guard = guard;
        guard.server.restart();
        Some(guard)
    }
}

impl Drop for ServerOnTmpfs {
    fn drop(&mut self) {
        self.server.stop();
        if let Some(dir) = self.mount.take() {
            let _ = std::process::Command::new("umount").arg(&dir).status();
        }
    }
}

/// Bytes free on the file system holding `dir`.
fn free_bytes(dir: &std::path::Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df output")
}

/// Answers with status 507 so far, from the server's metrics.
fn answered_507(server: &TestServer) -> f64 {
    server
        .metrics()
        .lines()
        .filter(|l| l.starts_with("git_xet_http_requests_total") && l.contains("status=\"507\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// End to end on a really full disk (a small tmpfs): a xorb and a basic PUT that do not fit
/// get 507 naming the cause, `git xet upload` gives up at once instead of retrying, and what
/// the server already holds is still served.
#[test]
fn a_full_disk_answers_507_the_client_stops_and_stored_objects_are_still_served() {
    use crate::common::{sha256_hex, Cas, Upload};
    use crate::lfs::lfs_url;
    use crate::support::{git_xet, random_bytes};
    let Some(env) = ServerOnTmpfs::start("16m") else {
        return;
    };
    let server = &env.server;
    let token = server.token("org/full", "write");
    let earlier = random_bytes(300_000, 2431);
    let earlier_url = lfs_url(
        server,
        "org/full",
        &format!("objects/{}", sha256_hex(&earlier)),
    );
    let r = client()
        .put(&earlier_url)
        .bearer_auth(&token)
        .body(earlier.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);

    // Fill the disk to within 512 KiB.
    let free = free_bytes(&server.data);
    let filler = vec![0u8; free.saturating_sub(512 * 1024) as usize];
    std::fs::write(server.data.join("filler"), &filler).unwrap();
    drop(filler);

    // A xorb that does not fit.
    let cas = Cas::with_token(server, &token);
    let up = Upload::random(3_000_000, 2432, 100);
    let x = &up.xorbs[0];
    let r = cas.post_xorb_raw(&x.hash.to_hex(), x.bytes.clone());
    assert_eq!(r.status(), 507);
    let text = r.text().unwrap();
    assert!(text.contains("disk space"), "{text}");

    // A basic PUT that does not fit. It is refused before its body is read; the client may
    // see the 507 or, still writing the body when the server closes, a broken connection
    // (timing decides). Either way the server's 507 count says it refused.
    let big = random_bytes(3_000_000, 2433);
    let before_put = answered_507(server);
    let sent = client()
        .put(lfs_url(
            server,
            "org/full",
            &format!("objects/{}", sha256_hex(&big)),
        ))
        .bearer_auth(&token)
        .body(big)
        .send();
    match sent {
        Ok(r) => {
            assert_eq!(r.status(), 507);
            let text = r.text().unwrap();
            assert!(text.contains("disk space"), "{text}");
        }
        Err(e) => assert!(e.is_request(), "{e}"),
    }
    assert_eq!(
        answered_507(server) - before_put,
        1.0,
        "the PUT was answered 507"
    );

    // The client stops on 507 instead of retrying.
    let before = answered_507(server);
    let file = server.data.with_extension("upload.bin");
    std::fs::write(&file, random_bytes(3_000_000, 2434)).unwrap();
    let started = std::time::Instant::now();
    let out = git_xet()
        .args(["upload", "--endpoint", &server.url, "--token", &token])
        .arg(&file)
        .env("GIT_XET_CACHE_DIR", server.data.with_extension("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the upload succeeded on a full disk");
    assert!(stderr.contains("disk space"), "{stderr}");
    let refused = answered_507(server) - before;
    assert!(
        (1.0..=2.0).contains(&refused),
        "{refused} requests answered 507 during one upload (the client retried): {stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the upload took {:?} to give up",
        started.elapsed()
    );

    // What was stored before is still served.
    let r = client()
        .get(&earlier_url)
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().unwrap() == earlier);
}
