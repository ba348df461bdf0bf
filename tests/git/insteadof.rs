//! `url.<base>.insteadOf` / `pushInsteadOf` in endpoint resolution, held to the real
//! git-lfs: for each setup our download and upload endpoints are those git-lfs uses
//! (`git lfs env`'s `Endpoint=` line; the Batch API URL git-lfs posts to on `git lfs push`,
//! from `GIT_TRACE`). And a repository whose origin is an alias pushes and clones through
//! XET against the test server.

use std::path::Path;

use git_xet_git::command::Git;
use git_xet_git::endpoint::{self, Source};
use git_xet_git::repo::Repo;
use git_xet_lfs::protocol::Operation;

use crate::env::{assert_file_is, ok, remote_url, stderr, stdout, GitEnv};
use crate::support::ports::ClosedPort;
use crate::support::{random_bytes, write_file, TestServer};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";
const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";
const BASIC_RECEIVED: &str = "git_xet_lfs_basic_bytes_received_total";
const BASIC_SERVED: &str = "git_xet_lfs_basic_bytes_served_total";

/// A loopback port nothing listens on: git-lfs's batch request is refused at once.
fn closed() -> ClosedPort {
    ClosedPort::bind()
}

/// git-lfs's download endpoint: `git lfs env`'s `Endpoint=` line (the default remote).
fn git_lfs_download(env: &GitEnv, repo: &Path) -> String {
    let out = ok(
        env.command("git", repo)
            .args(["lfs", "env"])
            .output()
            .unwrap(),
        "git lfs env",
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Endpoint="))
        .unwrap_or_else(|| panic!("no Endpoint= line:\n{text}"));
    line.split(" (auth=").next().unwrap().to_string()
}

/// git-lfs's upload endpoint: the Batch API URL `git lfs push` posts to (refused: nothing
/// listens there).
fn git_lfs_upload(env: &GitEnv, repo: &Path) -> String {
    let out = env
        .command("git", repo)
        .args(["lfs", "push", "--all", "origin"])
        .env("GIT_TRACE", "1")
        .output()
        .unwrap();
    let text = stderr(&out);
    text.lines()
        .find_map(|l| l.split_once("HTTP: POST ").map(|(_, url)| url.trim()))
        .and_then(|url| url.strip_suffix("/objects/batch"))
        .unwrap_or_else(|| panic!("git-lfs posted no batch request:\n{text}"))
        .to_string()
}

/// Our endpoint for `operation`, reading configuration per key and read once (the
/// filter's and the agent's way); both must agree.
fn ours(env: &GitEnv, repo: &Path, operation: Operation) -> String {
    match our_source(env, repo, operation) {
        Source::Http(url) => url,
        other => panic!("not an http endpoint: {other:?}"),
    }
}

/// [`endpoint::source`] of `origin`, read per key and read once (both must agree).
fn our_source(env: &GitEnv, repo: &Path, operation: Operation) -> Source {
    let git = Git::in_dir(repo)
        .with_env("HOME", env.home.to_str().unwrap())
        .with_env("GIT_CONFIG_GLOBAL", env.global_config.to_str().unwrap())
        .with_env("GIT_CONFIG_SYSTEM", env.system_config.to_str().unwrap());
    let per_key = Repo::discover_with(&git).unwrap();
    let once = Repo::discover_with_config(&git).unwrap();
    let a = endpoint::source(&per_key, "origin", operation).unwrap();
    let b = endpoint::source(&once, "origin", operation).unwrap();
    assert_eq!(a, b, "per key and read once disagree");
    a
}

#[test]
fn endpoints_with_url_aliases_are_those_of_git_lfs() {
    let closed = closed();
    let base = closed.url();
    let b = |path: &str| format!("{base}/{path}");
    let lfs = |path: &str| format!("{base}/{path}/info/lfs");
    check(
        "no alias",
        &b("org/r.git"),
        &[],
        &lfs("org/r.git"),
        &lfs("org/r.git"),
    );
    check(
        "insteadOf on the remote url",
        "short:org/r",
        &[("url.BASE/a/.insteadOf", "short:")],
        &lfs("a/org/r.git"),
        &lfs("a/org/r.git"),
    );
    check(
        "pushInsteadOf first for uploads",
        "short:org/r.git",
        &[
            ("url.BASE/down/.insteadOf", "short:"),
            ("url.BASE/up/.pushInsteadOf", "short:"),
        ],
        &lfs("down/org/r.git"),
        &lfs("up/org/r.git"),
    );
    check(
        "a pushurl, itself an alias (pushInsteadOf applies to it too, as git-lfs does)",
        "short:org/r.git",
        &[
            ("remote.origin.pushurl", "push:org/w.git"),
            ("url.BASE/down/.insteadOf", "short:"),
            ("url.BASE/up/.insteadOf", "push:"),
            ("url.BASE/pushup/.pushInsteadOf", "push:org/"),
        ],
        &lfs("down/org/r.git"),
        &lfs("pushup/w.git"),
    );
    check(
        "overlapping aliases: the longest wins",
        "short:org/r.git",
        &[
            ("url.BASE/s/.insteadOf", "s"),
            ("url.BASE/long/.insteadOf", "short:org/"),
            ("url.BASE/mid/.insteadOf", "short:"),
        ],
        &lfs("long/r.git"),
        &lfs("long/r.git"),
    );
    check(
        "an alias on lfs.url (no /info/lfs added)",
        &b("plain/org/r.git"),
        &[
            ("lfs.url", "lfs:org/r"),
            ("url.BASE/lfs/.insteadOf", "lfs:"),
            ("url.BASE/lfs-up/.pushInsteadOf", "lfs:"),
        ],
        &b("lfs/org/r"),
        &b("lfs-up/org/r"),
    );
    check(
        "aliases on remote.origin.lfsurl and lfspushurl",
        &b("plain/org/r.git"),
        &[
            ("remote.origin.lfsurl", "lfs:org/r"),
            ("remote.origin.lfspushurl", "lfsw:org/w"),
            ("url.BASE/lfs/.insteadOf", "lfs:"),
            ("url.BASE/lfsw/.insteadOf", "lfsw:"),
        ],
        &b("lfs/org/r"),
        &b("lfsw/org/w"),
    );
    check(
        ".lfsconfig: lfs.url an alias of git config's; remote.origin.lfspushurl ignored",
        &b("plain/org/r.git"),
        &[
            (".lfsconfig:lfs.url", "lfs:org/r"),
            (".lfsconfig:remote.origin.lfspushurl", "lfs:org/elsewhere"),
            ("url.BASE/lfs/.insteadOf", "lfs:"),
        ],
        &b("lfs/org/r"),
        &b("lfs/org/r"),
    );
}

/// One setup: a repository with an LFS object committed, `origin` = `url` and `config`
/// set locally (`BASE` in a key: the loopback base of the expected endpoints; a key
/// starting with `.lfsconfig:` goes to a committed `.lfsconfig`); git-lfs's endpoints are
/// the expected ones, and ours are git-lfs's.
fn check(name: &str, url: &str, config: &[(&str, &str)], download: &str, upload: &str) {
    let base = download.split('/').take(3).collect::<Vec<_>>().join("/");
    let env = GitEnv::plain_lfs();
    let repo = env.lfs_repo("repo", url);
    write_file(&repo.join("a.bin"), name.as_bytes());
    let mut local = Vec::new();
    for (key, value) in config {
        let key = key.replace("BASE", &base);
        match key.strip_prefix(".lfsconfig:") {
            Some(key) => {
                env.git(
                    &repo,
                    &["config", "--file", ".lfsconfig", "--add", key, value],
                );
            }
            None => local.push((key, value)),
        }
    }
    env.git(&repo, &["add", "."]);
    env.git(&repo, &["commit", "-qm", "one object"]);
    for (key, value) in local {
        env.git(&repo, &["config", "--add", &key, value]);
    }
    let lfs = (git_lfs_download(&env, &repo), git_lfs_upload(&env, &repo));
    assert_eq!(
        (lfs.0.as_str(), lfs.1.as_str()),
        (download, upload),
        "{name}: git-lfs's endpoints (download, upload) are not the expected ones"
    );
    let ours = (
        ours(&env, &repo, Operation::Download),
        ours(&env, &repo, Operation::Upload),
    );
    assert_eq!(
        ours, lfs,
        "{name}: ours (download, upload) differ from git-lfs's"
    );
}

/// `url."git@host:".insteadOf https://host/` (common in companies) makes an https remote an
/// ssh one: git-lfs's endpoint is then its https guess for the ssh remote, and ours too.
/// Nothing is contacted (`git lfs env` runs no ssh; our source asks nothing).
#[test]
fn an_https_remote_aliased_to_ssh_resolves_as_git_lfs_resolves_it() {
    let env = GitEnv::plain_lfs();
    let closed = closed();
    let https = closed.url().replace("http://", "https://");
    let repo = env.lfs_repo("repo", &format!("{https}/org/r"));
    env.git(
        &repo,
        &[
            "config",
            "url.git@127.0.0.1:.insteadOf",
            &format!("{https}/"),
        ],
    );
    let out = ok(
        env.command("git", &repo)
            .args(["lfs", "env"])
            .output()
            .unwrap(),
        "git lfs env",
    );
    let text = stdout(&out);
    assert!(text.contains("\n  SSH=git@127.0.0.1:org/r\n"), "{text}");
    let download = git_lfs_download(&env, &repo);
    assert_eq!(download, "https://127.0.0.1/org/r.git/info/lfs");
    match our_source(&env, &repo, Operation::Download) {
        Source::Ssh { fallback, url, .. } => {
            assert_eq!(
                (fallback.as_str(), url.as_str()),
                (download.as_str(), "git@127.0.0.1:org/r")
            )
        }
        other => panic!("not an ssh endpoint: {other:?}"),
    }
}

/// `origin` = `xet:org/aliased.git` with `url.<server>/.insteadOf xet:` (for git, git-lfs,
/// the agent and the filter alike): the push and the clone go through XET.
#[test]
fn an_aliased_origin_pushes_and_clones_through_xet() {
    let server = TestServer::start();
    let real = remote_url(&server, "org/aliased", "write");
    let base = real.strip_suffix("org/aliased.git").unwrap();
    let alias = |env: &GitEnv| {
        let dir = env.dir(".");
        env.git(
            &dir,
            &[
                "config",
                "--global",
                &format!("url.{base}.insteadOf"),
                "xet:",
            ],
        );
    };
    let alice = GitEnv::with_agent(&[]);
    alias(&alice);
    let a = alice.lfs_repo("a", "xet:org/aliased.git");
    let big = random_bytes(3 << 20, 21);
    write_file(&a.join("big.bin"), &big);
    alice.git(&a, &["add", "."]);
    alice.git(&a, &["commit", "-qm", "first"]);
    ok(
        alice.git_logged(&a, &["push", "-q", "origin", "main"]),
        "push",
    );
    assert!(
        alice.agent_log().contains("upload done"),
        "the agent did the upload:\n{}",
        alice.agent_log()
    );
    assert!(
        server.metric(XORB_RECEIVED) > 0.0,
        "xorbs reached the server"
    );
    assert_eq!(
        server.metric(BASIC_RECEIVED),
        0.0,
        "nothing went through basic"
    );

    let bob = GitEnv::with_agent(&[]);
    alias(&bob);
    let b = bob.dir("b");
    ok(
        bob.git_logged(
            &bob.dir("."),
            &["clone", "-q", "xet:org/aliased.git", b.to_str().unwrap()],
        ),
        "clone",
    );
    assert_file_is(&b.join("big.bin"), &big);
    // The filter found the endpoint itself: an alias read as an ssh host would have sent
    // it to git-lfs (which reads aliases) and still cloned.
    let log = bob.agent_log();
    assert!(
        log.contains(" downloaded oid=") && !log.contains("handing"),
        "the filter fetched big.bin itself:\n{log}"
    );
    bob.lfs_fsck(&b);
    assert!(server.metric(XORB_SERVED) > 0.0, "xorbs were served");
    assert_eq!(
        server.metric(BASIC_SERVED),
        0.0,
        "nothing went through basic"
    );
}
