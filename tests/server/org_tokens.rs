//! Tokens for several repositories and whole organizations (`token create --repo 'org/*'`,
//! the rule language of `git xet shell`), on every route that authorizes by repository, and
//! refusals as git and git-lfs print them.

use serde_json::Value;

use crate::common::{client, Cas};
use crate::gitenv::GitEnv;
use crate::support::{git_xet, random_bytes, write_file, TestServer};

fn remote(server: &TestServer, repo: &str) -> String {
    format!("{}/{repo}.git", server.url)
}

/// `token create` with several `--repo` and a user; returns the token.
fn create(server: &TestServer, repos: &[&str], scope: &str, user: &str) -> String {
    let mut cmd = git_xet();
    cmd.args([
        "server", "token", "create", "--scope", scope, "--user", user,
    ]);
    for repo in repos {
        cmd.args(["--repo", repo]);
    }
    let out = cmd.arg("--data").arg(&server.data).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A working repository with one LFS file and one commit, its origin `repo`.
fn work_repo(
    env: &GitEnv,
    server: &TestServer,
    name: &str,
    repo: &str,
    seed: u64,
) -> std::path::PathBuf {
    let work = env.home.path().join(name);
    env.new_repo(&work);
    write_file(&work.join("w.bin"), &random_bytes(50_000, seed));
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", name]);
    env.git(&work, &["remote", "add", "origin", &remote(server, repo)]);
    work
}

fn clone(env: &GitEnv, server: &TestServer, repo: &str, dir: &str) -> std::process::Output {
    let target = env.home.path().join(dir);
    env.git_output(
        env.home.path(),
        &[
            "clone",
            "-q",
            &remote(server, repo),
            target.to_str().unwrap(),
        ],
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_org_token_pushes_to_every_repository_of_its_org_and_nowhere_else() {
    let server = TestServer::start();
    let admin = GitEnv::new(Some(&server.token("other/shared", "write")));
    let shared = work_repo(&admin, &server, "shared", "other/shared", 1);
    admin.git(&shared, &["push", "-q", "origin", "main"]);

    let token = create(
        &server,
        &["studio/*", "other/shared:read"],
        "write",
        "alice",
    );
    let env = GitEnv::new(Some(&token));
    for (i, repo) in ["studio/a", "studio/b"].into_iter().enumerate() {
        let work = work_repo(&env, &server, &format!("w{i}"), repo, 10 + i as u64);
        env.git(&work, &["push", "-q", "origin", "main"]);
        let out = clone(&env, &server, repo, &format!("c{i}"));
        assert!(out.status.success(), "{}", stderr(&out));
        let dir = env.home.path().join(format!("c{i}"));
        assert_eq!(
            std::fs::read(dir.join("w.bin")).unwrap(),
            std::fs::read(work.join("w.bin")).unwrap()
        );
    }
    // Read on the repository its read rule names, and what git prints for a push there.
    assert!(clone(&env, &server, "other/shared", "s").status.success());
    let err = env.git_fails(
        &env.home.path().join("s"),
        &["push", "origin", "HEAD:refs/heads/x"],
    );
    assert!(
        err.contains("remote: this credential has only read access to other/shared: write access needs a rule `other/shared:write` or `other/*:write`"),
        "{err}"
    );
    // Another organization: git says which rule is missing.
    let elsewhere = work_repo(&env, &server, "e", "elsewhere/x", 3);
    let err = env.git_fails(&elsewhere, &["push", "origin", "main"]);
    assert!(
        err.contains("remote: this credential has no access to elsewhere/x: write access needs a rule `elsewhere/x:write` or `elsewhere/*:write` (this credential has studio/*:write, other/shared:read)"),
        "{err}"
    );
    assert!(!server.data.join("repos/elsewhere").exists());
    let out = clone(&env, &server, "other/nope", "n");
    assert!(
        stderr(&out).contains("remote: this credential has no access to other/nope"),
        "{}",
        stderr(&out)
    );

    // git-lfs prints the Batch API's JSON message: git may push to studio/a, LFS to elsewhere
    // may not.
    let work = env.home.path().join("w0");
    let lfs_url = format!("{}/elsewhere/x.git/info/lfs", server.url);
    env.git(&work, &["config", "lfs.url", &lfs_url]);
    write_file(&work.join("more.bin"), &random_bytes(40_000, 4));
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "more"]);
    let err = env.git_fails(&work, &["push", "origin", "main"]);
    assert!(
        err.contains("no access to elsewhere/x: read access needs a rule `elsewhere/x:read`"),
        "{err}"
    );

    // The CAS API acts on one repository: an org token is refused there, saying why.
    let cas = Cas::with_token(&server, &token).reconstruction_raw(&"ab".repeat(32), None);
    assert_eq!(cas.status().as_u16(), 403);
    let body = cas.text().unwrap();
    assert!(
        body.contains("the CAS API needs a token for one repository"),
        "{body}"
    );

    // `token list` shows the rules; the server's page lists the org's repositories, each
    // repository's storage tab who pushed.
    let out = server.admin(&["token", "list"]).output().unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let row = listing
        .lines()
        .find(|l| l.contains(" alice "))
        .expect("alice listed");
    assert!(
        row.contains("studio/*:write,other/shared:read"),
        "{listing}"
    );
    let page = client()
        .get(&server.url)
        .bearer_auth(&token)
        .header("accept", "text/html")
        .send()
        .unwrap()
        .text()
        .unwrap();
    for repo in ["studio/a", "studio/b", "other/shared"] {
        assert!(page.contains(repo), "{repo} not on the page");
    }
    assert!(!page.contains("elsewhere/x"), "{page}");
    let storage = client()
        .get(format!("{}/studio/a/status", server.url))
        .bearer_auth(&token)
        .header("accept", "text/html")
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        storage.contains("<td>alice</td>"),
        "pushes by alice: {storage}"
    );
    assert!(!storage.contains("<td>git-xet</td>"), "{storage}");
}

