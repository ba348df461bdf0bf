//! No existence oracle: whoever may not read a repository gets the same answer (status,
//! headers that matter, body) for a private one and for one that does not exist, on every
//! route that names a repository: the Hub API, git smart HTTP, the git-lfs routes, the
//! pre-receive hook's checks and the web pages. Checked for a caller without a credential
//! (on a server with `--anonymous-read`, where the private repository is the only one it
//! may not read) and for one with a token of another repository; and with real git, whose
//! `ls-remote` and `clone` must fail alike.

use reqwest::blocking::RequestBuilder;
use reqwest::Method;

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::TestServer;

/// The private repository and the missing one: names of one length, so that nothing but
/// the name differs in what the server sends back.
const PRIVATE: &str = "org/secret";
const MISSING: &str = "org/absent";
/// A public repository, to show that the same routes do answer a caller who may read.
const PUBLIC: &str = "org/opened";

const OID: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// One request on a repository: method, path (`{repo}` for its name, `{oid}` for an LFS
/// object id), body, and the `Accept` header of a browser when it asks for a page.
struct Probe {
    method: &'static str,
    path: &'static str,
    body: &'static str,
    accept: Option<&'static str>,
}

const fn probe(method: &'static str, path: &'static str, body: &'static str) -> Probe {
    Probe {
        method,
        path,
        body,
        accept: None,
    }
}

const LFS_BATCH_DOWNLOAD: &str = r#"{"operation":"download","transfers":["basic"],"objects":[{"oid":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":4}]}"#;
const LFS_BATCH_UPLOAD: &str = r#"{"operation":"upload","transfers":["basic"],"objects":[{"oid":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":4}]}"#;

/// Every route family that names a repository.
const PROBES: &[Probe] = &[
    // The Hub API.
    probe("GET", "/api/models/{repo}", ""),
    probe("GET", "/api/models/{repo}/revision/main", ""),
    probe("GET", "/api/models/{repo}/tree/main?recursive=true", ""),
    probe("GET", "/api/models/{repo}/refs", ""),
    probe("GET", "/api/models/{repo}/commits/main", ""),
    probe("GET", "/api/models/{repo}/xet-read-token/main", ""),
    probe("GET", "/api/models/{repo}/xet-write-token/main", ""),
    probe("POST", "/api/models/{repo}/paths-info/main", "paths=a.txt"),
    probe(
        "POST",
        "/api/models/{repo}/preupload/main",
        r#"{"files":[]}"#,
    ),
    probe("POST", "/api/models/{repo}/commit/main", "{}"),
    probe("POST", "/api/models/{repo}/branch/feature", "{}"),
    probe("DELETE", "/api/models/{repo}/branch/feature", ""),
    probe("POST", "/api/models/{repo}/tag/main", r#"{"tag":"v1"}"#),
    probe("DELETE", "/api/models/{repo}/tag/v1", ""),
    probe("PUT", "/api/models/{repo}/settings", r#"{"private":true}"#),
    probe("GET", "/{repo}/resolve/main/a.txt", ""),
    probe("HEAD", "/{repo}/resolve/main/a.txt", ""),
    // git smart HTTP.
    probe("GET", "/{repo}.git/info/refs?service=git-upload-pack", ""),
    probe("GET", "/{repo}.git/info/refs?service=git-receive-pack", ""),
    probe("POST", "/{repo}.git/git-upload-pack", "0000"),
    probe("POST", "/{repo}.git/git-receive-pack", "0000"),
    // git-lfs: the Batch API, locks, basic transfers, verify, the xet token routes.
    probe(
        "POST",
        "/{repo}.git/info/lfs/objects/batch",
        LFS_BATCH_DOWNLOAD,
    ),
    probe(
        "POST",
        "/{repo}.git/info/lfs/objects/batch",
        LFS_BATCH_UPLOAD,
    ),
    probe("GET", "/{repo}.git/info/lfs/locks", ""),
    probe("POST", "/{repo}.git/info/lfs/locks", r#"{"path":"a.bin"}"#),
    probe("POST", "/{repo}.git/info/lfs/locks/verify", "{}"),
    probe("POST", "/{repo}.git/info/lfs/locks/1/unlock", "{}"),
    probe("GET", "/{repo}.git/info/lfs/objects/{oid}", ""),
    probe("PUT", "/{repo}.git/info/lfs/objects/{oid}", "test"),
    probe(
        "POST",
        "/{repo}.git/info/lfs/verify",
        r#"{"oid":"{oid}","size":4}"#,
    ),
    probe("GET", "/{repo}.git/info/lfs/xet-read-token", ""),
    probe("GET", "/{repo}.git/info/lfs/xet-write-token", ""),
    // The pre-receive hook's checks.
    probe("POST", "/{repo}/info/xet/missing-objects", "{}"),
    probe("POST", "/{repo}/info/xet/locked-paths", "{}"),
    // The web pages, for a browser.
    page("/{repo}"),
    page("/{repo}/tree/main"),
    page("/{repo}/tree/main/dir?page=1"),
    page("/{repo}/blob/main/a.txt"),
    page("/{repo}/commits/main"),
    page("/{repo}/commits/main/a.txt"),
    page("/{repo}/commit/0123456789abcdef0123456789abcdef01234567"),
    page("/{repo}/status"),
];

/// A browser's GET of a web page.
const fn page(path: &'static str) -> Probe {
    Probe {
        method: "GET",
        path,
        body: "",
        accept: Some("text/html"),
    }
}

/// What a caller sees of one answer: status, the headers clients act on, and the body,
/// with the repository's name replaced by `REPO`.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

fn send(server: &TestServer, probe: &Probe, repo: &str, token: Option<&str>) -> Seen {
    let path = probe.path.replace("{repo}", repo).replace("{oid}", OID);
    let body = probe.body.replace("{oid}", OID);
    let content_type = if path.contains("/info/lfs/") {
        "application/vnd.git-lfs+json"
    } else if path.contains("paths-info") {
        "application/x-www-form-urlencoded"
    } else {
        "application/json"
    };
    let method = Method::from_bytes(probe.method.as_bytes()).unwrap();
    let mut request: RequestBuilder = client()
        .request(method, format!("{}{path}", server.url))
        .header("content-type", content_type)
        // The server keeps a client's request id: both answers then carry the same.
        .header("x-request-id", "oracle-probe")
        .body(body);
    if let Some(accept) = probe.accept {
        request = request.header("accept", accept);
    }
    if let Some(token) = token {
        request = request.basic_auth("someone", Some(token));
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let mut headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "content-length"))
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).replace(repo, "REPO");
            (name.to_string(), value)
        })
        .collect();
    headers.sort();
    // Pages name the path asked for in their sign-in links, URL-encoded.
    let body = response
        .text()
        .unwrap()
        .replace(repo, "REPO")
        .replace(&repo.replace('/', "%2F"), "REPO");
    Seen {
        status,
        headers,
        body,
    }
}

