//! Every Hub route that creates or moves a ref passes the checks a `git push` of the same
//! ref passes: a commit, a branch or a tag may not bring a change to a file another user
//! holds a git-lfs lock on (taken with `git lfs lock`), nor LFS pointers to objects the
//! repository lacks, whether the commit is the request's own or one already stored that no
//! ref reaches (a deleted branch's). A refused commit leaves no object behind, so its id,
//! which its author can compute offline, names nothing a branch could be created from.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::client;
use crate::gitenv::GitEnv;
use crate::hub_commit::{
    bare, bare_git, create_repo, file_line, header, hub_commit, ndjson, rev_parse, stored_objects,
};
use crate::locks::{clone, overwrite, remote, stderr_of, user_env, REPO};
use crate::support::{random_bytes, TestServer};
use crate::tokens::user_token;

/// `studio/game` pushed by alice (a lockable LFS `art.psd`, `notes.txt`); bob's change to
/// `art.psd` pushed as the branch `wip`, then the branch deleted (its commit stays stored,
/// unreachable); then alice's `git lfs lock art.psd`.
struct Locked {
    server: TestServer,
    alice_token: String,
    bob_token: String,
    alice: GitEnv,
    bob: GitEnv,
    bobs: PathBuf,
    wip: String,
}

fn locked() -> Locked {
    let server = TestServer::start();
    let alice_token = user_token(&server, REPO, "write", "alice");
    let bob_token = user_token(&server, REPO, "write", "bob");
    let alice = user_env(&alice_token);
    let bob = user_env(&bob_token);
    let work = alice.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    alice.git(&work, &["init", "-q", "-b", "main"]);
    alice.git(&work, &["lfs", "track", "--lockable", "*.psd"]);
    overwrite(&work.join("art.psd"), &random_bytes(200_000, 11));
    overwrite(&work.join("notes.txt"), b"notes\n");
    alice.git(&work, &["add", "."]);
    alice.git(&work, &["commit", "-q", "-m", "assets"]);
    alice.git(&work, &["remote", "add", "origin", &remote(&server)]);
    alice.git(&work, &["push", "-q", "-u", "origin", "main"]);

    let bobs = clone(&bob, &server, "bob");
    overwrite(&bobs.join("art.psd"), &random_bytes(200_000, 12));
    bob.git(&bobs, &["commit", "-q", "-am", "bob paints"]);
    bob.git(&bobs, &["push", "-q", "origin", "HEAD:refs/heads/wip"]);
    let wip = bob.git(&bobs, &["rev-parse", "HEAD"]).trim().to_string();
    bob.git(&bobs, &["push", "-q", "origin", ":refs/heads/wip"]);
    bob.git(&bobs, &["reset", "-q", "--hard", "origin/main"]);
    let locked = alice.git(&work, &["lfs", "lock", "art.psd"]);
    assert!(locked.contains("Locked art.psd"), "{locked}");
    Locked {
        server,
        alice_token,
        bob_token,
        alice,
        bob,
        bobs,
        wip,
    }
}

/// POSTs `body` (JSON) to `/api/models/studio/game/{route}`: status and answer.
fn post(server: &TestServer, token: &str, route: &str, body: Value) -> (u16, String) {
    let answer = client()
        .post(format!("{}/api/models/{REPO}/{route}", server.url))
        .bearer_auth(token)
        .json(&body)
        .send()
        .unwrap();
    (answer.status().as_u16(), answer.text().unwrap())
}

/// The repository's branches and tags.
fn refs(dir: &Path) -> String {
    let out = bare_git(dir, &["for-each-ref", "--format=%(refname)"]);
    String::from_utf8(out.stdout).unwrap()
}

