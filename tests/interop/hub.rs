//! The Hugging Face Hub API of `git xet server` driven by the real `huggingface_hub` client
//! (PyPI, pinned in tests/interop/requirements.txt) through tests/interop/py/hub.py: a
//! repository pushed with git (LFS files through the git-xet agent) is downloaded with
//! `hf_hub_download` and `snapshot_download`, LFS files through hf_xet from the CAS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::gitenv::GitEnv;
use crate::support::git_xet_bin;

const HUB_REPO: &str = "org/hub";

/// Runs hub.py `check` with `spec` and `token` as HF_TOKEN; returns stdout.
fn hub_py(
    python: &Path,
    server: &TestServer,
    home: &Path,
    check: &str,
    spec: &serde_json::Value,
    extra_env: &[(&str, &str)],
) -> String {
    let spec_path = home.join(format!("{check}-spec.json"));
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py/hub.py");
    let mut cmd = Command::new(python);
    cmd.arg("-W")
        .arg("ignore::DeprecationWarning")
        .arg(script)
        .arg(check)
        .arg(&spec_path)
        .env("HF_ENDPOINT", server.url.trim_end_matches('/'))
        .env("HF_TOKEN", spec["token"].as_str().unwrap())
        .env("HF_HOME", home.join(format!("hf-home-{check}")))
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        .env_remove("HF_HUB_DISABLE_XET");
    cmd.envs(extra_env.iter().copied());
    let out = cmd.output().expect("run python");
    assert!(
        out.status.success(),
        "hub.py {check} failed:\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository pushed with git through the git-xet agent: an LFS file, small files (one in
/// a directory with a space and a non-ASCII name), a tag `v1` on the first commit, a second
/// commit on `main` and a branch `feat/x`. Returns the spec hub.py reads.
fn pushed_repo(server: &TestServer, env: &GitEnv, work: &Path) -> serde_json::Value {
    let out = env
        .cmd(git_xet_bin().to_str().unwrap(), env.home.path())
        .arg("install")
        .output()
        .unwrap();
    assert!(out.status.success(), "git xet install: {out:?}");
    env.new_repo(work);
    write_file(&work.join("weights.bin"), &random_bytes(3_000_000, 340));
    write_file(&work.join("config.json"), b"{\"layers\": 2}\n");
    write_file(&work.join("sub/a.txt"), b"hello\n");
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", "first"]);
    env.git(work, &["tag", "v1"]);
    let v1 = env.git(work, &["rev-parse", "HEAD"]).trim().to_string();
    write_file(&work.join("sub/a.txt"), b"hello again\n");
    write_file(&work.join("dir with space/\u{fc}.txt"), b"umlaut\n");
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", "second"]);
    let main = env.git(work, &["rev-parse", "HEAD"]).trim().to_string();
    env.git(work, &["checkout", "-q", "-b", "feat/x"]);
    write_file(&work.join("feat.txt"), b"feature\n");
    env.git(work, &["add", "."]);
    env.git(work, &["commit", "-q", "-m", "feature"]);
    let feat = env.git(work, &["rev-parse", "HEAD"]).trim().to_string();
    env.git(work, &["checkout", "-q", "main"]);
    let remote = format!("{}/{HUB_REPO}.git", server.url);
    env.git(work, &["remote", "add", "origin", &remote]);
    env.git(work, &["push", "-q", "origin", "main", "feat/x", "v1"]);
    // The LFS file went through the agent as XET, not as a basic upload.
    assert!(server.metric("git_xet_xorb_bytes_received_total") > 0.0);
    assert_eq!(server.metric("git_xet_lfs_basic_bytes_received_total"), 0.0);

    let mut files = BTreeMap::new();
    for path in [
        ".gitattributes",
        "weights.bin",
        "config.json",
        "sub/a.txt",
        "dir with space/\u{fc}.txt",
    ] {
        files.insert(path, work.join(path));
    }
    serde_json::json!({
        "repo": HUB_REPO,
        "files": files,
        "lfs_file": "weights.bin",
        "commits": { "main": main, "v1": v1, "feat/x": feat },
        "v1_a": "hello\n",
    })
}

/// The venv's python if it has `huggingface_hub` too: missing, a failure under CI (`CI`
/// set), else a skip with the reason printed.
fn hub_python() -> Option<PathBuf> {
    let python = python()?;
    let works = Command::new(&python)
        .args(["-c", "import huggingface_hub"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(python);
    }
    let why = format!(
        "{} has no huggingface_hub (run .ci/deps/10-hf-xet.sh, or pip install the pin of tests/interop/requirements.txt)",
        python.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("skipping: {why}");
    None
}

fn hub_env() -> Option<(PathBuf, TestServer, GitEnv)> {
    let python = hub_python()?;
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token(HUB_REPO, "write")));
    Some((python, server, env))
}

#[test]
fn hub_client_downloads_a_repository_pushed_with_git() {
    let Some((python, server, env)) = hub_env() else {
        return;
    };
    let home = env.home.path().to_path_buf();
    let mut spec = pushed_repo(&server, &env, &home.join("work"));
    spec["token"] = server.token(HUB_REPO, "read").into();
    spec["local_dir"] = home.join("local").display().to_string().into();

    hub_py(&python, &server, &home, "download", &spec, &[]);
    // The LFS file came from the CAS through hf_xet: reconstructions asked, no resolve GET
    // of it but the script's own range request (206).
    let log = server.log_text();
    assert!(
        server
            .metrics()
            .contains("route=\"reconstruction_v2\",status=\"200\""),
        "{log}"
    );
    assert!(
        !log.contains("method=GET path=/org/hub/resolve/main/weights.bin status=200"),
        "{log}"
    );

    // Without hf_xet the same file comes through the resolve GET, streamed from XET.
    spec["local_dir"] = home.join("local-plain").display().to_string().into();
    let plain_home = home.join("plain");
    std::fs::create_dir_all(&plain_home).unwrap();
    hub_py(
        &python,
        &server,
        &plain_home,
        "download",
        &spec,
        &[("HF_HUB_DISABLE_XET", "1")],
    );
    assert!(server
        .log_text()
        .contains("method=GET path=/org/hub/resolve/main/weights.bin status=200"));
}

#[test]
fn hub_routes_answer_a_token_of_another_repository_as_a_missing_repository() {
    let Some((python, server, env)) = hub_env() else {
        return;
    };
    let home = env.home.path().to_path_buf();
    let mut spec = pushed_repo(&server, &env, &home.join("work"));
    spec["token"] = server.token(HUB_REPO, "read").into();
    // An admin token of another repository, which exists too.
    spec["other_token"] = server.token("org/other", "admin").into();
    spec["write_routes"] = serde_json::json!([
        ["POST", format!("/api/models/{HUB_REPO}/preupload/main")],
        ["POST", format!("/api/models/{HUB_REPO}/commit/main")],
        [
            "GET",
            format!("/api/models/{HUB_REPO}/xet-write-token/main")
        ],
    ]);
    // A dataset of the same name, on every dataset route.
    let data = format!("datasets/{HUB_REPO}");
    spec["dataset"] = serde_json::json!({
        "repo": HUB_REPO,
        "token": server.token(&data, "write"),
        "routes": [
            ["GET", format!("/api/datasets/{HUB_REPO}")],
            ["GET", format!("/api/datasets/{HUB_REPO}/revision/main")],
            ["GET", format!("/api/datasets/{HUB_REPO}/tree/main?recursive=true")],
            ["GET", format!("/api/datasets/{HUB_REPO}/refs")],
            ["GET", format!("/api/datasets/{HUB_REPO}/commits/main")],
            ["GET", format!("/api/datasets/{HUB_REPO}/xet-read-token/{{sha}}")],
            ["GET", format!("/api/datasets/{HUB_REPO}/xet-write-token/main")],
            ["POST", format!("/api/datasets/{HUB_REPO}/preupload/main")],
            ["POST", format!("/api/datasets/{HUB_REPO}/commit/main")],
            ["HEAD", format!("/datasets/{HUB_REPO}/resolve/main/sub/a.txt")],
            ["GET", format!("/datasets/{HUB_REPO}/resolve/main/sub/a.txt")],
        ],
    });
    let heads = server
        .data
        .join(format!("repos/{HUB_REPO}.git/refs/heads/main"));
    let before = std::fs::read_to_string(&heads).unwrap();
    let out = hub_py(&python, &server, &home, "isolation", &spec, &[]);
    let seen: Vec<String> = serde_json::from_str(&out).unwrap();
    assert!(seen.len() >= 46, "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(&heads).unwrap(),
        before,
        "nothing committed"
    );
}

/// A clone of `repo` by `env`'s git; every file of `files` (repository path -> local file)
/// checked out bit-exact, LFS objects checked by `git lfs fsck`.
fn clone_matches(env: &GitEnv, server: &TestServer, repo: &str, files: &serde_json::Value) {
    let clone = env.home.path().join("clone");
    let remote = format!("{}/{repo}.git", server.url);
    env.git(
        env.home.path(),
        &["clone", "-q", &remote, clone.to_str().unwrap()],
    );
    for (path, local) in files.as_object().unwrap() {
        let want = std::fs::read(local.as_str().unwrap()).unwrap();
        let got = std::fs::read(clone.join(path)).unwrap();
        assert!(got == want, "{path}: the clone has different bytes");
    }
    env.git(&clone, &["lfs", "fsck"]);
}

#[test]
fn hub_uploads_become_git_commits_that_git_lfs_and_git_xet_clone() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let repo = "org/up";
    let scratch = tempfile::tempdir().unwrap();
    let spec = serde_json::json!({
        "repo": repo,
        "scratch": scratch.path().join("files"),
        "token": server.token(repo, "write"),
        "read_token": server.token(repo, "read"),
        "other_token": server.token("org/other", "admin"),
        "admin_repo": "org/gone",
        "admin_token": server.token("org/gone", "admin"),
    });
    let out = hub_py(&python, &server, scratch.path(), "upload", &spec, &[]);
    let uploaded: serde_json::Value = serde_json::from_str(&out).unwrap();
    // The LFS files went through hf_xet: XET uploads, no LFS basic.
    assert!(server.metric("git_xet_xorb_bytes_received_total") > 3_000_000.0);
    assert_eq!(server.metric("git_xet_lfs_basic_bytes_received_total"), 0.0);
    assert!(!server.data.join("repos/org/up-2.git").exists());
    assert!(!server.data.join("repos/org/gone.git").exists(), "deleted");

    // Plain git-lfs clones it (pointers as git-lfs writes them, .gitattributes covering
    // every LFS path), and so does git with the git-xet agent.
    let lfs = GitEnv::new(Some(&server.token(repo, "read")));
    clone_matches(&lfs, &server, repo, &uploaded["files"]);
    let head = lfs.git(&lfs.home.path().join("clone"), &["rev-parse", "HEAD"]);
    assert_eq!(head.trim(), uploaded["commit"].as_str().unwrap());
    let pointer = lfs.git(
        &lfs.home.path().join("clone"),
        &["cat-file", "-p", "HEAD:data/blob.dat"],
    );
    assert!(
        pointer.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "{pointer}"
    );
    let xet = GitEnv::new(Some(&server.token(repo, "read")));
    let out = xet
        .cmd(git_xet_bin().to_str().unwrap(), xet.home.path())
        .arg("install")
        .output()
        .unwrap();
    assert!(out.status.success(), "git xet install: {out:?}");
    clone_matches(&xet, &server, repo, &uploaded["files"]);
}

#[test]
fn hub_datasets_are_repositories_of_their_own_that_git_clones() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let (repo, hosted) = ("org/data", "datasets/org/data");
    let scratch = tempfile::tempdir().unwrap();
    let spec = serde_json::json!({
        "repo": repo,
        "scratch": scratch.path().join("files"),
        "token": server.token(hosted, "write"),
        "model_token": server.token(repo, "write"),
    });
    let out = hub_py(&python, &server, scratch.path(), "dataset", &spec, &[]);
    let uploaded: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(server.data.join("repos/datasets/org/data.git").is_dir());
    assert!(server.data.join("repos/org/data.git").is_dir());
    assert_eq!(server.metric("git_xet_lfs_basic_bytes_received_total"), 0.0);
    // Its git URL is the Hub's: `/datasets/org/data.git`.
    let lfs = GitEnv::new(Some(&server.token(hosted, "read")));
    clone_matches(&lfs, &server, hosted, &uploaded["files"]);
    let head = lfs.git(&lfs.home.path().join("clone"), &["rev-parse", "HEAD"]);
    assert_eq!(head.trim(), uploaded["commit"].as_str().unwrap());
}

