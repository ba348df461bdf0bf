//! The web pages in a real browser: real git and git-lfs push a repository with a README
//! holding hostile HTML, a path with `<`, `&` and `"`, and a safetensors model in two
//! versions; Debian's chromium, driven by playwright-core (tests/web/pages.cjs), opens each
//! kind of page, runs axe-core on it, walks it with the keyboard and signs in with the form.
//! No script of the README may run: every trick in it would call a listener of this test,
//! which must see no connection, nor may a README script call the handler the browser
//! script exposes, even with the pages' Content-Security-Policy switched off. What the
//! server answers without a browser is in web_requests.rs.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::env::{remote_url, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const HOSTILE_PATH: &str = "dir/<b>&\"x\".txt";

/// The npm packages of tests/web (installed by .ci/deps/30-web-test.sh), or a skip (a
/// failure under CI) when they or chromium are missing.
fn browser_kit() -> Option<(PathBuf, PathBuf)> {
    let modules = std::env::var_os("GIT_XET_WEB_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/git-xet/web-test")
        })
        .join("node_modules");
    let chromium = PathBuf::from("/usr/bin/chromium");
    let present = modules.join("playwright-core").is_dir() && chromium.is_file();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "playwright-core or chromium is missing (.ci/deps/30-web-test.sh, 20-chromium.sh)"
        );
        eprintln!("skipping: run .ci/deps/30-web-test.sh and .ci/deps/20-chromium.sh");
        return None;
    }
    Some((modules, chromium))
}

/// A loopback listener counting the connections made to it (what a script that ran would
/// make); stops when dropped.
struct Canary {
    port: u16,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Canary {
    fn start() -> Canary {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (hits, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (h, s) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                h.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut c) = conn {
                    let _ = c.set_read_timeout(Some(std::time::Duration::from_millis(200)));
                    let _ = c.read(&mut [0u8; 1024]);
                }
            }
        });
        Canary {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A README trying every way HTML has to run script or fetch something. Each script calls
/// the page's `gitXetCanary` handler (a binding the browser script exposes, which no
/// Content-Security-Policy stops) and then reaches for the test's listener.
fn hostile_readme(port: u16) -> String {
    let c = format!("http://127.0.0.1:{port}");
    let call = |what: &str| format!("gitXetCanary('{what}');fetch('{c}/{what}')");
    format!(
        "# The model\n\nA test model. See [the data](data/notes.md).\n\n\
         <script>{script}</script>\n\n\
         <img src=\"x\" onerror=\"{onerror}\">\n\n\
         <a id=\"js-link\" href=\"javascript:{js}\">click</a>\n\n\
         <iframe src=\"{c}/iframe\"></iframe>\n\n\
         <iframe srcdoc=\"<script>parent.{srcdoc}</script>\"></iframe>\n\n\
         <svg onload=\"{svg}\"><circle r=\"1\"/></svg>\n\n\
         <style>body{{background:url({c}/css)}}</style>\n\n\
         <link rel=\"stylesheet\" href=\"{c}/link\">\n\n\
         <meta http-equiv=\"refresh\" content=\"0;url={c}/meta\">\n\n\
         <object data=\"{c}/object\"></object><embed src=\"{c}/embed\">\n\n\
         <form action=\"{c}/form\"><input autofocus onfocus=\"{focus}\"></form>\n\n\
         <details open ontoggle=\"{toggle}\">x</details>\n\n\
         <div style=\"width:1px\" onmouseover=\"{hover}\">hover</div>\n\n\
         [markdown link](javascript:{mdlink})\n\n\
         ![remote image]({c}/markdown-image)\n",
        script = call("script"),
        onerror = call("onerror"),
        js = call("js"),
        srcdoc = call("srcdoc"),
        svg = call("svg"),
        focus = call("focus"),
        toggle = call("toggle"),
        hover = call("hover"),
        mdlink = call("mdlink"),
    )
}

/// A safetensors file: the JSON header, then each tensor's bytes in order.
fn safetensors(tensors: &[(&str, &[u64], &[u8])]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (name, shape, bytes) in tensors {
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes.len()]}),
        );
        offset += bytes.len();
    }
    let json = serde_json::Value::Object(header).to_string();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    for (_, _, bytes) in tensors {
        out.extend_from_slice(bytes);
    }
    out
}