#[test]
fn a_read_token_pushing_is_told_which_rule_is_missing_in_gits_own_words() {
    let server = TestServer::start();
    let writer = GitEnv::new(Some(&server.token("org/m", "write")));
    let work = work_repo(&writer, &server, "w", "org/m", 5);
    writer.git(&work, &["push", "-q", "origin", "main"]);
    let reader = GitEnv::new(Some(&server.token("org/m", "read")));
    let err = reader.git_fails(&work, &["push", "origin", "HEAD:refs/heads/other"]);
    assert!(
        err.contains("remote: this credential has only read access to org/m: write access needs a rule `org/m:write` or `org/*:write` (this credential has org/m:read)"),
        "{err}"
    );
    assert!(err.contains("403"), "{err}");
}

#[test]
fn hub_create_repo_takes_an_org_wide_write_rule_and_refuses_other_orgs() {
    let server = TestServer::start();
    let create_in = |token: &str, org: &str| {
        client()
            .post(format!("{}/api/repos/create", server.url))
            .bearer_auth(token)
            .json(&serde_json::json!({"name": "new", "organization": org, "type": "model"}))
            .send()
            .unwrap()
    };
    let org = create(&server, &["studio/*"], "write", "alice");
    let made = create_in(&org, "studio");
    assert_eq!(made.status().as_u16(), 200, "{}", made.text().unwrap());
    assert!(server.data.join("repos/studio/new.git/HEAD").is_file());
    assert_eq!(create_in(&org, "other").status().as_u16(), 404);
    assert!(!server.data.join("repos/other").exists());
    let reader = create(&server, &["studio/*"], "read", "bob");
    assert_eq!(create_in(&reader, "studio").status().as_u16(), 403);
    let whoami: Value = client()
        .get(format!("{}/api/whoami-v2", server.url))
        .bearer_auth(&org)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(whoami["name"], "alice");
}

#[test]
fn token_create_bounds_its_rules() {
    let server = TestServer::start();
    let run = |repos: &[String]| {
        let mut cmd = git_xet();
        cmd.args(["server", "token", "create", "--scope", "read"]);
        for repo in repos {
            cmd.args(["--repo", repo]);
        }
        cmd.arg("--data").arg(&server.data).output().unwrap()
    };
    let many: Vec<String> = (0..17).map(|i| format!("org/r{i}")).collect();
    let out = run(&many);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("1 to 16 rules"), "{}", stderr(&out));
    let long: Vec<String> = (0..16)
        .map(|i| format!("{}{i:02}/{}", "o".repeat(98), "n".repeat(100)))
        .collect();
    let out = run(&long);
    assert!(stderr(&out).contains("use fewer rules"), "{}", stderr(&out));
    let out = run(&["org/*/*".to_string()]);
    assert!(
        stderr(&out).contains("--repo \"org/*/*\""),
        "{}",
        stderr(&out)
    );
}
