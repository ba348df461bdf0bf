//! Compatibility with git's HTTP settings: each row runs the same workflow (push, clone,
//! push of a second version, pull; bytes compared) once with plain git-lfs, which
//! validates the setup, and once with `git xet install --global`, which must pass too and
//! move the content through XET. Real components on loopback: nginx terminating TLS with a
//! CA the test makes (openssl), tinyproxy as the CONNECT proxy, a credential helper script.
//! The tools come from `.ci/deps/10-proxies.sh`; without them the rows fail under CI and are
//! skipped (with the reason printed) elsewhere.

use crate::compat_harness::{
    batch_requests, free_port, git, git_ok, have, tls_setup, write_helper, ConnectProxy, Server,
    PROXY_SOURCE,
};
use crate::env::{assert_file_is, GitEnv};
use crate::support::{random_bytes, write_file};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";
const BASIC_RECEIVED: &str = "git_xet_lfs_basic_bytes_received_total";
const FILE_SIZE: usize = 4 << 20;

/// Which client a row runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Client {
    PlainLfs,
    Xet,
}

impl Client {
    fn env(self) -> GitEnv {
        match self {
            Client::PlainLfs => GitEnv::plain_lfs(),
            // Each row compares HTTP behaviour with git-lfs's, so every clone goes to the
            // server: no chunk store serving a second clone locally.
            Client::Xet => GitEnv::with_agent(&[]).with_env("GIT_XET_STORE", "off"),
        }
    }
}

/// The row's workflow against `remote`: push v1, clone, push v2 (a small edit), pull in
/// the clone; bytes compared. Returns the bytes the server took in for v2, through XET
/// and through basic.
fn workflow(server: &Server, env: &GitEnv, remote: &str) -> (f64, f64) {
    let a = env.dir("a");
    git_ok(env, &a, &["init", "-q"]);
    git_ok(env, &a, &["lfs", "track", "*.bin"]);
    git_ok(env, &a, &["remote", "add", "origin", remote]);
    let v1 = random_bytes(FILE_SIZE, 71);
    write_file(&a.join("model.bin"), &v1);
    git_ok(env, &a, &["add", "."]);
    git_ok(env, &a, &["commit", "-qm", "v1"]);
    git_ok(env, &a, &["push", "-q", "origin", "main"]);

    let b = env.dir("b");
    git_ok(
        env,
        &env.dir("."),
        &["clone", "-q", remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("model.bin"), &v1);

    let mut v2 = v1.clone();
    v2[FILE_SIZE / 2..FILE_SIZE / 2 + 4096].copy_from_slice(&random_bytes(4096, 72));
    write_file(&a.join("model.bin"), &v2);
    git_ok(env, &a, &["commit", "-qam", "v2"]);
    let (xorb, basic) = (server.metric(XORB_RECEIVED), server.metric(BASIC_RECEIVED));
    git_ok(env, &a, &["push", "-q", "origin", "main"]);
    let moved = (
        server.metric(XORB_RECEIVED) - xorb,
        server.metric(BASIC_RECEIVED) - basic,
    );

    git_ok(env, &b, &["pull", "-q", "origin", "main"]);
    assert_file_is(&b.join("model.bin"), &v2);
    moved
}

/// What the client moved for the second version, checked per client: plain git-lfs sends
/// it whole through basic; with git-xet, XET moves at most 10% of the file.
fn check_second_version(client: Client, (xorb, basic): (f64, f64)) {
    eprintln!("{client:?}: second version of {FILE_SIZE} bytes moved {xorb} through XET, {basic} through basic");
    match client {
        Client::PlainLfs => assert!(basic >= FILE_SIZE as f64, "basic moved {basic}"),
        Client::Xet => {
            assert_eq!(basic, 0.0, "nothing through basic");
            assert!(
                xorb > 0.0 && xorb <= FILE_SIZE as f64 / 10.0,
                "the second version moved {xorb} bytes through XET (file: {FILE_SIZE})"
            );
        }
    }
}

fn tls_row(client: Client) {
    if !have("nginx") || !have("openssl") {
        return;
    }
    let env = client.env();
    let (server, front, ca, port) = tls_setup(&env.dir("tls"), false);
    if client == Client::Xet {
        // Without git's setting the CA is unknown: a TLS error that says what to set.
        let out = env
            .command(crate::support::git_xet_bin(), &env.dir("."))
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR")
            .args([
                "download",
                "--endpoint",
                &format!("https://127.0.0.1:{port}"),
            ])
            .args(["--token", "t", &"ab".repeat(32), "-o", "out.bin"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("TLS failed") && err.contains("http.sslCAInfo"),
            "{err}"
        );
    }
    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", "http.sslCAInfo", ca.to_str().unwrap()],
    );
    // A header for this server only (http.<url>.extraHeader, matched by git's rules).
    let header_key = format!("http.https://127.0.0.1:{port}/org.extraHeader");
    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", &header_key, "X-Compat: yes"],
    );
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/tls.git",
        server.token("org/tls", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    let (with, without) = front.with_header("git/");
    assert!(with > 0 && without == 0, "git sent the extra header");
    if client == Client::Xet {
        assert!(
            front.count("127.0.0.1", "git-xet/") > 0,
            "git-xet's requests went through the TLS front"
        );
        // The header's URL (/org) matches the Batch API's; the CAS routes (/v1) are
        // outside it and go without.
        let log = std::fs::read_to_string(front.access_log()).unwrap();
        let batch: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"git-xet/") && l.contains("/info/lfs/objects/batch"))
            .collect();
        assert!(
            !batch.is_empty() && batch.iter().all(|l| l.ends_with(" \"yes\"")),
            "git-xet's Batch API requests carry the header:\n{log}"
        );
        assert!(
            log.lines()
                .filter(|l| l.contains("\"git-xet/") && l.contains(" /v1/"))
                .all(|l| l.ends_with(" \"-\"")),
            "no header outside its URL:\n{log}"
        );
    }
}