pub(crate) fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `path` from the server as a browser asks for it; status and body.
pub(crate) fn page(server: &TestServer, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = http()
        .get(format!("{}{path}", server.url))
        .header("Accept", "text/html");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().unwrap();
    (answer.status().as_u16(), answer.text().unwrap())
}

fn run_browser(modules: &Path, plan: &serde_json::Value) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/pages.cjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(&plan_file)
        .env("NODE_PATH", modules)
        .env("HOME", dir.path())
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "node pages.cjs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script's JSON")
}

/// Pushes `other/secret` and makes it private (the Hub API's settings route); returns its
/// owner's write token.
pub(crate) fn make_private_repo(server: &TestServer, env: &GitEnv, dir: &str) -> String {
    let owner = server.token("other/secret", "write");
    let b = env.lfs_repo(dir, &remote_url(server, "other/secret", "write"));
    write_file(&b.join("secret.bin"), &random_bytes(30_000, 405));
    env.commit_all_and_push(&b, "secret");
    let set = http()
        .put(format!("{}/api/models/other/secret/settings", server.url))
        .bearer_auth(server.token("other/secret", "admin"))
        .json(&serde_json::json!({"private": true}))
        .send()
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().unwrap());
    owner
}

#[test]
fn web_pages_in_a_real_browser() {
    let Some((modules, chromium)) = browser_kit() else {
        return;
    };
    let canary = Canary::start();
    let server = TestServer::start_with(&["--anonymous-read"]);
    let env = GitEnv::plain_lfs();
    let a = env.lfs_repo("a", &remote_url(&server, "org/model", "write"));
    env.git(&a, &["lfs", "track", "*.safetensors"]);
    write_file(&a.join("README.md"), hostile_readme(canary.port).as_bytes());
    write_file(&a.join("data/notes.md"), b"Notes on the data.\n");
    write_file(
        &a.join(HOSTILE_PATH),
        b"<script>alert(1)</script> & \"text\"\nline two\n",
    );
    let (embed, head, bias) = (
        random_bytes(2 << 20, 401),
        random_bytes(1 << 20, 402),
        random_bytes(4096, 403),
    );
    let v1 = safetensors(&[
        ("embed", &[512, 1024], &embed),
        ("head", &[256, 1024], &head),
        ("bias", &[1024], &bias),
    ]);
    write_file(&a.join("model.safetensors"), &v1);
    env.commit_all_and_push(&a, "the first checkpoint");
    // The second checkpoint: `head` retrained, the rest as it was.
    let head2 = random_bytes(1 << 20, 404);
    let v2 = safetensors(&[
        ("embed", &[512, 1024], &embed),
        ("head", &[256, 1024], &head2),
        ("bias", &[1024], &bias),
    ]);
    write_file(&a.join("model.safetensors"), &v2);
    env.commit_all_and_push(&a, "retrain the head <fast> & \"cheap\"");
    let v2_commit = env.git(&a, &["rev-parse", "HEAD"]).trim().to_string();

    // A private repository of another organization.
    make_private_repo(&server, &env, "b");

    // What the server sends, before the browser: escaping, headers, history figures.
    let (status, tree) = page(&server, "/org/model/tree/main/dir", None);
    assert_eq!(status, 200, "{tree}");
    assert!(tree.contains("&lt;b&gt;&amp;&quot;x&quot;.txt"), "{tree}");
    assert!(
        tree.contains("href=\"/org/model/blob/main/dir/%3Cb%3E%26%22x%22.txt\""),
        "{tree}"
    );
    let (_, history) = page(&server, "/org/model/commits/main/model.safetensors", None);
    let cell = |html: &str, class: &str, nth: usize| -> u64 {
        let marker = format!("class=\"num {class}\" data-bytes=\"");
        let at = html
            .match_indices(&marker)
            .nth(nth)
            .unwrap_or_else(|| panic!("{class} #{nth} in {html}"))
            .0
            + marker.len();
        html[at..at + html[at..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    // Newest first: v2 then v1.
    let (v2_new, v2_shared, v1_new, v1_shared) = (
        cell(&history, "new", 0),
        cell(&history, "shared", 0),
        cell(&history, "new", 1),
        cell(&history, "shared", 1),
    );
    assert_eq!((v1_new, v1_shared), (v1.len() as u64, 0), "{history}");
    assert_eq!(v2_new + v2_shared, v2.len() as u64);
    // The unchanged tensors are shared but for the chunks that straddle the retrained one
    // (content-defined chunks are 8 to 128 KiB).
    assert!(
        v2_shared >= (2 << 20) - (256 << 10) && v2_new <= (1 << 20) + (256 << 10),
        "v2: {v2_new} new, {v2_shared} shared"
    );
    // A download link serves ranges: the header length of the safetensors file.
    let ranged = http()
        .get(format!(
            "{}/org/model/resolve/main/model.safetensors",
            server.url
        ))
        .header("Range", "bytes=0-7")
        .send()
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().unwrap().as_ref(), &v2[..8]);

    let shots = std::env::var_os("GIT_XET_WEB_SCREENSHOTS").map(PathBuf::from);
    let pages = serde_json::json!([
        {"name": "repo", "path": "/org/model", "shot": "web-repo.png", "full_page": true},
        {"name": "dir", "path": "/org/model/tree/main/dir", "shot": "web-tree.png"},
        {"name": "text", "path": "/org/model/blob/main/dir/%3Cb%3E%26%22x%22.txt"},
        {"name": "model", "path": "/org/model/blob/main/model.safetensors", "shot": "web-file-safetensors.png", "full_page": true},
        {"name": "history", "path": "/org/model/commits/main/model.safetensors", "shot": "web-file-history.png", "full_page": true},
        {"name": "commits", "path": "/org/model/commits/main", "shot": "web-commits.png"},
        {"name": "commit", "path": format!("/org/model/commit/{v2_commit}"), "shot": "web-commit.png"},
        {"name": "status", "path": "/org/model/status", "shot": "web-status.png", "full_page": true},
        {"name": "server", "path": "/", "shot": "web-server.png", "full_page": true},
        {"name": "org", "path": "/org"},
        {"name": "missing", "path": "/org/nothing-here"},
        {"name": "private", "path": "/other/secret"},
    ]);
    let plan = serde_json::json!({
        "base": server.url,
        "chromium": chromium,
        "shots": shots,
        "pages": pages,
        "without_csp": ["/org/model", "/org/model/blob/main/README.md"],
        "keyboard": {"start": "/org/model", "target_text": "model.safetensors"},
        "session": {"token": server.token("other/secret", "read"), "private_path": "/other/secret", "shot": "web-signed-in.png"},
    });
    let found = run_browser(&modules, &plan);

    let by_name = |name: &str| {
        found["pages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()
            .clone()
    };
    for p in found["pages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let serious: Vec<_> = p["violations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect();
        assert!(serious.is_empty(), "{name}: axe-core found {serious:#?}");
        assert_eq!(p["scripts"], 0, "{name}: a script element");
        assert_eq!(p["handlers"], 0, "{name}: an event handler attribute");
        assert_eq!(p["js_urls"], 0, "{name}: a javascript: URL");
        assert!(
            p["csp"].as_str().unwrap().contains("default-src 'none'"),
            "{name}"
        );
    }
    assert_eq!(found["dialogs"], 0);
    // No README script ran: not with the pages' Content-Security-Policy (which also stops an
    // inline script added to the page), nor with the policy switched off, where an added
    // inline script does run and call the handler, but none of the README's tricks did.
    assert_eq!(found["inline_script_runs_with_csp"], false, "{found:#}");
    let without_csp = found["without_csp"]["pages"].as_array().unwrap();
    assert_eq!(without_csp.len(), 2);
    assert_eq!(without_csp[0]["readme"], true, "{found:#}");
    for p in without_csp {
        assert_eq!(p["inline_script_runs"], true, "{p}");
        assert_eq!(
            (&p["scripts"], &p["handlers"], &p["js_urls"]),
            (&0.into(), &0.into(), &0.into()),
            "{p}"
        );
    }
    let calls: Vec<&serde_json::Value> = found["canary_calls"].as_array().unwrap().iter().collect();
    assert!(
        calls
            .iter()
            .all(|c| c["what"] == "control" && c["csp"] == false),
        "a README script called the handler: {calls:?}"
    );
    assert_eq!(calls.len(), 2, "{calls:?}");
    // Without the policy the README's remote image is the one request that leaves the server
    // (the sanitizer keeps images; the policy's `img-src 'self'` is what stops it).
    let elsewhere = found["without_csp"]["elsewhere"].as_array().unwrap();
    assert!(
        elsewhere.iter().all(
            |r| r["type"] == "image" && r["url"].as_str().unwrap().ends_with("/markdown-image")
        ),
        "{elsewhere:?}"
    );
    assert_eq!(
        canary.hits.load(Ordering::SeqCst),
        0,
        "the README reached out: {found:#}"
    );
    let expect_status = [
        ("repo", 200),
        ("missing", 404),
        ("private", 404),
        ("org", 200),
        ("server", 200),
    ];
    for (name, status) in expect_status {
        assert_eq!(by_name(name)["status"], status, "{name}");
    }
    // A private repository reads as a missing one, to the letter (its name aside).
    let text = |name: &str| by_name(name)["text"].as_str().unwrap().to_string();
    assert_eq!(
        text("private").replace("other/secret", "X"),
        text("missing").replace("org/nothing-here", "X")
    );
    assert!(!text("server").contains("other/secret"));
    assert!(text("repo").contains("A test model.") && text("repo").contains("git xet mount"));
    assert!(
        text("text").contains("<script>alert(1)</script> & \"text\""),
        "{}",
        text("text")
    );
    let model = text("model");
    assert!(
        model.contains("3 tensors") && model.contains("[256, 1024]") && model.contains("XET hash"),
        "{model}"
    );
    assert!(text("commit").contains("retrain the head <fast> & \"cheap\""));
    assert!(text("status").contains("model.safetensors"));

    let k = &found["keyboard"];
    assert_eq!(k["first"], "Skip to content", "{k:#}");
    assert_eq!(k["after_skip"], "main", "{k:#}");
    assert_eq!(k["reached"], true, "{k:#}");
    assert!(
        k["url"]
            .as_str()
            .unwrap()
            .ends_with("/org/model/blob/main/model.safetensors"),
        "{k:#}"
    );
    assert!(
        k["focus_rings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o.as_str().unwrap().starts_with("solid")),
        "{k:#}"
    );

    let s = &found["session"];
    assert_eq!(s["before_status"], 404, "{s:#}");
    assert!(
        s["signed_in"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/other/secret"),
        "{s:#}"
    );
    let signed_in = s["signed_in"]["text"].as_str().unwrap();
    assert!(
        signed_in.contains("secret.bin") && signed_in.contains("Signed in as"),
        "{signed_in}"
    );
    assert_eq!(
        s["signed_in"]["script_cookie"], "",
        "scripts cannot read the session"
    );
    assert!(
        s["signed_in"]["violations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| !matches!(v["impact"].as_str(), Some("serious" | "critical"))),
        "{s:#}"
    );
    let cookie = &s["cookies"][0];
    assert_eq!(
        (
            cookie["name"].as_str(),
            cookie["httpOnly"].as_bool(),
            cookie["secure"].as_bool(),
            cookie["sameSite"].as_str()
        ),
        (
            Some("git_xet_session"),
            Some(true),
            Some(true),
            Some("Strict")
        ),
        "{s:#}"
    );
    assert_eq!(s["after_status"], 404, "signed out: {s:#}");
    assert_eq!(s["cookies_after"], 0);
}
