//! The Hub's listings of a repository pushed with real git, on the wire: the tree listing
//! pages by 1,000 with a `Link` to the next page (of the same commit, even when the branch
//! moves in between), covering every entry once in git's order; `paths-info` answers many
//! paths at once, with smaller bounds for a caller without a credential; the repository
//! info names the files, with their sizes and LFS pointers only with `blobs=true` (for at most
//! 10,000 files without a credential).

use std::path::{Path, PathBuf};

use reqwest::blocking::Response;
use serde_json::Value;

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::support::{write_file, TestServer};

const REPO: &str = "org/many";

/// Pushes a repository of `flat` files in `flat/`, `nested` files spread over nested
/// directories, names that sort around `/` (`a-c`, `a.txt`, `a/b`), and one LFS file
/// (`w.bin`). Returns the git environment and the working tree.
fn push_many(server: &TestServer, flat: usize, nested: usize) -> (GitEnv, PathBuf) {
    let env = GitEnv::new(Some(&server.token(REPO, "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    for i in 0..flat {
        write_file(
            &work.join(format!("flat/f{i:05}.txt")),
            format!("{i}\n").as_bytes(),
        );
    }
    for i in 0..nested {
        let path = format!("d{}/e{}/n{i}.txt", i % 7, i % 3);
        write_file(&work.join(path), format!("nested {i}\n").as_bytes());
    }
    for name in ["a-c", "a.txt", "a/b", "a b/\u{fc}.txt", "ab"] {
        write_file(&work.join(name), name.as_bytes());
    }
    write_file(
        &work.join("w.bin"),
        &crate::support::random_bytes(5000, 4901),
    );
    // No automatic gc between the commit and git-lfs's pre-push scan of 10,000 objects.
    env.git(&work, &["config", "gc.auto", "0"]);
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "many files"]);
    let remote = format!("{}/{REPO}.git", server.url);
    env.git(&work, &["push", "-q", &remote, "main"]);
    (env, work)
}

/// What `git ls-tree` lists at HEAD of `work` under `path` (recursive: directories too).
fn git_listing(env: &GitEnv, work: &Path, path: &str, recursive: bool) -> Vec<String> {
    let treeish = match path {
        "" => "HEAD".to_string(),
        _ => format!("HEAD:{path}"),
    };
    let mut args = vec!["-c", "core.quotePath=false", "ls-tree", "--name-only"];
    if recursive {
        args.extend(["-r", "-t"]);
    }
    args.push(&treeish);
    env.git(work, &args)
        .lines()
        .map(|l| match path {
            "" => l.to_string(),
            _ => format!("{path}/{l}"),
        })
        .collect()
}

fn get(url: &str, token: Option<&str>) -> Response {
    let mut request = client().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().unwrap()
}

/// The `rel="next"` URL of a `Link` header.
fn next_page(response: &Response) -> Option<String> {
    let link = response.headers().get("link")?.to_str().unwrap();
    let url = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
    Some(url.to_string())
}

/// Every page of a listing from `url` on: the entries of each page.
fn pages(url: &str, token: &str, between: &mut dyn FnMut(usize)) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut next = Some(url.to_string());
    while let Some(url) = next {
        let r = get(&url, Some(token));
        assert_eq!(r.status(), 200, "{url}");
        next = next_page(&r);
        let page: Vec<Value> = r.json().unwrap();
        pages.push(page);
        between(pages.len());
        assert!(pages.len() < 1000, "the pages never end");
    }
    pages
}

