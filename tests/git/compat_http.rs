//! Compatibility with git's HTTP settings: each row runs the same workflow (push, clone,
//! push of a second version, pull; bytes compared) once with plain git-lfs, which
//! validates the setup, and once with `git xet install --global`, which must pass too and
//! move the content through XET. Real components on loopback: nginx terminating TLS with a
//! CA the test makes (openssl), tinyproxy as the CONNECT proxy, a credential helper script.
//! The tools come from `.ci/deps/proxies.sh`; without them the rows fail under CI and are
//! skipped (with the reason printed) elsewhere.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::env::{assert_file_is, GitEnv};
use crate::support::{http_get, parse_metric, random_bytes, write_file, TestServer};

const XORB_RECEIVED: &str = "git_xet_xorb_bytes_received_total";
const BASIC_RECEIVED: &str = "git_xet_lfs_basic_bytes_received_total";
const FILE_SIZE: usize = 4 << 20;
/// The proxy connects to the TLS front from this address, so nginx's log tells requests
/// that came through the proxy from direct ones.
const PROXY_SOURCE: &str = "127.0.0.3";

/// CA and proxy variables of the test environment, removed from every command: the rows
/// must trust the test CA through `http.sslCAInfo` alone, and reach no proxy by accident.
const UNSET: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "CURL_CA_BUNDLE",
    "GIT_SSL_NO_VERIFY",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// Whether `program` is installed; under CI its absence fails the test.
fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing (installed by .ci/deps/proxies.sh)"
        );
        eprintln!("skipping: {program} is not installed (see .ci/deps/proxies.sh)");
    }
    found
}

/// A free port on loopback (bound, then released for the program that takes it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, child: &mut Child, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{what} exited with {status}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 signed by it: `(ca.pem, server.pem, server.key)`.
fn make_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=git-xet test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
    // A client certificate from the same CA, for the rows that require one (with an
    // extension, so that openssl makes an X.509 v3 certificate: webpki refuses v1).
    std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=git-xet test client",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "client.cnf",
            "-out",
            "client.pem",
        ],
    );
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// nginx terminating TLS on `port` in front of `backend` (`host:port`), logging the client
/// address and user agent of every request.
struct TlsFront {
    _child: Guard,
    access_log: PathBuf,
    error_log: PathBuf,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "nginx access log:\n{}\nnginx error log:\n{}",
                std::fs::read_to_string(&self.access_log).unwrap_or_default(),
                std::fs::read_to_string(&self.error_log).unwrap_or_default()
            );
        }
    }
}

impl TlsFront {
    /// With `client_ca`, clients must present a certificate it signed.
    fn start(
        dir: &Path,
        port: u16,
        backend: &str,
        (cert, key): (&Path, &Path),
        client_ca: Option<&Path>,
    ) -> TlsFront {
        let verify_clients = client_ca
            .map(|ca| {
                format!(
                    "ssl_client_certificate {};\nssl_verify_client on;\n",
                    ca.display()
                )
            })
            .unwrap_or_default();
        let access_log = dir.join("access.log");
        let error_log = dir.join("error.log");
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "master_process off;\n\
                 pid {dir}/nginx.pid;\n\
                 error_log {err} info;\n\
                 events {{ worker_connections 256; }}\n\
                 http {{\n\
                   log_format who '$remote_addr \"$http_user_agent\" $request_method $uri $status';\n\
                   access_log {access} who;\n\
                   client_body_temp_path {dir}/body;\n\
                   proxy_temp_path {dir}/proxy;\n\
                   fastcgi_temp_path {dir}/fastcgi;\n\
                   uwsgi_temp_path {dir}/uwsgi;\n\
                   scgi_temp_path {dir}/scgi;\n\
                   client_max_body_size 0;\n\
                   server {{\n\
                     listen 127.0.0.1:{port} ssl;\n\
                     ssl_certificate {cert};\n\
                     ssl_certificate_key {key};\n\
                     {verify_clients}\
                     location / {{\n\
                       proxy_pass http://{backend};\n\
                       proxy_http_version 1.1;\n\
                       proxy_set_header Host $http_host;\n\
                       proxy_request_buffering off;\n\
                       proxy_buffering off;\n\
                       proxy_read_timeout 300s;\n\
                     }}\n\
                   }}\n\
                 }}\n",
                dir = dir.display(),
                err = error_log.display(),
                access = access_log.display(),
                cert = cert.display(),
                key = key.display(),
            ),
        )
        .unwrap();
        let mut child = Command::new("nginx")
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(&error_log)
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        wait_for_port(port, &mut child, "nginx", &error_log);
        TlsFront {
            _child: Guard(child),
            access_log,
            error_log,
        }
    }

    /// Requests logged whose client address and user agent start as given.
    fn count(&self, from: &str, agent: &str) -> usize {
        std::fs::read_to_string(&self.access_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(&format!("{from} \"{agent}")))
            .count()
    }
}

