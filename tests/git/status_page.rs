//! The status pages in a real browser: real git-lfs pushes LFS files (one with a hostile
//! name, and a second version of a large one) to the server, then headless Debian
//! `chromium` (from `.ci/deps/20-chromium.sh`) loads `/` and a repository's storage tab
//! (`/ORG/REPO/status`); the numbers in the rendered DOM are checked against what was
//! pushed and against the server's `/metrics`, the locks taken through the locking API are
//! listed, and a screenshot is taken. Without `--anonymous-read` the browser gets no page
//! without a token, only the offer to sign in.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::{remote_url, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};

const HOSTILE: &str = "<img src=x onerror=alert(1)> & \"q\".bin";

/// Debian's chromium, or a skip (a failure under CI) when it is not installed.
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing (installed by .ci/deps/20-chromium.sh)"
        );
        eprintln!("skipping: chromium is not installed (see .ci/deps/20-chromium.sh)");
    }
    found
}

/// Runs headless chromium with a fresh profile on `url` with `action` (`--dump-dom` or
/// `--screenshot=...`); returns its stdout.
fn browse(chromium: &Path, url: &str, action: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1100,1500",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(action)
        .arg(url)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {action} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `attr` on the first element whose opening tag contains `marker`.
fn attr_after(dom: &str, marker: &str, attr: &str) -> u64 {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in the page:\n{dom}"));
    let tag_end = dom[at..].find('>').expect("tag end") + at;
    let tag_start = dom[..at].rfind('<').expect("tag start");
    let tag = &dom[tag_start..tag_end];
    let key = format!("{attr}=\"");
    let v = tag
        .find(&key)
        .unwrap_or_else(|| panic!("{attr} not on {tag}"))
        + key.len();
    tag[v..v + tag[v..].find('"').unwrap()]
        .parse()
        .unwrap_or_else(|_| panic!("{attr} of {tag}"))
}

/// The part of the page from `start` to the end of the element block that follows.
fn block<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let at = dom
        .find(start)
        .unwrap_or_else(|| panic!("{start} not in the page"));
    let len = dom[at..].find(end).unwrap_or(dom.len() - at);
    &dom[at..at + len]
}

/// Locks `path` in `repo` through the locking API as `user`; returns the lock's id and
/// `locked_at` as the server answered them.
fn lock_as(server: &TestServer, repo: &str, user: &str, path: &str) -> (String, String) {
    let out = crate::support::git_xet()
        .args([
            "server", "token", "create", "--repo", repo, "--scope", "write",
        ])
        .args(["--user", user, "--data"])
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let answer = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/{repo}.git/info/lfs/locks", server.url))
        .bearer_auth(token)
        .header("Accept", "application/vnd.git-lfs+json")
        .header("Content-Type", "application/vnd.git-lfs+json")
        .body(serde_json::json!({ "path": path }).to_string())
        .send()
        .unwrap();
    assert_eq!(answer.status(), 201, "lock {path}");
    let lock: serde_json::Value = answer.json().unwrap();
    let field = |k: &str| lock["lock"][k].as_str().unwrap().to_string();
    (field("id"), field("locked_at"))
}

#[derive(Debug, PartialEq)]
struct Shown {
    files: u64,
    logical: u64,
    stored: u64,
    ratio: String,
}

/// The usage list `id` as the browser rendered it.
fn usage(dom: &str, id: &str) -> Shown {
    let dl = block(dom, &format!("id=\"{id}\""), "</dl>");
    let ratio = block(dl, "class=\"ratio\">", "</dd>")["class=\"ratio\">".len()..].to_string();
    Shown {
        files: attr_after(dl, "class=\"files\"", "data-value"),
        logical: attr_after(dl, "class=\"logical\"", "data-bytes"),
        stored: attr_after(dl, "class=\"stored\"", "data-bytes"),
        ratio,
    }
}