/// `http.sslVerify = false`: no CA configured, the certificate is not checked.
fn ssl_verify_false_row(client: Client) {
    if !have("nginx") || !have("openssl") {
        return;
    }
    let env = client.env();
    let (server, front, _ca, port) = tls_setup(&env.dir("tls"), false);
    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", "http.sslVerify", "false"],
    );
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/noverify.git",
        server.token("org/noverify", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    if client == Client::Xet {
        assert!(front.count("127.0.0.1", "git-xet/") > 0);
    }
}

#[test]
fn tls_ssl_verify_false_plain_git_lfs() {
    ssl_verify_false_row(Client::PlainLfs);
}

#[test]
fn tls_ssl_verify_false_git_xet() {
    ssl_verify_false_row(Client::Xet);
}

#[test]
fn tls_proxy_with_internal_ca_plain_git_lfs() {
    tls_row(Client::PlainLfs);
}

#[test]
fn tls_proxy_with_internal_ca_git_xet() {
    tls_row(Client::Xet);
}

/// nginx requires a client certificate, given by `http.sslCert` and `http.sslKey`.
fn client_cert_row(client: Client) {
    if !have("nginx") || !have("openssl") {
        return;
    }
    let env = client.env();
    let dir = env.dir("tls");
    let (server, front, ca, port) = tls_setup(&dir, true);
    let global = env.dir(".");
    for (key, value) in [
        ("http.sslCAInfo", ca),
        ("http.sslCert", dir.join("client.pem")),
        ("http.sslKey", dir.join("client.key")),
    ] {
        git_ok(
            &env,
            &global,
            &["config", "--global", key, value.to_str().unwrap()],
        );
    }
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/certs.git",
        server.token("org/certs", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    if client == Client::Xet {
        assert!(front.count("127.0.0.1", "git-xet/") > 0);
    }
}

#[test]
fn tls_client_certificate_plain_git_lfs() {
    client_cert_row(Client::PlainLfs);
}

#[test]
fn tls_client_certificate_git_xet() {
    client_cert_row(Client::Xet);
}

fn connect_proxy_row(client: Client) {
    if !have("nginx") || !have("openssl") || !have("tinyproxy") {
        return;
    }
    let env = client.env();
    let dir = env.dir("proxy");
    let (server, front, ca, port) = tls_setup(&dir, false);
    let proxy_port = free_port();
    let proxy = ConnectProxy::start(&dir, proxy_port);
    let global = env.dir(".");
    git_ok(
        &env,
        &global,
        &["config", "--global", "http.sslCAInfo", ca.to_str().unwrap()],
    );
    git_ok(
        &env,
        &global,
        &[
            "config",
            "--global",
            "http.proxy",
            &format!("127.0.0.1:{proxy_port}"),
        ],
    );
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/proxied.git",
        server.token("org/proxied", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    assert!(proxy.connects() > 0, "tunnels were made through the proxy");
    // git-lfs (Go's proxy rules) never proxies a loopback address, unlike git (curl) and
    // git-xet; its row checks git's own requests.
    let agent = match client {
        Client::PlainLfs => "git/",
        Client::Xet => "git-xet/",
    };
    assert!(
        front.count(PROXY_SOURCE, agent) > 0,
        "{agent} requests came through the proxy"
    );
    assert_eq!(
        front.count("127.0.0.1", agent),
        0,
        "no {agent} request went around the proxy"
    );
}

/// curl's variables when no `http.proxy` is set: `HTTPS_PROXY` is used, and `NO_PROXY`
/// sends the same host around it.
#[test]
fn connect_proxy_from_environment_and_no_proxy_git_xet() {
    if !have("nginx") || !have("openssl") || !have("tinyproxy") {
        return;
    }
    let proxy_port = free_port();
    let env = Client::Xet
        .env()
        .with_env("HTTPS_PROXY", &format!("http://127.0.0.1:{proxy_port}"));
    let dir = env.dir("proxy");
    let (server, front, ca, port) = tls_setup(&dir, false);
    let _proxy = ConnectProxy::start(&dir, proxy_port);
    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", "http.sslCAInfo", ca.to_str().unwrap()],
    );
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/env.git",
        server.token("org/env", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(Client::Xet, moved);
    assert!(
        front.count(PROXY_SOURCE, "git-xet/") > 0,
        "through HTTPS_PROXY"
    );
    assert_eq!(front.count("127.0.0.1", "git-xet/"), 0);

    let env = env.with_env("NO_PROXY", "localhost,127.0.0.1");
    let c = env.dir("c");
    git_ok(
        &env,
        &env.dir("."),
        &["clone", "-q", &remote, c.to_str().unwrap()],
    );
    assert!(
        front.count("127.0.0.1", "git-xet/") > 0,
        "NO_PROXY: git-xet went direct"
    );
}

#[test]
fn connect_proxy_from_http_proxy_plain_git_lfs() {
    connect_proxy_row(Client::PlainLfs);
}

#[test]
fn connect_proxy_from_http_proxy_git_xet() {
    connect_proxy_row(Client::Xet);
}

fn credential_row(client: Client) {
    let env = client.env();
    let server = Server::plain();
    let dir = env.dir("helper");
    let token_file = dir.join("token");
    let log = dir.join("calls.log");
    std::fs::write(&token_file, server.token("org/creds", "write")).unwrap();
    let helper = write_helper(&dir, &token_file, &log);
    git_ok(
        &env,
        &env.dir("."),
        &[
            "config",
            "--global",
            "credential.helper",
            helper.to_str().unwrap(),
        ],
    );
    let remote = format!("http://{}/org/creds.git", server.addr);
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    let calls = std::fs::read_to_string(&log).unwrap();
    let me = match client {
        Client::PlainLfs => "git-lfs",
        Client::Xet => "git-xet",
    };
    assert!(
        calls.contains(&format!("get by {me}")) && calls.contains(&format!("store by {me}")),
        "{me} filled and approved through the helper:\n{calls}"
    );
    assert!(!calls.contains("erase"), "nothing rejected:\n{calls}");

    // A refused password is rejected (the helper's `erase`), and nothing is checked out.
    std::fs::write(&token_file, "once:not-a-token").unwrap();
    std::fs::write(&log, "").unwrap();
    let c = env.dir("c");
    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", "credential.helper", ""],
    );
    // git itself clones with a good token in the URL; only the LFS requests ask the helper.
    let good = format!(
        "http://x:{}@{}/org/creds.git",
        server.token("org/creds", "read"),
        server.addr
    );
    git_ok(
        &env,
        &env.dir("."),
        &["clone", "-q", "--no-checkout", &good, c.to_str().unwrap()],
    );
    git_ok(&env, &c, &["remote", "set-url", "origin", &remote]);
    git_ok(
        &env,
        &c,
        &["config", "credential.helper", helper.to_str().unwrap()],
    );
    let out = git(&env, &c, &["checkout", "-q", "main"]);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains(&format!("erase by {me}")),
        "{me} rejected the refused credentials:\n{calls}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!calls.contains(&format!("store by {me}")), "{calls}");
    let content = std::fs::read(c.join("model.bin")).unwrap_or_default();
    assert_ne!(content.len(), FILE_SIZE, "no content without credentials");
}

#[test]
fn credential_helper_fill_approve_reject_plain_git_lfs() {
    credential_row(Client::PlainLfs);
}

#[test]
fn credential_helper_fill_approve_reject_git_xet() {
    credential_row(Client::Xet);
}

/// `lfs.<url>.access` as git-lfs reads it: `basic` sends the helper's credentials with the
/// first Batch API request (no 401 first), `none` never asks the helper.
#[test]
fn lfs_access_basic_asks_first_and_none_never_asks() {
    let env = Client::Xet.env();
    let server = Server::plain();
    let dir = env.dir("helper");
    let token_file = dir.join("token");
    let log = dir.join("calls.log");
    std::fs::write(&token_file, server.token("org/acc", "write")).unwrap();
    let helper = write_helper(&dir, &token_file, &log);
    let global = env.dir(".");
    git_ok(
        &env,
        &global,
        &[
            "config",
            "--global",
            "credential.helper",
            helper.to_str().unwrap(),
        ],
    );
    let remote = format!("http://{}/org/acc.git", server.addr);
    let a = env.dir("a");
    git_ok(&env, &a, &["init", "-q"]);
    git_ok(&env, &a, &["lfs", "track", "*.bin"]);
    git_ok(&env, &a, &["remote", "add", "origin", &remote]);
    let data = random_bytes(100_000, 73);
    write_file(&a.join("small.bin"), &data);
    git_ok(&env, &a, &["add", "."]);
    git_ok(&env, &a, &["commit", "-qm", "one"]);
    git_ok(&env, &a, &["push", "-q", "origin", "main"]);

    let access_key = format!("lfs.{remote}/info/lfs.access");
    git_ok(&env, &global, &["config", "--global", &access_key, "basic"]);
    std::fs::write(&log, "").unwrap();
    let refused = batch_requests(&server, 401);
    let b = env.dir("b");
    git_ok(
        &env,
        &global,
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("small.bin"), &data);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("get by git-xet"), "{calls}");
    assert!(calls.contains("store by git-xet"), "{calls}");
    assert_eq!(
        batch_requests(&server, 401),
        refused,
        "no Batch API request went without credentials"
    );

    git_ok(&env, &global, &["config", "--global", &access_key, "none"]);
    std::fs::write(&log, "").unwrap();
    let c = env.dir("c");
    git(
        &env,
        &global,
        &["clone", "-q", &remote, c.to_str().unwrap()],
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        !calls.contains("by git-xet"),
        "access = none: git-xet never asks the helper:\n{calls}"
    );
    assert!(
        batch_requests(&server, 401) > refused,
        "the request went without credentials"
    );
}
