//! The compatibility matrix: each row is a server setup, run once with plain
//! git-lfs (which must work: it validates the setup) and once with `git xet install
//! --global` in an isolated HOME (which must work too, and move content through XET where
//! the server offers it: the second version moves at most 10% of the file's bytes, counted
//! by the server). Every row clones, pushes a new version and pulls, comparing bytes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::env::{assert_file_is, ok, remote_url, stderr, GitEnv};
use crate::sshd::{self, Sshd};
use crate::support::ports::ClosedPort;
use crate::support::{random_bytes, write_file, TestServer};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";
const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";
const BASIC_RECEIVED: &str = "git_xet_lfs_basic_bytes_received_total";
const BASIC_SERVED: &str = "git_xet_lfs_basic_bytes_served_total";
const SIZE: usize = 8 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    PlainLfs,
    Xet,
}

fn user(setup: Setup, env: &[(String, String)]) -> GitEnv {
    let mut e = match setup {
        Setup::PlainLfs => GitEnv::plain_lfs(),
        Setup::Xet => GitEnv::with_agent(&[]),
    };
    for (k, v) in env {
        e = e.with_env(k, v);
    }
    e
}

/// A server setup: where the repository is, what the users' environment needs.
struct Row<'a> {
    server: &'a TestServer,
    remote: String,
    env: Vec<(String, String)>,
    /// The server offers `xet`: the XET setup must use it.
    offers_xet: bool,
    /// ssh logins so far (ssh rows): the XET clone must log in once, whatever the files.
    logins: Option<&'a dyn Fn() -> usize>,
}

/// What a row's run saw, for comparisons between the setups.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// The faulty clone (if any) succeeded.
    faulty_clone_ok: Option<bool>,
}

/// Clone (with `faulty_lfs_url` as the LFS endpoint when given: the clone's checkout then
/// meets that server, and the objects are brought in afterwards with `git lfs pull`), push
/// of a new version, pull; bytes compared; for XET, what the server moved.
fn run(row: &Row, setup: Setup, faulty_lfs_url: Option<&str>) -> Outcome {
    let alice = user(setup, &row.env);
    let bob = user(setup, &row.env);
    let a = alice.lfs_repo("a", &row.remote);
    let v1 = random_bytes(SIZE, 2001);
    let small = [random_bytes(20_000, 2002), random_bytes(300_000, 2003)];
    write_file(&a.join("model.bin"), &v1);
    write_file(&a.join("s0.bin"), &small[0]);
    write_file(&a.join("s1.bin"), &small[1]);
    alice.commit_all_and_push(&a, "v1");

    let b = bob.dir("b");
    let target = b.to_str().unwrap();
    let mut faulty_clone_ok = None;
    match faulty_lfs_url {
        None => {
            let logins = row.logins.map(|f| f());
            let out = bob.git_logged(&bob.dir("."), &["clone", "-q", &row.remote, target]);
            ok(out, &format!("{setup:?} clone"));
            if let (Setup::Xet, Some(before), Some(now)) = (setup, logins, row.logins) {
                assert_eq!(
                    now() - before,
                    1,
                    "one ssh login for the clone's three files"
                );
            }
            if setup == Setup::Xet && row.offers_xet {
                // The filter itself fetched through XET (git-lfs would use XET too).
                let log = bob.agent_log();
                assert!(!log.contains("handing the object to git-lfs"), "{log}");
            }
        }
        Some(url) => {
            let key = format!("lfs.url={url}");
            let out = bob.git_logged(
                &bob.dir("."),
                &["-c", &key, "clone", "-q", &row.remote, target],
            );
            eprintln!("{setup:?} clone against {url} said:\n{}", stderr(&out));
            faulty_clone_ok = Some(out.status.success());
            if setup == Setup::Xet {
                let log = bob.agent_log();
                assert!(
                    log.contains("handing the object to git-lfs"),
                    "the filter handed the objects to git-lfs:\n{log}"
                );
            }
            // The objects come once the server is reachable (and the files with them).
            bob.git(&b, &["lfs", "pull"]);
            // The failed checkout left the index unwritten: git writes it now.
            bob.git(&b, &["reset", "-q", "--hard", "HEAD"]);
        }
    }
    assert_file_is(&b.join("model.bin"), &v1);
    assert_file_is(&b.join("s0.bin"), &small[0]);
    assert_file_is(&b.join("s1.bin"), &small[1]);

    // v2: 1000 bytes inserted in the middle.
    let mut v2 = v1[..SIZE / 2].to_vec();
    v2.extend_from_slice(&random_bytes(1000, 2004));
    v2.extend_from_slice(&v1[SIZE / 2..]);
    write_file(&a.join("model.bin"), &v2);
    alice.git(&a, &["commit", "-qam", "v2"]);
    let m = |name: &str| row.server.metric(name);
    let (xorb_in, basic_in) = (m(XORB_RECEIVED), m(BASIC_RECEIVED));
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let (pushed_xorb, pushed_basic) = (m(XORB_RECEIVED) - xorb_in, m(BASIC_RECEIVED) - basic_in);
    let (xorb_out, basic_out) = (m(XORB_SERVED), m(BASIC_SERVED));
    bob.git(&b, &["pull", "-q", "origin", "main"]);
    let (pulled_xorb, pulled_basic) = (m(XORB_SERVED) - xorb_out, m(BASIC_SERVED) - basic_out);
    assert_file_is(&b.join("model.bin"), &v2);
    bob.lfs_fsck(&b);
    eprintln!(
        "{setup:?}: v2 push sent {pushed_xorb} xorb + {pushed_basic} basic bytes, pull \
         fetched {pulled_xorb} xorb + {pulled_basic} basic bytes (file {SIZE})"
    );
    if setup == Setup::Xet && row.offers_xet {
        let limit = 0.10 * SIZE as f64;
        assert!(
            pushed_xorb > 0.0 && pushed_xorb <= limit,
            "push of v2: {pushed_xorb}"
        );
        assert!(pulled_xorb <= limit, "pull of v2: {pulled_xorb}");
        assert_eq!(
            (pushed_basic, pulled_basic),
            (0.0, 0.0),
            "nothing through basic"
        );
    } else {
        // git-lfs alone (or a server without xet) moves the whole file through basic.
        assert!(
            pushed_basic >= v2.len() as f64,
            "push of v2: {pushed_basic}"
        );
        assert!(
            pulled_basic >= v2.len() as f64,
            "pull of v2: {pulled_basic}"
        );
    }
    Outcome { faulty_clone_ok }
}