/// A server with `--anonymous-read` holding a private and a public repository (made with
/// the Hub's `create_repo`, each with a file), and their owners' token.
fn server_with_repositories() -> (TestServer, String) {
    server_started_with(&["--anonymous-read"])
}

/// [`server_with_repositories`] with the server's `flags`.
fn server_started_with(flags: &[&str]) -> (TestServer, String) {
    let server = TestServer::start_with(flags);
    let owner = server.token("org/*", "admin");
    for (repo, private) in [(PRIVATE, true), (PUBLIC, false)] {
        let (org, name) = repo.split_once('/').unwrap();
        let r = client()
            .post(format!("{}/api/repos/create", server.url))
            .bearer_auth(&owner)
            .json(&serde_json::json!({ "name": name, "organization": org, "private": private }))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "create {repo}: {}", r.text().unwrap());
    }
    (server, owner)
}

#[test]
fn a_private_and_a_missing_repository_answer_alike_on_every_route() {
    let (server, _) = server_with_repositories();
    every_route_answers_alike(&server);
}

/// Without `--anonymous-read` every repository is closed to a caller without a credential:
/// the private one, the public one and a missing one alike.
#[test]
fn without_anonymous_reads_every_route_answers_alike_too() {
    let (server, _) = server_started_with(&[]);
    every_route_answers_alike(&server);
}

fn every_route_answers_alike(server: &TestServer) {
    let other = server.token("elsewhere/repo", "admin");
    for probe in PROBES {
        for (who, token) in [
            ("anonymous", None),
            ("another repository's token", Some(&other)),
        ] {
            let private = send(server, probe, PRIVATE, token.map(String::as_str));
            let missing = send(server, probe, MISSING, token.map(String::as_str));
            assert_eq!(
                private, missing,
                "{who}: {} {} tells a private repository from a missing one",
                probe.method, probe.path
            );
            assert!(
                (400..500).contains(&private.status),
                "{who}: {} {} answered {private:?}",
                probe.method,
                probe.path
            );
        }
    }
}