/// tinyproxy on `port`, connecting out from [`PROXY_SOURCE`].
struct ConnectProxy {
    _child: Guard,
    log: PathBuf,
}

impl ConnectProxy {
    fn start(dir: &Path, port: u16) -> ConnectProxy {
        let log = dir.join("tinyproxy.log");
        let conf = dir.join("tinyproxy.conf");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListen 127.0.0.1\nBind {PROXY_SOURCE}\nTimeout 600\n\
                 LogFile \"{log}\"\nLogLevel Connect\nMaxClients 100\nAllow 127.0.0.1\n\
                 PidFile \"{dir}/tinyproxy.pid\"\n",
                log = log.display(),
                dir = dir.display()
            ),
        )
        .unwrap();
        let mut child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tinyproxy");
        wait_for_port(port, &mut child, "tinyproxy", &log);
        ConnectProxy {
            _child: Guard(child),
            log,
        }
    }

    fn connects(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("CONNECT "))
            .count()
    }
}

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
            Client::Xet => GitEnv::with_agent(&[]),
        }
    }
}

/// Runs git in `env` without the test environment's CA and proxy variables.
fn git(env: &GitEnv, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = env.command("git", dir);
    for var in UNSET {
        cmd.env_remove(var);
    }
    cmd.args(args)
        .env("GIT_XET_LOG", env.root.path().join("agent.log"))
        .env("GIT_XET_LOG_LEVEL", "debug")
        .output()
        .expect("run git")
}

fn git_ok(env: &GitEnv, dir: &Path, args: &[&str]) -> String {
    let out = git(env, dir, args);
    assert!(
        out.status.success(),
        "git {args:?} failed:\n{}{}\nagent log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        env.agent_log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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

/// A test server and the address it listens on (its `url` may be a proxy's).
struct Server {
    inner: TestServer,
    addr: String,
}

impl Server {
    fn plain() -> Server {
        let inner = TestServer::start();
        let addr = inner.addr();
        Server { inner, addr }
    }

    fn metric(&self, name: &str) -> f64 {
        parse_metric(&http_get(&format!("http://{}/metrics", self.addr)), name)
    }

    fn token(&self, repo: &str, scope: &str) -> String {
        self.inner.token(repo, scope)
    }
}

/// The server behind nginx with the test's CA: `(server, front, ca, front port)`; with
/// `client_certs`, nginx requires a client certificate (`client.pem`/`client.key` in `dir`).
fn tls_setup(dir: &Path, client_certs: bool) -> (Server, TlsFront, PathBuf, u16) {
    let (ca, cert, key) = make_ca(dir);
    let port = free_port();
    let addr = format!("127.0.0.1:{}", free_port());
    let inner = TestServer::start_on(
        Some(&addr),
        &["--public-url", &format!("https://127.0.0.1:{port}")],
    );
    let client_ca = client_certs.then_some(ca.as_path());
    let front = TlsFront::start(dir, port, &addr, (&cert, &key), client_ca);
    (Server { inner, addr }, front, ca, port)
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
    let remote = format!(
        "https://x:{}@127.0.0.1:{port}/org/tls.git",
        server.token("org/tls", "write")
    );
    let moved = workflow(&server, &env, &remote);
    check_second_version(client, moved);
    if client == Client::Xet {
        assert!(
            front.count("127.0.0.1", "git-xet/") > 0,
            "git-xet's requests went through the TLS front"
        );
    }
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

#[test]
fn connect_proxy_from_http_proxy_plain_git_lfs() {
    connect_proxy_row(Client::PlainLfs);
}

#[test]
fn connect_proxy_from_http_proxy_git_xet() {
    connect_proxy_row(Client::Xet);
}

/// A credential helper that answers with the token in `token_file` and records each call
/// as `<action> by <client>` (the nearest of git-xet, git-lfs or git's own transport).
/// A token file that says `once:<token>` gives that token once and then nothing (git-lfs
/// asks again after each rejection for as long as a helper answers).
fn write_helper(dir: &Path, token_file: &Path, log: &Path) -> PathBuf {
    let helper = dir.join("helper.sh");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/bash\n\
             cat >/dev/null\n\
             who=git; pid=$PPID\n\
             while [ \"$pid\" -gt 1 ]; do\n\
               comm=$(cat /proc/$pid/comm 2>/dev/null)\n\
               case $comm in git-xet|git-lfs|git-remote-htt*) who=$comm; break;; esac\n\
               pid=$(awk '/^PPid:/ {{print $2}}' /proc/$pid/status 2>/dev/null || echo 1)\n\
             done\n\
             echo \"$1 by $who\" >> '{log}'\n\
             [ \"$1\" = get ] || exit 0\n\
             token=$(cat '{token}')\n\
             case $token in once:*) token=${{token#once:}}; : > '{token}';; esac\n\
             [ -n \"$token\" ] && printf 'username=x\\npassword=%s\\n' \"$token\"\n\
             exit 0\n",
            log = log.display(),
            token = token_file.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    helper
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