fn paths(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tree_listings_page_by_a_thousand_over_one_commit_in_git_order() {
    let server = TestServer::start();
    let (env, work) = push_many(&server, 1200, 1500);
    let token = server.token(REPO, "write");
    let expected = git_listing(&env, &work, "", true);
    assert!(expected.len() > 2000, "{}", expected.len());

    // Recursive from the root; a push to main after the first page changes nothing.
    let url = format!("{}/api/models/{REPO}/tree/main?recursive=true", server.url);
    let mut moved = |page: usize| {
        if page == 1 {
            write_file(&work.join("late.txt"), b"pushed between two pages\n");
            env.git(&work, &["add", "."]);
            env.git(&work, &["commit", "-q", "-m", "late"]);
            env.git(
                &work,
                &["push", "-q", &format!("{}/{REPO}.git", server.url), "main"],
            );
        }
    };
    let listed = pages(&url, &token, &mut moved);
    assert!(listed.iter().all(|p| p.len() <= 1000));
    assert_eq!(listed.len(), expected.len().div_ceil(1000));
    let all: Vec<Value> = listed.concat();
    assert_eq!(paths(&all), expected, "every entry once, in git's order");
    let w = all.iter().find(|e| e["path"] == "w.bin").unwrap();
    assert_eq!(w["lfs"]["size"], 5000, "{w}");
    assert_eq!(w["size"], 5000, "{w}");
    let dir = all.iter().find(|e| e["path"] == "a").unwrap();
    assert_eq!(dir["type"], "directory");
    let file = all.iter().find(|e| e["path"] == "a.txt").unwrap();
    assert_eq!((&file["type"], &file["size"]), (&"file".into(), &5.into()));

    // The direct children of a directory of 1,200 files page too.
    let url = format!("{}/api/models/{REPO}/tree/main/flat", server.url);
    let listed = pages(&url, &token, &mut |_| {});
    assert_eq!(listed.iter().map(Vec::len).collect::<Vec<_>>(), [1000, 200]);
    // (main moved: the expected listing is of the new HEAD, which left flat/ alone.)
    assert_eq!(
        paths(&listed.concat()),
        git_listing(&env, &work, "flat", false)
    );

    // A cursor this server did not make is refused.
    let r = get(&format!("{url}?cursor=%21%21"), Some(&token));
    assert_eq!(r.status(), 400);
}

/// Form-encodes `paths` as `paths-info` takes them.
fn paths_form(paths: &[String]) -> String {
    let mut form = String::new();
    for p in paths {
        let encoded: String = p
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        form.push_str(&format!("paths={encoded}&"));
    }
    form.push_str("expand=false");
    form
}

fn paths_info(server: &TestServer, token: Option<&str>, paths: &[String]) -> (u16, Value) {
    let mut request = client()
        .post(format!("{}/api/models/{REPO}/paths-info/main", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(paths_form(paths));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let r = request.send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

#[test]
fn paths_info_answers_many_paths_within_bounds_smaller_without_a_credential() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let (_env, _work) = push_many(&server, 1100, 0);
    let token = server.token(REPO, "read");
    let wanted =
        |n: usize| -> Vec<String> { (0..n).map(|i| format!("flat/f{i:05}.txt")).collect() };

    // With a token: 1,000 paths (some missing, a directory, the LFS file) in one request.
    let mut asked = wanted(997);
    asked.extend(["nope.txt".into(), "flat".into(), "w.bin".into()]);
    let (status, v) = paths_info(&server, Some(&token), &asked);
    assert_eq!(status, 200, "{v}");
    let found: Vec<Value> = serde_json::from_value(v).unwrap();
    assert_eq!(found.len(), 999, "the missing path left out");
    assert_eq!(found[0]["path"], "flat/f00000.txt");
    assert_eq!(found[0]["size"], 2);
    assert_eq!(found[997]["type"], "directory");
    assert_eq!(found[998]["lfs"]["size"], 5000);
    let (status, _) = paths_info(&server, Some(&token), &wanted(1001));
    assert_eq!(status, 400);

    // Without one: at most 200 paths, 64 KiB of request.
    let (status, v) = paths_info(&server, None, &wanted(200));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v.as_array().unwrap().len(), 200);
    let (status, v) = paths_info(&server, None, &wanted(201));
    assert_eq!(status, 400, "{v}");
    let long: Vec<String> = (0..100)
        .map(|i| format!("{}{i}", "x".repeat(1000)))
        .collect();
    let (status, _) = paths_info(&server, None, &long);
    assert_eq!(status, 413);
    let (status, _) = paths_info(&server, Some(&token), &long);
    assert_eq!(status, 200);
}

#[test]
fn repository_info_names_the_files_and_describes_them_with_blobs() {
    let server = TestServer::start();
    let (env, work) = push_many(&server, 10, 10);
    let token = server.token(REPO, "read");
    let files: Vec<String> = {
        let mut all = git_listing(&env, &work, "", true);
        all.retain(|p| work.join(p).is_file());
        all
    };
    let info = |query: &str| -> Value {
        let r = get(
            &format!("{}/api/models/{REPO}{query}", server.url),
            Some(&token),
        );
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    };
    let plain = info("");
    let names: Vec<&str> = plain["siblings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rfilename"].as_str().unwrap())
        .collect();
    assert_eq!(names, files);
    assert!(
        plain["siblings"][0].get("size").is_none(),
        "{}",
        plain["siblings"][0]
    );
    let detailed = info("?blobs=true");
    let w = detailed["siblings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rfilename"] == "w.bin")
        .unwrap()
        .clone();
    assert_eq!(w["size"], 5000, "{w}");
    assert_eq!(w["lfs"]["size"], 5000, "{w}");
    assert_eq!(detailed["sha"], plain["sha"]);
    // Asked again (the pointers now remembered): the same answer.
    assert_eq!(info("?blobs=true"), detailed);
}

#[test]
fn repository_info_describes_at_most_ten_thousand_files_without_a_credential() {
    let server = TestServer::start_with(&["--anonymous-read"]);
    let (env, work) = push_many(&server, 10_001, 0);
    let token = server.token(REPO, "read");
    let files = {
        let mut all = git_listing(&env, &work, "", true);
        all.retain(|p| work.join(p).is_file());
        all.len()
    };
    assert!(files > 10_000, "{files}");
    let url = |query: &str| format!("{}/api/models/{REPO}{query}", server.url);
    let siblings = |r: Response| -> usize {
        let v: Value = r.json().unwrap();
        v["siblings"].as_array().unwrap().len()
    };

    // Names alone read no blob: anyone may list them all.
    let r = get(&url(""), None);
    assert_eq!(r.status(), 200);
    assert_eq!(siblings(r), files);

    // Described (sizes, pointers) without a token: refused, saying what to do instead.
    let r = get(&url("?blobs=true"), None);
    assert_eq!(r.status(), 400);
    let message = r.text().unwrap();
    assert!(
        message.contains("at most 10000") && message.contains("list_repo_tree"),
        "{message}"
    );

    // With a token: described whole.
    let r = get(&url("?blobs=true"), Some(&token));
    assert_eq!(r.status(), 200);
    assert_eq!(siblings(r), files);
}