#[test]
fn status_page_in_headless_chromium_shows_what_was_pushed() {
    let Some(chromium) = chromium() else {
        return;
    };
    let server = TestServer::start_with(&["--anonymous-read"]);
    let env = GitEnv::plain_lfs();
    let remote = remote_url(&server, "org/status", "write");
    let a = env.lfs_repo("a", &remote);
    let model = random_bytes(6 << 20, 301);
    let small = random_bytes(150_000, 302);
    write_file(&a.join("model.bin"), &model);
    write_file(&a.join(HOSTILE), &small);
    write_file(&a.join("README.md"), b"not an LFS file\n");
    env.commit_all_and_push(&a, "v1");
    // A second version of the model: a small edit, stored mostly deduplicated.
    let mut model2 = model.clone();
    model2[3 << 20..(3 << 20) + 8192].copy_from_slice(&random_bytes(8192, 303));
    write_file(&a.join("model.bin"), &model2);
    env.commit_all_and_push(&a, "v2");

    let pushed_logical = (model.len() + model2.len() + small.len()) as u64;
    let head_bytes = (model2.len() + small.len()) as u64;
    let stored_metric = server.metric("git_xet_stored_xorb_bytes") as u64;
    let files_metric = server.metric("git_xet_registered_files") as u64;

    let (model_lock, model_at) = lock_as(&server, "org/status", "alice", "model.bin");
    let (hostile_lock, _) = lock_as(&server, "org/status", "bob<i>", HOSTILE);

    let repo_url = format!("{}/org/status", server.url);
    let status_url = format!("{repo_url}/status");
    let dom = browse(&chromium, &status_url, "--dump-dom");
    // The hostile name is text, never markup; nothing runs.
    assert!(!dom.contains("<img") && !dom.contains("<script"), "{dom}");
    assert!(
        dom.contains("&lt;img src=x onerror=alert(1)&gt; &amp; \"q\".bin"),
        "the hostile name shown as text:\n{dom}"
    );
    // LFS files at HEAD: count, total and each size, as pushed (README.md is not one).
    assert_eq!(attr_after(&dom, "class=\"lfs-count\"", "data-value"), 2);
    assert_eq!(
        attr_after(&dom, "class=\"lfs-bytes\"", "data-bytes"),
        head_bytes
    );
    let files = block(&dom, "<table class=\"files\"", "</table>");
    assert_eq!(files.matches("class=\"lfs-file\"").count(), 2, "{files}");
    assert!(!files.contains("README.md"));
    let model_row = block(files, ">model.bin<", "</tr>");
    assert_eq!(
        attr_after(model_row, "class=\"num size\"", "data-bytes"),
        model2.len() as u64
    );
    assert!(model_row.contains("6.0 MiB") && model_row.contains(">yes<"));
    let small_row = block(files, "&amp; \"q\".bin<", "</tr>");
    assert_eq!(
        attr_after(small_row, "class=\"num size\"", "data-bytes"),
        small.len() as u64
    );
    assert!(small_row.contains("146.5 KiB") && small_row.contains(">yes<"));

    // Stored against logical bytes: as /metrics says (the one repository holds everything),
    // logical as pushed.
    let total = usage(&dom, "usage-org/status");
    let ratio = pushed_logical as f64 / stored_metric as f64;
    assert_eq!(
        total,
        Shown {
            files: files_metric,
            logical: pushed_logical,
            stored: stored_metric,
            ratio: format!("{ratio:.2}×"),
        }
    );
    assert_eq!(files_metric, 3, "three distinct files were pushed");
    assert!(
        ratio > 1.6,
        "the second version was deduplicated: {pushed_logical} logical in {stored_metric} stored"
    );
    // Both pushes, newest first.
    let pushes = block(&dom, "<table class=\"pushes\"", "</table>");
    assert_eq!(pushes.matches("class=\"push\"").count(), 2, "{pushes}");
    assert!(pushes.contains("refs/heads/main"));
    // The locks, by path: owner and time as the locking API answered, names as text.
    let locks = block(&dom, "<table class=\"locks\"", "</table>");
    assert_eq!(locks.matches("class=\"lock\"").count(), 2, "{locks}");
    let row = block(locks, &format!("data-id=\"{model_lock}\""), "</tr>");
    let since = model_at.replacen('T', " ", 1).replace('Z', " UTC");
    assert!(
        row.contains(">model.bin<") && row.contains(">alice<") && row.contains(&since),
        "{row} (locked at {model_at})"
    );
    let row = block(locks, &format!("data-id=\"{hostile_lock}\""), "</tr>");
    assert!(
        row.contains("&lt;img src=x onerror=alert(1)&gt; &amp; \"q\".bin")
            && row.contains(">bob&lt;i&gt;<"),
        "{row}"
    );
    assert!(
        locks.find(&hostile_lock) < locks.find(&model_lock),
        "sorted by path"
    );

    // The overview lists the repository and links to its page.
    let overview = browse(&chromium, &format!("{}/", server.url), "--dump-dom");
    let row = block(&overview, "<a href=\"/org/status\">org/status</a>", "</tr>");
    assert!(row.contains(&format!("{ratio:.2}×")), "{row}");
    assert_eq!(usage(&overview, "usage-total"), total);

    // git still gets git on the same path, and the page is a browser's only.
    let info_refs = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(&repo_url)
        .send()
        .unwrap();
    assert_eq!(info_refs.status(), 404, "no page without Accept: text/html");

    let shot = tempfile::tempdir().unwrap();
    let png = shot.path().join("status.png");
    browse(
        &chromium,
        &status_url,
        &format!("--screenshot={}", png.display()),
    );
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);
    // To refresh docs/status-page.png: GIT_XET_STATUS_SCREENSHOT=docs/status-page.png.
    if let Some(dest) = std::env::var_os("GIT_XET_STATUS_SCREENSHOT") {
        std::fs::write(dest, &bytes).unwrap();
    }
}

#[test]
fn status_page_needs_a_token_without_anonymous_read() {
    let Some(chromium) = chromium() else {
        return;
    };
    let server = TestServer::start();
    let env = GitEnv::plain_lfs();
    let a = env.lfs_repo("a", &remote_url(&server, "org/private", "write"));
    write_file(&a.join("secret.bin"), &random_bytes(50_000, 311));
    env.commit_all_and_push(&a, "s");
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    for path in ["/", "/org/private", "/org/private/status"] {
        let url = format!("{}{path}", server.url);
        // The browser is offered the sign-in form, and nothing of the repository.
        let dom = browse(&chromium, &url, "--dump-dom");
        assert!(
            !dom.contains("secret.bin"),
            "{path} without a token:\n{dom}"
        );
        assert!(dom.contains("href=\"/-/sign-in?next="), "{path}:\n{dom}");
        let answer = http.get(&url).header("Accept", "text/html").send().unwrap();
        assert_eq!(answer.status(), 401, "{path}");
    }
    // With a read token (as HTTP Basic), the repository's storage tab.
    let token = server.token("org/private", "read");
    let url = format!("{}/org/private/status", server.url);
    let with_token = |token: &str| {
        http.get(&url)
            .header("Accept", "text/html")
            .basic_auth("x", Some(token))
            .send()
            .unwrap()
    };
    let answer = with_token(&token);
    assert_eq!(answer.status(), 200);
    assert!(answer.text().unwrap().contains(">secret.bin<"));
    // A token for another repository does not open this one.
    let other = server.token("org/other", "read");
    let answer = with_token(&other);
    assert_eq!(answer.status(), 404);
    assert!(!answer.text().unwrap().contains("secret.bin"));
}