#[test]
fn matrix_ssh_remote_through_git_lfs_authenticate() {
    if !sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = Sshd::start(&server);
    let logins = || sshd.authenticate_calls().len();
    let row = Row {
        server: &server,
        remote: sshd.url("org/ssh"),
        env: vec![("GIT_SSH_COMMAND".into(), sshd.ssh_command())],
        offers_xet: true,
        logins: Some(&logins),
    };
    run(&row, Setup::PlainLfs, None);
    let plain_logins = sshd.authenticate_calls().len();
    assert!(
        plain_logins > 0,
        "git-lfs used git-lfs-authenticate:\n{}",
        sshd.log()
    );

    // A second repository for the XET run, so that its first clone meets nothing cached.
    let row = Row {
        remote: sshd.url("org/ssh2"),
        ..row
    };
    let before = sshd.authenticate_calls().len();
    run(&row, Setup::Xet, None);
    let calls = sshd.authenticate_calls()[before..].to_vec();
    assert!(
        calls.iter().any(|c| c == "org/ssh2 download"),
        "the filter asked over ssh: {calls:?}"
    );
    // No more than one login per command and operation: the clone's filter (three files)
    // and the pull's each ask once, git-lfs's pushes once each.
    let downloads = calls.iter().filter(|c| c.ends_with(" download")).count();
    assert!(downloads <= 2, "one ssh login per command: {calls:?}");
}

#[test]
fn matrix_ssh_status_names_the_path_and_the_authentication() {
    if !sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = Sshd::start(&server);
    let env = GitEnv::with_agent(&[]).with_env("GIT_SSH_COMMAND", &sshd.ssh_command());
    let a = env.lfs_repo("a", &sshd.url("org/st"));
    write_file(&a.join("x.bin"), &random_bytes(1000, 2010));
    env.commit_all_and_push(&a, "x");
    let out = String::from_utf8(ok(env.xet_output(&a, &["status"]), "status").stdout).unwrap();
    assert!(
        out.contains(&format!(
            "ssh git-lfs-authenticate on {}@127.0.0.1:{}",
            sshd.user, sshd.port
        )),
        "{out}"
    );
    assert!(out.contains("transfers:      xet"), "{out}");
    assert!(!out.contains("Basic "), "no credentials shown:\n{out}");

    // A server whose ssh login fails: git-lfs's turn, and why.
    env.git(
        &a,
        &[
            "remote",
            "add",
            "broken",
            &format!("ssh://nobody-here@127.0.0.1:{}/org/st.git", sshd.port),
        ],
    );
    let out = String::from_utf8(
        ok(
            env.xet_output(&a, &["status", "--remote", "broken"]),
            "status",
        )
        .stdout,
    )
    .unwrap();
    assert!(
        out.contains("git-lfs (hand-off: ssh authentication"),
        "{out}"
    );

    // An http LFS server that is down: git-lfs's turn too, and why.
    let closed = ClosedPort::bind();
    let port = closed.port();
    env.git(
        &a,
        &[
            "remote",
            "add",
            "down",
            &format!("http://127.0.0.1:{port}/org/st.git"),
        ],
    );
    let out = String::from_utf8(
        ok(
            env.xet_output(&a, &["status", "--remote", "down"]),
            "status",
        )
        .stdout,
    )
    .unwrap();
    assert!(out.contains("authentication: http credentials"), "{out}");
    assert!(
        out.contains("transfers:      git-lfs (hand-off: LFS batch request failed: "),
        "{out}"
    );
    assert!(out.contains("cannot connect"), "{out}");
}