#[test]
fn the_answers_are_what_git_git_lfs_and_huggingface_hub_act_on() {
    let (server, owner) = server_with_repositories();
    let other = server.token("elsewhere/repo", "read");
    let info = probe("GET", "/api/models/{repo}", "");
    let refs = probe("GET", "/{repo}.git/info/refs?service=git-upload-pack", "");
    let batch = probe(
        "POST",
        "/{repo}.git/info/lfs/objects/batch",
        LFS_BATCH_DOWNLOAD,
    );
    let page = page("/{repo}");
    for repo in [PRIVATE, MISSING] {
        // No credential: 401, RepoNotFound (huggingface_hub's typed error); another
        // repository's token: 404, RepoNotFound.
        for (token, status) in [(None, 401), (Some(other.as_str()), 404)] {
            let seen = send(&server, &info, repo, token);
            assert_eq!(seen.status, status, "{seen:?}");
            let code = ("x-error-code".to_string(), "RepoNotFound".to_string());
            assert!(seen.headers.contains(&code), "{seen:?}");
        }
        // git and git-lfs: a challenge without a credential (they then ask their credential
        // helper), not found with another repository's token.
        for probe in [&refs, &batch] {
            let seen = send(&server, probe, repo, None);
            assert_eq!(seen.status, 401, "{}: {seen:?}", probe.path);
            let challenge = (
                "www-authenticate".to_string(),
                "Basic realm=\"git-xet\"".to_string(),
            );
            assert!(
                seen.headers.contains(&challenge),
                "{}: {seen:?}",
                probe.path
            );
            let seen = send(&server, probe, repo, Some(&other));
            assert_eq!(seen.status, 404, "{}: {seen:?}", probe.path);
        }
        // A browser: not found, with the sign-in form offered and no challenge (a browser
        // answers one with a password prompt, then sends that password with every request
        // to the server, other sites' forms included).
        for token in [None, Some(other.as_str())] {
            let seen = send(&server, &page, repo, token);
            assert_eq!(seen.status, 404, "{seen:?}");
            assert!(
                !seen.headers.iter().any(|(n, _)| n == "www-authenticate"),
                "{seen:?}"
            );
            assert!(seen.body.contains("/-/sign-in?next="), "{seen:?}");
        }
    }
    // The private repository is there for its owner, the public one for anyone.
    for probe in [&info, &refs, &batch, &page] {
        assert_eq!(
            send(&server, probe, PRIVATE, Some(&owner)).status,
            200,
            "{}",
            probe.path
        );
        assert_eq!(
            send(&server, probe, PUBLIC, None).status,
            200,
            "{}",
            probe.path
        );
    }
}

#[test]
fn git_fails_alike_on_a_private_and_a_missing_repository() {
    let (server, _) = server_with_repositories();
    let other = server.token("elsewhere/repo", "read");
    for env in [GitEnv::new(None), GitEnv::new(Some(&other))] {
        let dir = env.home.path();
        let failure = |command: &str, repo: &str| {
            let url = format!("{}/{repo}.git", server.url);
            let target = dir.join("clone").display().to_string();
            let err = match command {
                "clone" => env.git_fails(dir, &["clone", "-q", &url, &target]),
                _ => env.git_fails(dir, &["ls-remote", &url]),
            };
            without_request_ids(&err.replace(repo, "REPO"))
        };
        for command in ["ls-remote", "clone"] {
            let private = failure(command, PRIVATE);
            let missing = failure(command, MISSING);
            assert_eq!(private, missing, "git {command}");
            assert!(!private.is_empty());
        }
    }
    // Whereas the public one clones without a credential.
    let anonymous = GitEnv::new(None);
    let target = anonymous.home.path().join("public");
    let url = format!("{}/{PUBLIC}.git", server.url);
    anonymous.git(
        anonymous.home.path(),
        &["clone", "-q", &url, target.to_str().unwrap()],
    );
    assert!(target.join(".gitattributes").is_file());
}

/// `text` without the request ids the server's error bodies end with (each request has its
/// own; git prints them as `remote: (request id ...)`).
fn without_request_ids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("(request id ") {
        out.push_str(&rest[..at]);
        rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}
