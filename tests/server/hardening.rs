//! Smaller findings of issue 24: push discovery (`info/refs?service=git-receive-pack`)
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
