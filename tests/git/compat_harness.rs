//! The parts of the HTTP compatibility rows (tests/git/compat_http.rs): a test CA made
//! with openssl, nginx terminating TLS, tinyproxy as a CONNECT proxy, a credential helper
//! script, git run without the environment's CA and proxy variables. Each started process
//! is stopped on drop.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::env::GitEnv;
use crate::support::{http_get, parse_metric, TestServer};

/// The proxy connects to the TLS front from this address, so nginx's log tells requests
/// that came through the proxy from direct ones.
pub const PROXY_SOURCE: &str = "127.0.0.3";

/// CA and proxy variables of the test environment, removed from every command: the rows
/// must trust the test CA through `http.sslCAInfo` alone, and reach no proxy by accident.
pub const UNSET: &[&str] = &[
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
pub fn have(program: &str) -> bool {
    let found = find(program).is_some();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing (installed by .ci/deps/10-proxies.sh)"
        );
        eprintln!("skipping: {program} is not installed (see .ci/deps/10-proxies.sh)");
    }
    found
}

/// `program` on PATH, else in /usr/sbin (nginx's place, off a normal user's PATH).
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn command(program: &str) -> Command {
    Command::new(find(program).unwrap_or_else(|| program.into()))
}

/// A free loopback port for a program that cannot bind port 0 and report it (nginx,
/// tinyproxy): outside the kernel's ephemeral range, see `support::ports`.
pub fn free_port() -> u16 {
    crate::support::ports::candidate()
}

pub fn wait_for_port(port: u16, child: &mut Child, what: &str, log: &Path) {
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
pub struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn openssl(dir: &Path, args: &[&str]) {
    let out = command("openssl")
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
pub fn make_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
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
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    signed_by_ca(dir, "server", "/CN=127.0.0.1", "ext.cnf");
    // A client certificate from the same CA, for the rows that require one (with an
    // extension, so that openssl makes an X.509 v3 certificate: webpki refuses v1).
    std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    signed_by_ca(dir, "client", "/CN=git-xet test client", "client.cnf");
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// A key `NAME.key` and a certificate `NAME.pem` for `subject`, signed by the CA in `dir`
/// with the extensions in `extensions`.
fn signed_by_ca(dir: &Path, name: &str, subject: &str, extensions: &str) {
    let (key, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    openssl(
        dir,
        &[
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", &key, "-out", &csr,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            extensions,
            "-out",
            &pem,
        ],
    );
}

/// nginx terminating TLS on `port` in front of `backend` (`host:port`), logging the client
/// address and user agent of every request.
pub struct TlsFront {
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
    pub fn start(
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
                   log_format who '$remote_addr \"$http_user_agent\" $request_method $uri $status \"$http_x_compat\"';\n\
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
        let mut child = command("nginx")
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
    /// Requests from `agent` (any address) with and without the `X-Compat` header.
    pub fn with_header(&self, agent: &str) -> (usize, usize) {
        let log = std::fs::read_to_string(&self.access_log).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!(" \"{agent}")))
            .collect();
        let with = lines.iter().filter(|l| l.ends_with(" \"yes\"")).count();
        (with, lines.len() - with)
    }

    pub fn access_log(&self) -> &Path {
        &self.access_log
    }

    pub fn count(&self, from: &str, agent: &str) -> usize {
        std::fs::read_to_string(&self.access_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(&format!("{from} \"{agent}")))
            .count()
    }
}

/// tinyproxy on `port`, connecting out from [`PROXY_SOURCE`].
pub struct ConnectProxy {
    _child: Guard,
    log: PathBuf,
}

impl ConnectProxy {
    pub fn start(dir: &Path, port: u16) -> ConnectProxy {
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
        let mut child = command("tinyproxy")
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

    pub fn connects(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("CONNECT "))
            .count()
    }
}

/// Runs git in `env` without the test environment's CA and proxy variables (but with
/// those the row set in `env`).
pub fn git(env: &GitEnv, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = env.command("git", dir);
    for var in UNSET {
        if !env.extra_env.iter().any(|(k, _)| k == var) {
            cmd.env_remove(var);
        }
    }
    cmd.args(args)
        .env("GIT_XET_LOG", env.root.path().join("agent.log"))
        .env("GIT_XET_LOG_LEVEL", "debug")
        .output()
        .expect("run git")
}

pub fn git_ok(env: &GitEnv, dir: &Path, args: &[&str]) -> String {
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

/// A test server and the address it listens on (its `url` may be a proxy's).
pub struct Server {
    pub inner: TestServer,
    pub addr: String,
}

impl Server {
    pub fn plain() -> Server {
        let inner = TestServer::start();
        let addr = inner.addr();
        Server { inner, addr }
    }

    pub fn metric(&self, name: &str) -> f64 {
        parse_metric(&http_get(&format!("http://{}/metrics", self.addr)), name)
    }

    pub fn token(&self, repo: &str, scope: &str) -> String {
        self.inner.token(repo, scope)
    }
}

/// The server behind nginx with the test's CA: `(server, front, ca, front port)`; with
/// `client_certs`, nginx requires a client certificate (`client.pem`/`client.key` in `dir`).
pub fn tls_setup(dir: &Path, client_certs: bool) -> (Server, TlsFront, PathBuf, u16) {
    let (ca, cert, key) = make_ca(dir);
    let port = free_port();
    let inner = TestServer::start_with(&["--public-url", &format!("https://127.0.0.1:{port}")]);
    let addr = inner.listen_addr();
    let client_ca = client_certs.then_some(ca.as_path());
    let front = TlsFront::start(dir, port, &addr, (&cert, &key), client_ca);
    (Server { inner, addr }, front, ca, port)
}

/// A credential helper that answers with the token in `token_file` and records each call
/// as `<action> by <client>` (the nearest of git-xet, git-lfs or git's own transport).
/// A token file that says `once:<token>` gives that token once and then nothing (git-lfs
/// asks again after each rejection for as long as a helper answers).
pub fn write_helper(dir: &Path, token_file: &Path, log: &Path) -> PathBuf {
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

/// `git_xet_http_requests_total` for the Batch API route answered with `status`.
pub fn batch_requests(server: &Server, status: u16) -> f64 {
    let text = http_get(&format!("http://{}/metrics", server.addr));
    text.lines()
        .filter(|l| {
            l.starts_with("git_xet_http_requests_total{")
                && l.contains("route=\"lfs_batch\"")
                && l.contains(&format!("status=\"{status}\""))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}