/// The ids a commit of `tree` on `parent` by `user`, made by the server's Hub API with
/// `message` at a second in `seconds`, can have: what its author computes offline, with git.
fn offline_commit_ids(
    env: &GitEnv,
    work: &Path,
    (tree, parent): (&str, &str),
    user: &str,
    message: &str,
    seconds: std::ops::RangeInclusive<u64>,
) -> Vec<String> {
    // The server's git writes the local time zone's offset (the test's environment).
    let zone = std::process::Command::new("date")
        .arg("+%z")
        .output()
        .unwrap();
    let zone = String::from_utf8(zone.stdout).unwrap().trim().to_string();
    seconds
        .map(|t| {
            let date = format!("@{t} {zone}");
            let email = format!("{user}@git-xet");
            let out = env
                .cmd("git", work)
                .args(["commit-tree", tree, "-p", parent, "-m", message])
                .envs([
                    ("GIT_AUTHOR_NAME", user),
                    ("GIT_COMMITTER_NAME", user),
                    ("GIT_AUTHOR_EMAIL", &email),
                    ("GIT_COMMITTER_EMAIL", &email),
                    ("GIT_AUTHOR_DATE", &date),
                    ("GIT_COMMITTER_DATE", &date),
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect()
}

/// The tree of bob's clone's `main` with `path` (at the top) holding `content`: what a Hub
/// commit of that one file builds.
fn tree_with(env: &GitEnv, work: &Path, path: &str, content: &[u8]) -> String {
    std::fs::write(work.join("scratch"), content).unwrap();
    let blob = env.git(work, &["hash-object", "-w", "scratch"]);
    std::fs::remove_file(work.join("scratch")).unwrap();
    let listing = env.git(work, &["ls-tree", "origin/main"]);
    let mut lines: Vec<String> = listing
        .lines()
        .filter(|l| !l.ends_with(&format!("\t{path}")))
        .map(str::to_string)
        .collect();
    lines.push(format!("100644 blob {}\t{path}", blob.trim()));
    let mut mktree = env.cmd("git", work);
    mktree
        .arg("mktree")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = mktree.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all((lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_refused_hub_commit_leaves_nothing_a_branch_can_be_made_from() {
    let l = locked();
    let dir = bare(&l.server, REPO);
    let main = rev_parse(&dir, "main");
    let before = stored_objects(&dir);
    let paint = b"bob's paint, through the Hub\n";
    let started = now();
    let body = ndjson(&[header("bob paints"), file_line("art.psd", paint)]);
    let (status, answer) = hub_commit(&l.server, &l.bob_token, REPO, "main", body);
    let ended = now();
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer.to_string().contains("art.psd (locked by alice)"),
        "{answer}"
    );
    assert_eq!(rev_parse(&dir, "main"), main);
    assert_eq!(
        stored_objects(&dir),
        before,
        "the refused commit left objects"
    );

    // The attack: the refused commit's id, computed offline, as a branch's starting point.
    let tree = tree_with(&l.bob, &l.bobs, "art.psd", paint);
    let seconds = started.saturating_sub(1)..=ended + 1;
    let ids = offline_commit_ids(
        &l.bob,
        &l.bobs,
        (&tree, &main),
        "bob",
        "bob paints",
        seconds,
    );
    for id in &ids {
        let (status, answer) = post(
            &l.server,
            &l.bob_token,
            "branch/evil",
            json!({"startingPoint": id}),
        );
        assert_ne!(
            status, 200,
            "a branch from the refused commit {id}: {answer}"
        );
    }
    assert_eq!(refs(&dir), "refs/heads/main\n");

    // The offline computation is right: it finds the id of a commit the server accepted.
    let notes = b"bob's notes\n";
    let started = now();
    let body = ndjson(&[header("bob notes"), file_line("notes.txt", notes)]);
    let (status, answer) = hub_commit(&l.server, &l.bob_token, REPO, "main", body);
    let ended = now();
    assert_eq!(status, 200, "{answer}");
    let tree = tree_with(&l.bob, &l.bobs, "notes.txt", notes);
    let seconds = started.saturating_sub(1)..=ended + 1;
    let ids = offline_commit_ids(&l.bob, &l.bobs, (&tree, &main), "bob", "bob notes", seconds);
    let accepted = answer["commitOid"].as_str().unwrap();
    assert!(
        ids.iter().any(|id| id == accepted),
        "{accepted} not in {ids:?}"
    );
}

#[test]
fn hub_branches_tags_and_commits_are_checked_as_a_push_of_them_would_be() {
    let l = locked();
    let (server, bob) = (&l.server, &l.bob_token);
    let dir = bare(server, REPO);
    assert!(
        bare_git(&dir, &["cat-file", "-e", &l.wip]).status.success(),
        "wip is stored"
    );
    let before = stored_objects(&dir);
    // A push of bob's stored commit as a branch is refused by the pre-receive hook...
    let push = [
        "-c",
        "lfs.locksverify=false",
        "push",
        "origin",
        &format!("{}:refs/heads/evil", l.wip),
    ];
    let refused = stderr_of(&l.bob.git_output(&l.bobs, &push));
    assert!(refused.contains("art.psd (locked by alice)"), "{refused}");
    // ... and so is each way of naming it through the Hub API.
    let wip = l.wip.as_str();
    for (route, body) in [
        ("branch/evil".to_string(), json!({"startingPoint": wip})),
        (format!("tag/{wip}"), json!({"tag": "light"})),
        (
            format!("tag/{wip}"),
            json!({"tag": "annotated", "message": "bob's"}),
        ),
    ] {
        let (status, answer) = post(server, bob, &route, body);
        assert_eq!(status, 403, "{route}: {answer}");
        assert!(answer.contains("art.psd (locked by alice)"), "{answer}");
    }
    assert_eq!(refs(&dir), "refs/heads/main\n");
    assert_eq!(
        stored_objects(&dir),
        before,
        "a refused tag left its object"
    );
    // A Hub commit deleting the locked file is refused; one changing another file is not.
    let delete = json!({"key": "deletedFile", "value": {"path": "art.psd"}});
    let (status, answer) = hub_commit(server, bob, REPO, "main", ndjson(&[header("tidy"), delete]));
    assert_eq!(status, 403, "{answer}");
    let body = ndjson(&[header("notes"), file_line("notes.txt", b"bob\n")]);
    assert_eq!(hub_commit(server, bob, REPO, "main", body).0, 200);

    // What changes no locked file goes through: refs on commits some ref reaches, and the
    // deletion of a ref (a push of those passes the hook too).
    assert_eq!(post(server, bob, "branch/ok", json!({})).0, 200);
    assert_eq!(post(server, bob, "tag/main", json!({"tag": "v1"})).0, 200);
    let (status, answer) = post(
        server,
        bob,
        "tag/main",
        json!({"tag": "v2", "message": "m"}),
    );
    assert_eq!(status, 200, "{answer}");
    for route in ["branch/ok", "tag/v1"] {
        let deleted = client()
            .delete(format!("{}/api/models/{REPO}/{route}", server.url))
            .bearer_auth(bob)
            .send()
            .unwrap();
        assert_eq!(deleted.status().as_u16(), 200, "DELETE {route}");
    }

    // The lock's owner may: a branch from bob's stored commit, and a commit of the file.
    let alice = &l.alice_token;
    let (status, answer) = post(
        server,
        alice,
        "branch/from-wip",
        json!({"startingPoint": wip}),
    );
    assert_eq!(status, 200, "{answer}");
    let body = ndjson(&[header("alice paints"), file_line("art.psd", b"alice\n")]);
    assert_eq!(hub_commit(server, alice, REPO, "main", body).0, 200);
    let listed = refs(&dir);
    for r in ["refs/heads/from-wip", "refs/heads/main", "refs/tags/v2"] {
        assert!(listed.contains(r), "{r} missing: {listed}");
    }
    for gone in ["evil", "light", "annotated", "/ok", "v1"] {
        assert!(!listed.contains(gone), "{gone}: {listed}");
    }
    let _ = &l.alice;
}

#[test]
fn a_stored_commit_pointing_to_a_missing_lfs_object_is_refused_as_a_branch_or_tag() {
    let server = TestServer::start();
    let token = server.token("org/*", "write");
    create_repo(&server, &token, "org/pointers");
    let dir = bare(&server, "org/pointers");
    // A commit no ref reaches, holding a pointer to an object the server never stored (as
    // a server that kept refused commits could have left), written with git directly.
    let oid = "cd".repeat(32);
    let pointer =
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 999\n");
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("pointer");
    std::fs::write(&file, &pointer).unwrap();
    let blob =
        String::from_utf8(bare_git(&dir, &["hash-object", "-w", file.to_str().unwrap()]).stdout)
            .unwrap();
    let tree_input = format!("100644 blob {}\tw.bin\n", blob.trim());
    let mut mktree = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&dir)
        .arg("mktree")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    mktree
        .stdin
        .take()
        .unwrap()
        .write_all(tree_input.as_bytes())
        .unwrap();
    let tree = String::from_utf8(mktree.wait_with_output().unwrap().stdout).unwrap();
    let main = rev_parse(&dir, "main");
    let out = bare_git(
        &dir,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@x",
            "commit-tree",
            tree.trim(),
            "-p",
            &main,
            "-m",
            "stale",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let stale = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let post = |route: &str, body: Value| {
        let answer = client()
            .post(format!("{}/api/models/org/pointers/{route}", server.url))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .unwrap();
        (answer.status().as_u16(), answer.text().unwrap())
    };
    for (route, body) in [
        ("branch/stale".to_string(), json!({"startingPoint": stale})),
        (format!("tag/{stale}"), json!({"tag": "stale"})),
        (
            format!("tag/{stale}"),
            json!({"tag": "stale2", "message": "m"}),
        ),
    ] {
        let (status, answer) = post(&route, body);
        assert_eq!(status, 400, "{route}: {answer}");
        assert!(answer.contains(&oid), "{answer}");
    }
    assert_eq!(refs(&dir), "refs/heads/main\n");
    // The same commit on a ref is no longer new: a branch from main is fine.
    assert_eq!(post("branch/fine", json!({})).0, 200);
}

#[test]
fn create_repo_s_first_commit_is_checked_as_a_push_of_it_would_be() {
    // alice locks `.gitattributes` of a repository nobody has pushed to yet (git-lfs asks
    // the locks API, which needs no git history); bob's `create_repo` would commit that file.
    let server = TestServer::start();
    let repo = "studio/fresh";
    let alice = user_env(&user_token(&server, repo, "write", "alice"));
    let bob_token = user_token(&server, repo, "write", "bob");
    let work = alice.home.path().join("fresh");
    std::fs::create_dir_all(&work).unwrap();
    alice.git(&work, &["init", "-q", "-b", "main"]);
    alice.git(
        &work,
        &[
            "remote",
            "add",
            "origin",
            &format!("{}/{repo}.git", server.url),
        ],
    );
    std::fs::write(work.join(".gitattributes"), "").unwrap();
    let locked = alice.git(&work, &["lfs", "lock", ".gitattributes"]);
    assert!(locked.contains("Locked .gitattributes"), "{locked}");
    let answer = client()
        .post(format!("{}/api/repos/create", server.url))
        .bearer_auth(&bob_token)
        .json(&json!({"name": "fresh", "organization": "studio"}))
        .send()
        .unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().unwrap();
    assert_eq!(status, 403, "{text}");
    assert!(text.contains(".gitattributes (locked by alice)"), "{text}");
    let dir = bare(&server, repo);
    assert_eq!(refs(&dir), "", "no branch");
    assert!(!stored_objects(&dir).1, "the quarantine is gone");
    assert!(
        stored_objects(&dir).0.is_empty(),
        "the refused commit left objects"
    );
    // After the unlock, the same request makes the repository's first commit.
    // (git-lfs unlocks only a file without uncommitted changes: the placeholder goes.)
    std::fs::remove_file(work.join(".gitattributes")).unwrap();
    let unlocked = alice.git(&work, &["lfs", "unlock", ".gitattributes"]);
    assert!(unlocked.contains("Unlocked"), "{unlocked}");
    create_repo(&server, &bob_token, repo);
    assert_eq!(refs(&dir), "refs/heads/main\n");
}
