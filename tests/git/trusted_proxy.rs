//! `--trusted-proxy`: the scheme and host of the URLs the server hands out follow a
//! trusted proxy's `X-Forwarded-*` / `Forwarded` headers, and never a client's. The trusted
//! proxy is real nginx on loopback connecting out from its own address (127.0.0.3), so the
//! server tells it apart from a client on 127.0.0.1 sending the same headers itself.

use std::path::Path;
use std::process::{Child, Stdio};

use crate::compat_harness::{free_port, git_ok, have, wait_for_port};
use crate::env::{assert_file_is, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const PROXY_SOURCE: &str = "127.0.0.3";

/// nginx on `port` in front of `backend`, telling it the client's host and that the
/// client spoke `proto`; killed on drop.
struct Nginx {
    child: Child,
    access_log: std::path::PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    fn start(dir: &Path, port: u16, backend: &str, proto: &str) -> Nginx {
        let access_log = dir.join("access.log");
        let error_log = dir.join("error.log");
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "master_process off;\n\
                 pid {dir}/nginx.pid;\n\
                 error_log {err} info;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n\
                   access_log {access};\n\
                   client_body_temp_path {dir}/body;\n\
                   proxy_temp_path {dir}/proxy;\n\
                   fastcgi_temp_path {dir}/fastcgi;\n\
                   uwsgi_temp_path {dir}/uwsgi;\n\
                   scgi_temp_path {dir}/scgi;\n\
                   client_max_body_size 0;\n\
                   server {{\n\
                     listen 127.0.0.1:{port};\n\
                     location / {{\n\
                       proxy_pass http://{backend};\n\
                       proxy_bind {PROXY_SOURCE};\n\
                       proxy_http_version 1.1;\n\
                       proxy_set_header Host {backend};\n\
                       proxy_set_header X-Forwarded-Host $http_host;\n\
                       proxy_set_header X-Forwarded-Proto {proto};\n\
                       proxy_request_buffering off;\n\
                       proxy_buffering off;\n\
                     }}\n\
                   }}\n\
                 }}\n",
                dir = dir.display(),
                err = error_log.display(),
                access = access_log.display(),
            ),
        )
        .unwrap();
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx", "/sbin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .unwrap_or("nginx");
        let mut child = std::process::Command::new(nginx)
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
        Nginx { child, access_log }
    }

    fn requests(&self, needle: &str) -> usize {
        std::fs::read_to_string(&self.access_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }
}

/// The upload href of a Batch API answer for one new object, asked at `base` with extra
/// request headers.
fn upload_href(base: &str, token: &str, headers: &[(&str, &str)]) -> String {
    let body = serde_json::json!({
        "operation": "upload",
        "transfers": ["basic"],
        "objects": [{"oid": "cd".repeat(32), "size": 5}],
    });
    let mut request = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}/org/p.git/info/lfs/objects/batch"))
        .basic_auth("x", Some(token))
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let answer: serde_json::Value = request
        .body(body.to_string())
        .send()
        .unwrap()
        .json()
        .unwrap();
    answer["objects"][0]["actions"]["upload"]["href"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string()
}

const FORGED: &[(&str, &str)] = &[
    ("X-Forwarded-Proto", "https"),
    ("X-Forwarded-Host", "evil.example"),
];

#[test]
fn forwarding_headers_count_only_from_a_trusted_proxy() {
    if !have("nginx") {
        return;
    }
    let server = TestServer::start_with(&["--trusted-proxy", &format!("{PROXY_SOURCE}/32")]);
    let token = server.token("org/p", "write");
    // A client on 127.0.0.1 cannot steer the hrefs, with either header form.
    let direct = upload_href(&server.url, &token, FORGED);
    assert!(direct.starts_with(&format!("{}/", server.url)), "{direct}");
    let forwarded = [("Forwarded", "proto=https;host=evil.example")];
    let direct = upload_href(&server.url, &token, &forwarded);
    assert!(direct.starts_with(&format!("{}/", server.url)), "{direct}");

    // Through nginx (from 127.0.0.3), the headers nginx sets are honoured: the href names
    // the proxy as the client addressed it and the scheme nginx said.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let nginx = Nginx::start(dir.path(), port, &server.addr(), "https");
    let proxied = upload_href(&format!("http://127.0.0.1:{port}"), &token, &[]);
    assert!(
        proxied.starts_with(&format!("https://127.0.0.1:{port}/")),
        "{proxied}"
    );
    // nginx logs a request once it is done, which may be after the client has the answer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while nginx.requests("/info/lfs/objects/batch") != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "nginx logged the request"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(nginx);

    // --public-url wins over a trusted proxy.
    let pinned = TestServer::start_with(&[
        "--trusted-proxy",
        PROXY_SOURCE,
        "--public-url",
        "https://xet.example.test",
    ]);
    let backend = pinned.listen_addr();
    let port = free_port();
    let _nginx = Nginx::start(dir.path(), port, &backend, "http");
    let token = pinned.token("org/p", "write");
    let href = upload_href(&format!("http://127.0.0.1:{port}"), &token, &[]);
    assert!(href.starts_with("https://xet.example.test/"), "{href}");
}

/// Real git-lfs pushes and clones through the trusted proxy: the object transfers go to the
/// URLs the server built from nginx's headers, so they pass through nginx too.
#[test]
fn git_lfs_through_a_trusted_proxy_follows_the_forwarded_host() {
    if !have("nginx") {
        return;
    }
    let server = TestServer::start_with(&["--trusted-proxy", PROXY_SOURCE]);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let nginx = Nginx::start(dir.path(), port, &server.addr(), "http");
    let env = GitEnv::plain_lfs();
    let remote = format!(
        "http://x:{}@127.0.0.1:{port}/org/viaproxy.git",
        server.token("org/viaproxy", "write")
    );
    let a = env.dir("a");
    git_ok(&env, &a, &["init", "-q"]);
    git_ok(&env, &a, &["lfs", "track", "*.bin"]);
    git_ok(&env, &a, &["remote", "add", "origin", &remote]);
    let data = random_bytes(1 << 20, 77);
    write_file(&a.join("w.bin"), &data);
    git_ok(&env, &a, &["add", "."]);
    git_ok(&env, &a, &["commit", "-qm", "w"]);
    git_ok(&env, &a, &["push", "-q", "origin", "main"]);
    let b = env.dir("b");
    git_ok(
        &env,
        &env.dir("."),
        &["clone", "-q", &remote, b.to_str().unwrap()],
    );
    assert_file_is(&b.join("w.bin"), &data);
    assert!(
        nginx.requests("PUT /org/viaproxy.git/info/lfs/objects/") == 1
            && nginx.requests("GET /org/viaproxy.git/info/lfs/objects/") == 1,
        "the upload and the download went through nginx:\n{}",
        std::fs::read_to_string(&nginx.access_log).unwrap_or_default()
    );
}
