//! The web pages as plain HTTP requests see them: a private repository's pages answer as a
//! missing one's to anonymous readers and to another organization's token; no GET changes
//! anything (not the repository, not the session); every page carries the strict
//! Content-Security-Policy; the session cookie authorizes reads only. The browser's view is
//! web_pages.rs.

use crate::env::{remote_url, GitEnv};
use crate::support::{random_bytes, write_file, TestServer};
use crate::web_pages::{http, make_private_repo, page};

#[test]
fn private_pages_answer_as_missing_ones() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let env = GitEnv::plain_lfs();
    let owner = make_private_repo(&server, &env, "b");
    let elsewhere = server.token("org/model", "read");
    let suffixes = [
        "",
        "/tree/main",
        "/blob/main/secret.bin",
        "/commits/main",
        "/commits/main/secret.bin",
        "/status",
    ];
    for suffix in suffixes {
        for token in [None, Some(elsewhere.as_str())] {
            let (status, body) = page(&server, &format!("/other/secret{suffix}"), token);
            let (missing_status, missing) =
                page(&server, &format!("/other/nothing{suffix}"), token);
            assert_eq!((status, missing_status), (404, 404), "{suffix} {token:?}");
            let anonymized =
                |s: &str, name: &str| s.replace(name, "X").replace(&name.replace('/', "%2F"), "X");
            assert_eq!(
                anonymized(&body, "other/secret"),
                anonymized(&missing, "other/nothing"),
                "{suffix}"
            );
            if !suffix.contains("secret.bin") {
                assert!(!body.contains("secret.bin"), "{suffix}: {body}");
            }
        }
        let (status, body) = page(&server, &format!("/other/secret{suffix}"), Some(&owner));
        assert_eq!(status, 200, "{suffix}: {body}");
    }
    // Nor does the organization's page or the server's list name it.
    for path in ["/other", "/"] {
        let (_, body) = page(&server, path, Some(&elsewhere));
        assert!(!body.contains("other/secret"), "{path}: {body}");
    }
    // A form post from another site's page changes nothing.
    let forged = http()
        .post(format!("{}/-/sign-in", server.url))
        .header("Origin", "http://evil.example")
        .form(&[("token", owner.as_str()), ("next", "/")])
        .send()
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get("set-cookie").is_none());
}

/// Everything a repository's state is read from here: its refs and its locks, as its owner
/// sees them through the Hub and git-lfs APIs.
fn repository_state(server: &TestServer, repo: &str, token: &str) -> (String, String) {
    let get = |url: String| {
        let r = http().get(url).bearer_auth(token).send().unwrap();
        assert_eq!(r.status(), 200);
        r.text().unwrap()
    };
    (
        get(format!("{}/api/models/{repo}/refs", server.url)),
        get(format!("{}/{repo}.git/info/lfs/locks", server.url)),
    )
}

/// The session cookie the sign-in form sets for `token` (a post from the server's origin).
fn sign_in(server: &TestServer, token: &str) -> String {
    let answer = http()
        .post(format!("{}/-/sign-in", server.url))
        .header("Origin", server.url.trim_end_matches('/'))
        .form(&[("token", token), ("next", "/")])
        .send()
        .unwrap();
    assert_eq!(answer.status(), 303);
    let set = answer.headers()["set-cookie"].to_str().unwrap().to_string();
    set.split(';').next().unwrap().to_string()
}

#[test]
fn no_get_changes_anything_and_every_page_is_sent_with_a_strict_policy() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let env = GitEnv::plain_lfs();
    let a = env.lfs_repo("a", &remote_url(&server, "org/model", "write"));
    write_file(&a.join("README.md"), b"# A model\n");
    write_file(&a.join("w.bin"), &random_bytes(20_000, 501));
    env.commit_all_and_push(&a, "first");
    let commit = env.git(&a, &["rev-parse", "HEAD"]).trim().to_string();
    let owner = server.token("org/model", "admin");
    let cookie = sign_in(&server, &owner);
    let before = repository_state(&server, "org/model", &owner);

    let pages = [
        "/".to_string(),
        "/org".into(),
        "/org/model".into(),
        "/org/model/tree/main".into(),
        "/org/model/blob/main/README.md".into(),
        "/org/model/blob/main/w.bin".into(),
        "/org/model/commits/main".into(),
        "/org/model/commits/main/w.bin".into(),
        format!("/org/model/commit/{commit}"),
        "/org/model/status".into(),
        "/-/sign-in".into(),
        // What a GET form or a link would send: nothing signs in, out or changes.
        format!("/-/sign-in?token={owner}&next=/"),
        "/-/sign-out".into(),
        "/org/model/tree/main?delete=1".into(),
    ];
    for path in &pages {
        for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
            let answer = http()
                .request(method.clone(), format!("{}{path}", server.url))
                .header("Accept", "text/html")
                .header("Cookie", &cookie)
                .send()
                .unwrap();
            let status = answer.status().as_u16();
            assert!(
                answer.headers().get("set-cookie").is_none(),
                "{method} {path} set a cookie"
            );
            if path == "/-/sign-out" {
                // A POST-only route.
                assert_eq!(status, 405, "{method} {path}");
                continue;
            }
            assert_eq!(status, 200, "{method} {path}");
            let policy = answer.headers()["content-security-policy"]
                .to_str()
                .unwrap();
            for directive in [
                "default-src 'none'",
                "frame-ancestors 'none'",
                "base-uri 'none'",
            ] {
                assert!(policy.contains(directive), "{path}: {policy}");
            }
            assert!(
                !policy.contains("unsafe") && !policy.contains("script-src"),
                "{path}: {policy}"
            );
            assert_eq!(answer.headers()["x-content-type-options"], "nosniff");
        }
    }
    assert_eq!(repository_state(&server, "org/model", &owner), before);
    // The session survived the GET of the sign-out path.
    let still = http()
        .get(format!("{}/org/model/status", server.url))
        .header("Accept", "text/html")
        .header("Cookie", &cookie)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(still.contains("Sign out"), "{still}");

    // The cookie reads but never writes: a Hub write and a lock with the cookie alone are
    // refused as they are without a credential, and change nothing.
    let branch = http()
        .post(format!(
            "{}/api/models/org/model/branch/from-cookie",
            server.url
        ))
        .header("Cookie", &cookie)
        .json(&serde_json::json!({}))
        .send()
        .unwrap();
    assert_eq!(branch.status(), 401, "{}", branch.text().unwrap());
    let lock = http()
        .post(format!("{}/org/model.git/info/lfs/locks", server.url))
        .header("Cookie", &cookie)
        .header("Content-Type", "application/vnd.git-lfs+json")
        .body(r#"{"path":"w.bin"}"#)
        .send()
        .unwrap();
    assert_eq!(lock.status(), 401);
    assert_eq!(repository_state(&server, "org/model", &owner), before);
}