/// An ssh server without `git-lfs-authenticate` (as one speaking only `git-lfs-transfer`):
/// git-lfs fails (3.3) or tries its guessed https endpoint (newer); with git-xet the filter
/// hands every object to git-lfs, so the clone ends exactly as with git-lfs alone.
#[test]
fn matrix_ssh_server_without_git_lfs_authenticate() {
    if !sshd::available() {
        return;
    }
    let server = TestServer::start();
    let sshd = Sshd::start(&server);
    let mut outcomes = Vec::new();
    for setup in [Setup::PlainLfs, Setup::Xet] {
        let env = vec![("GIT_SSH_COMMAND".to_string(), sshd.ssh_command())];
        let alice = user(setup, &env);
        let repo = format!("org/noauth-{setup:?}");
        let a = alice.lfs_repo("a", &remote_url(&server, &repo, "write"));
        let data = random_bytes(1 << 20, 2020);
        write_file(&a.join("d.bin"), &data);
        alice.commit_all_and_push(&a, "d");
        sshd.remove_authenticate();
        let bob = user(setup, &env);
        let b = bob.dir("b");
        let out = bob.git_logged(
            &bob.dir("."),
            &["clone", "-q", &sshd.url(&repo), b.to_str().unwrap()],
        );
        eprintln!(
            "{setup:?} clone without git-lfs-authenticate said:\n{}",
            stderr(&out)
        );
        let in_tree = std::fs::read(b.join("d.bin")).unwrap_or_default();
        outcomes.push((out.status.success(), in_tree == data));
        if setup == Setup::Xet {
            let log = bob.agent_log();
            assert!(
                log.contains("handing the object to git-lfs: ssh authentication: the server has no git-lfs-authenticate"),
                "{log}"
            );
        }
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "git-xet ends the clone as git-lfs does"
    );
}

#[test]
fn matrix_basic_only_server() {
    let server = TestServer::start_with(&["--basic-only"]);
    let row = Row {
        server: &server,
        remote: remote_url(&server, "org/basic", "write"),
        env: Vec::new(),
        offers_xet: false,
        logins: None,
    };
    run(&row, Setup::PlainLfs, None);
    let row = Row {
        remote: remote_url(&server, "org/basic2", "write"),
        ..row
    };
    run(&row, Setup::Xet, None);
}

/// A Batch API that is down (nothing listens) or answers 500 during the clone: with
/// git-xet, the filter hands every object to git-lfs, so the clone ends as it does with
/// git-lfs alone; once the server answers, everything works.
fn faulty_row(faulty_url: &str, name: &str) {
    let server = TestServer::start();
    let mut outcomes = Vec::new();
    for (setup, repo) in [(Setup::PlainLfs, "plain"), (Setup::Xet, "xet")] {
        let row = Row {
            server: &server,
            remote: remote_url(&server, &format!("org/{name}-{repo}"), "write"),
            env: Vec::new(),
            offers_xet: true,
            logins: None,
        };
        outcomes.push(run(&row, setup, Some(faulty_url)));
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "git-xet ends the clone as git-lfs does"
    );
}

#[test]
fn matrix_server_down() {
    let closed = ClosedPort::bind();
    let port = closed.port();
    faulty_row(
        &format!("http://127.0.0.1:{port}/org/r.git/info/lfs"),
        "down",
    );
}

#[test]
fn matrix_server_answering_500() {
    let failing = Always500::start();
    faulty_row(&format!("{}/org/r.git/info/lfs", failing.url), "e500");
    assert!(failing.requests() > 0, "the clone asked the failing server");
}

/// An HTTP server on 127.0.0.1 that answers every request 500.
struct Always500 {
    url: String,
    stop: Arc<AtomicBool>,
    count: Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Always500 {
    fn start() -> Always500 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (s, c) = (stop.clone(), count.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    c.fetch_add(1, Ordering::SeqCst);
                    let _ = answer_500(conn);
                }
            }
        });
        Always500 {
            url,
            stop,
            count,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// Reads one request (head and `Content-Length` body) and answers 500.
fn answer_500(mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = data.len() - head_end;
    while have < length {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        have += n;
    }
    let body = r#"{"message":"internal error (test)"}"#;
    write!(
        conn,
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

impl Drop for Always500 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
