//! Push discovery (`info/refs?service=git-receive-pack`) creates nothing; the push does.

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
    assert!(body.contains("capabilities^{}"), "an empty repository's refs: {body}");
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
    assert!(bare.join("HEAD").exists(), "the push created the repository");
    let head = env.git(&work, &["rev-parse", "HEAD"]);
    let listed = env.git(&work, &["ls-remote", &remote, "refs/heads/main"]);
    assert!(listed.starts_with(head.trim()), "{listed}");
}
