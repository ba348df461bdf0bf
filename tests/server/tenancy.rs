//! What one tenant may see of the others and make them wade through:
//! `/metrics` only for clients on the server's host or on `--metrics-listen`, status-page
//! totals for the token's own scope, locks per repository bounded, and the lock check asking
//! about the paths a push changes.

use crate::common::{client, Cas, Upload};
use crate::support::TestServer;

/// The text of a server log without terminal colours.
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn metrics_answer_local_unforwarded_clients_or_their_own_listener_only() {
    let server = TestServer::start();
    let url = format!("{}/metrics", server.url);
    let r = client().get(&url).send().unwrap();
    assert_eq!(r.status(), 200);
    // Through a proxy on this host, a client elsewhere: refused.
    let r = client()
        .get(&url)
        .header("X-Forwarded-For", "198.51.100.7")
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().unwrap().contains("--metrics-listen"));

    let server = TestServer::start_with(&["--metrics-listen", "127.0.0.1:0"]);
    let r = client()
        .get(format!("{}/metrics", server.url))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404, "the main listener no longer serves them");
    let log = plain(&server.log_text());
    let line = log
        .lines()
        .find(|l| l.contains("metrics listening"))
        .unwrap_or_else(|| panic!("no metrics listener in the log:\n{log}"));
    let at = line
        .split("url=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let text = client()
        .get(format!("{at}/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(text.contains("git_xet_http_requests_total"), "{text}");
}

#[test]
fn the_status_page_totals_only_what_the_token_may_read() {
    let server = TestServer::start();
    // org/b holds a file; a token of org/a must not learn how much.
    let b = Cas::new(&server, "org/b", "write");
    b.upload(&Upload::random(300 << 10, 5, 64));
    let token = server.token("org/a", "read");
    let page = client()
        .get(format!("{}/", server.url))
        .bearer_auth(&token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let total = page
        .split("id=\"usage-total\"")
        .nth(1)
        .expect("a total on the page");
    assert!(
        total.contains("class=\"files\" data-value=\"0\""),
        "org/a's total counts another repository's files: {total}"
    );
    assert!(page.contains("Repositories you may read"), "{page}");
}

#[test]
fn locks_per_repository_are_bounded_and_the_lock_check_asks_about_paths_only() {
    let server = TestServer::start_with(&["--max-locks-per-repo", "20"]);
    let token = server.token("org/l", "write");
    let lock = |path: &str| {
        client()
            .post(format!("{}/org/l.git/info/lfs/locks", server.url))
            .bearer_auth(&token)
            .header("Content-Type", "application/vnd.git-lfs+json")
            .body(format!("{{\"path\":\"{path}\"}}"))
            .send()
            .unwrap()
    };
    for i in 0..20 {
        assert_eq!(lock(&format!("f{i}")).status(), 201);
    }
    let r = lock("one-too-many");
    assert_eq!(r.status(), 507);
    assert!(r.text().unwrap().contains("git lfs unlock"));
    // The hook's question: which of these paths are locked.
    let r = client()
        .post(format!("{}/org/l.git/info/xet/locked-paths", server.url))
        .bearer_auth(&token)
        .body("f3\0not-locked\0f19\0")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().unwrap();
    let mut paths: Vec<&str> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["f19", "f3"]);
}
