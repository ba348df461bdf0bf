//! HTTPS served by `git xet server --tls-cert --tls-key` itself (no proxy in front): a CA
//! made by the test (openssl), trusted by git and git-lfs through `http.sslCAInfo` alone.
//! Push with LFS files, clone, and a second version, with plain git-lfs and with git-xet;
//! the pre-receive hook reaches the server while it serves TLS; a client that does not trust
//! the CA is refused.

use crate::compat_harness::{git, git_ok, have, make_ca};
use crate::env::{assert_file_is, GitEnv};
use crate::support::{parse_metric, random_bytes, write_file, TestServer};

/// An HTTP client that trusts only the test CA besides the system's.
fn trusting(ca: &std::path::Path) -> reqwest::blocking::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    reqwest::blocking::Client::builder()
        .add_root_certificate(ca)
        .no_proxy()
        .build()
        .unwrap()
}

fn metric(server: &TestServer, ca: &std::path::Path, name: &str) -> f64 {
    let text = trusting(ca)
        .get(format!("{}/metrics", server.url))
        .send()
        .unwrap()
        .text()
        .unwrap();
    parse_metric(&text, name)
}

fn tls_server(dir: &std::path::Path) -> (TestServer, std::path::PathBuf) {
    let (ca, cert, key) = make_ca(dir);
    let server = TestServer::start_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    (server, ca)
}

fn row(env: GitEnv, via_xet: bool) {
    if !have("openssl") {
        return;
    }
    let (server, ca) = tls_server(&env.dir("tls"));
    let remote = format!(
        "https://x:{}@{}/org/native.git",
        server.token("org/native", "write"),
        server.addr()
    );
    let a = env.dir("a");
    git_ok(&env, &a, &["init", "-q"]);
    git_ok(&env, &a, &["lfs", "track", "*.bin"]);
    git_ok(&env, &a, &["remote", "add", "origin", &remote]);
    let v1 = random_bytes(3 << 20, 231);
    write_file(&a.join("model.bin"), &v1);
    git_ok(&env, &a, &["add", "."]);
    git_ok(&env, &a, &["commit", "-qm", "v1"]);

    // Not trusting the test CA: git refuses the server's certificate, nothing is pushed.
    let refused = git(&env, &a, &["push", "-q", "origin", "main"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "push without the CA succeeded");
    assert!(
        err.to_lowercase().contains("certificate"),
        "a certificate error: {err}"
    );
    assert!(!server.data.join("repos/org/native.git").exists());

    git_ok(
        &env,
        &env.dir("."),
        &["config", "--global", "http.sslCAInfo", ca.to_str().unwrap()],
    );
    git_ok(&env, &a, &["push", "-q", "origin", "main"]);
    let b = env.dir("b");
    git_ok(
        &env,
        &env.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("model.bin"), &v1);

    let mut v2 = v1.clone();
    v2[1 << 20..(1 << 20) + 4096].copy_from_slice(&random_bytes(4096, 232));
    write_file(&a.join("model.bin"), &v2);
    git_ok(&env, &a, &["commit", "-qam", "v2"]);
    git_ok(&env, &a, &["push", "-q", "origin", "main"]);
    git_ok(&env, &b, &["pull", "-q", "origin", "main"]);
    assert_file_is(&b.join("model.bin"), &v2);

    let xorb = metric(&server, &ca, "git_xet_xorb_bytes_received_total");
    let basic = metric(&server, &ca, "git_xet_lfs_basic_bytes_received_total");
    if via_xet {
        assert!(xorb > 0.0 && basic == 0.0, "XET moved it: {xorb} / {basic}");
    } else {
        assert!(basic >= 2.0 * v1.len() as f64, "basic moved it: {basic}");
    }
}

#[test]
fn native_tls_with_the_ca_in_ssl_ca_info_plain_git_lfs() {
    row(GitEnv::plain_lfs(), false);
}

#[test]
fn native_tls_with_the_ca_in_ssl_ca_info_git_xet() {
    row(GitEnv::with_agent(&[]), true);
}

/// The Batch API's hrefs name the https URL the client used.
#[test]
fn native_tls_hands_out_https_hrefs() {
    if !have("openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = tls_server(dir.path());
    let client = trusting(&ca);
    let body = serde_json::json!({
        "operation": "upload",
        "transfers": ["basic"],
        "objects": [{"oid": "ab".repeat(32), "size": 5}],
    });
    let answer: serde_json::Value = client
        .post(format!("{}/org/h.git/info/lfs/objects/batch", server.url))
        .basic_auth("x", Some(server.token("org/h", "write")))
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .body(body.to_string())
        .send()
        .unwrap()
        .json()
        .unwrap();
    let href = answer["objects"][0]["actions"]["upload"]["href"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(href.starts_with(&format!("{}/", server.url)), "{href}");
    // Plain HTTP on the TLS port is not served.
    let plain = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{}/health", server.addr()))
        .send();
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
}

/// Unusable certificate or key files stop the server at start with a message naming them.
#[test]
fn native_tls_refuses_bad_certificate_files() {
    if !have("openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_ca, cert, key) = make_ca(dir.path());
    // client.key belongs to the client certificate make_ca also made, not to server.pem.
    let other_key = dir.path().join("client.key");
    let missing = dir.path().join("missing.pem");
    let cases: [(&std::path::Path, &std::path::Path, &str); 3] = [
        (&cert, &other_key, "does not fit the certificate"),
        (&missing, &key, "cannot read the TLS certificate"),
        (&key, &key, "holds no certificate"),
    ];
    for (cert, key, expected) in cases {
        let out = crate::support::git_xet()
            .args(["server", "--listen", "127.0.0.1:0", "--no-fsync", "--data"])
            .arg(dir.path().join("data"))
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{expected}: {err}"
        );
    }
}

/// A client that connects and never starts the handshake is closed after the header
/// timeout.
#[test]
fn native_tls_handshake_is_bounded_by_the_header_timeout() {
    if !have("openssl") {
        return;
    }
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let (_ca, cert, key) = make_ca(dir.path());
    let server = TestServer::start_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--header-timeout",
        "1",
    ]);
    let mut silent = std::net::TcpStream::connect(server.addr()).unwrap();
    silent
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 16];
    let n = silent.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "closed without a byte");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(900)
            && waited < std::time::Duration::from_secs(5),
        "closed after {waited:?}"
    );
}