#[test]
fn hub_private_repositories_need_a_token_where_others_are_readable_anonymously() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start_with(&["--anonymous-read"]);
    let scratch = tempfile::tempdir().unwrap();
    let repo = |name: &str, hosted: &str, kind: Option<&str>, private: bool| {
        serde_json::json!({
            "repo": name, "type": kind, "private": private,
            "token": server.token(hosted, "write"),
        })
    };
    let spec = serde_json::json!({
        "token": "",
        "repos": [
            repo("org/secret", "org/secret", None, true),
            repo("org/secret", "datasets/org/secret", Some("dataset"), true),
            repo("org/open", "org/open", None, false),
        ],
    });
    hub_py(&python, &server, scratch.path(), "private", &spec, &[]);
    // The git side keeps the same policy: an anonymous clone of the private repository is
    // refused, of the public one served.
    let anonymous = GitEnv::new(None);
    let into = |name: &str| anonymous.home.path().join(name);
    let clone = |repo: &str, dir: &Path| {
        anonymous
            .cmd("git", anonymous.home.path())
            .args(["clone", "-q", &format!("{}/{repo}.git", server.url)])
            .arg(dir)
            .output()
            .unwrap()
    };
    for private in ["org/secret", "datasets/org/secret"] {
        let out = clone(private, &into(&private.replace('/', "-")));
        assert!(!out.status.success(), "anonymous clone of {private}: {out:?}");
    }
    let out = clone("org/open", &into("open"));
    assert!(out.status.success(), "anonymous clone of org/open: {out:?}");
    assert_eq!(std::fs::read(into("open").join("a.txt")).unwrap(), b"hello\n");
}
