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
pub(crate) fn hub_py(
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
pub(crate) fn hub_python() -> Option<PathBuf> {
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
        ["POST", format!("/api/models/{HUB_REPO}/paths-info/main")],
        ["POST", format!("/api/models/{HUB_REPO}/branch/new")],
        ["DELETE", format!("/api/models/{HUB_REPO}/branch/feat%2Fx")],
        ["POST", format!("/api/models/{HUB_REPO}/tag/main")],
        ["DELETE", format!("/api/models/{HUB_REPO}/tag/v1")],
        ["POST", format!("/api/models/{HUB_REPO}/preupload/main")],
        ["POST", format!("/api/models/{HUB_REPO}/commit/main")],
        [
            "GET",
            format!("/api/models/{HUB_REPO}/xet-write-token/main")
        ],
        ["PUT", format!("/api/models/{HUB_REPO}/settings")],
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
            ["POST", format!("/api/datasets/{HUB_REPO}/paths-info/main")],
            ["POST", format!("/api/datasets/{HUB_REPO}/branch/new")],
            ["DELETE", format!("/api/datasets/{HUB_REPO}/branch/main")],
            ["POST", format!("/api/datasets/{HUB_REPO}/tag/main")],
            ["HEAD", format!("/datasets/{HUB_REPO}/resolve/main/sub/a.txt")],
            ["GET", format!("/datasets/{HUB_REPO}/resolve/main/sub/a.txt")],
        ],
    });
    let refs = |repo: &str| {
        let dir = server.data.join(format!("repos/{repo}.git"));
        let git_dir = dir.to_str().unwrap();
        env.git(&home, &["--git-dir", git_dir, "for-each-ref"])
    };
    let before = refs(HUB_REPO);
    let out = hub_py(&python, &server, &home, "isolation", &spec, &[]);
    let seen: Vec<String> = serde_json::from_str(&out).unwrap();
    assert!(seen.len() >= 64, "{seen:?}");
    assert_eq!(refs(HUB_REPO), before, "no ref moved");
    let data_refs = refs(&data);
    assert_eq!(data_refs.lines().count(), 1, "{data_refs}");
}

/// A clone of `repo` by `env`'s git; every file of `files` (repository path -> local file)
/// checked out bit-exact, LFS objects checked by `git lfs fsck`.
pub(crate) fn clone_matches(
    env: &GitEnv,
    server: &TestServer,
    repo: &str,
    files: &serde_json::Value,
) {
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
    // git-xet's filter keeps the objects as chunks in the per-user store, not whole in
    // .git/lfs/objects, which is all fsck reads: `git xet materialize` puts them there.
    let filter = env.git(&clone, &["config", "--get", "filter.lfs.process"]);
    if filter.contains("xet") {
        let out = env
            .cmd(git_xet_bin().to_str().unwrap(), &clone)
            .arg("materialize")
            .output()
            .unwrap();
        assert!(out.status.success(), "git xet materialize: {out:?}");
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
        assert!(
            !out.status.success(),
            "anonymous clone of {private}: {out:?}"
        );
    }
    let out = clone("org/open", &into("open"));
    assert!(out.status.success(), "anonymous clone of org/open: {out:?}");
    assert_eq!(
        std::fs::read(into("open").join("a.txt")).unwrap(),
        b"hello\n"
    );
    // The status page an anonymous browser sees lists the public repository, not the
    // private ones: neither their names nor their files.
    let page = reqwest::blocking::Client::new()
        .get(format!("{}/", server.url))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert!(page.status().is_success(), "{page:?}");
    let page = page.text().unwrap();
    assert!(page.contains("org/open"), "{page}");
    assert!(
        !page.contains("secret"),
        "a private repository is listed: {page}"
    );
}

#[test]
fn hub_branches_tags_paths_info_and_copies() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let repo = "org/refs";
    let scratch = tempfile::tempdir().unwrap();
    let spec = serde_json::json!({
        "repo": repo,
        "token": server.token(repo, "write"),
        "read_token": server.token(repo, "read"),
    });
    hub_py(&python, &server, scratch.path(), "refs", &spec, &[]);
    // The copy of the LFS file is the same pointer, and a branch made through the API is
    // an ordinary git branch.
    let git = GitEnv::new(Some(&server.token(repo, "read")));
    let dir = server.data.join(format!("repos/{repo}.git"));
    let git_dir = dir.to_str().unwrap();
    let show = |rev: &str| git.git(git.home.path(), &["--git-dir", git_dir, "show", rev]);
    assert_eq!(show("main:w.bin"), show("main:c/w.bin"));
    assert!(show("dev:dev.txt").starts_with("dev"));
    assert!(show("v2").contains("second"), "annotated tag");
}

/// A write token of `repo` acting as `user` (the owner of the locks it takes).
fn user_token(server: &TestServer, repo: &str, user: &str) -> String {
    let args = ["token", "create", "--repo", repo, "--scope", "write"];
    let out = server.admin(&args).args(["--user", user]).output().unwrap();
    assert!(out.status.success(), "token create: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn hub_commits_may_not_change_files_another_user_has_locked() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let repo = "org/locked";
    let scratch = tempfile::tempdir().unwrap();
    let spec = serde_json::json!({
        "repo": repo,
        "token": user_token(&server, repo, "alice"),
        "other_token": user_token(&server, repo, "bob"),
    });
    hub_py(&python, &server, scratch.path(), "locks", &spec, &[]);
}

/// `upload_folder` of 10,000 small files through the real client: its `preupload` calls
/// (256 paths each) and its NDJSON commits (huggingface_hub 2.x commits a large folder in
/// batches of up to 1,000 files, ` (part N)` after the first's message) all answered, every
/// file listed, and the same folder uploaded again makes no commit.
#[test]
fn hub_upload_folder_of_ten_thousand_small_files() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let repo = "org/many";
    let scratch = tempfile::tempdir().unwrap();
    let folder = scratch.path().join("folder");
    let count = 10_000;
    for i in 0..count {
        let path = folder.join(format!("d{:02}/f{i:05}.txt", i % 100));
        write_file(&path, format!("file {i}\n").as_bytes());
    }
    let spec = serde_json::json!({
        "repo": repo,
        "folder": folder,
        "count": count,
        "samples": ["d00/f00000.txt", "d34/f01234.txt", "d99/f09999.txt"],
        "token": server.token(repo, "write"),
    });
    let out = hub_py(&python, &server, scratch.path(), "many", &spec, &[]);
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["files"], count + 1, "{summary}");
    // git sees the one commit.
    let git = GitEnv::new(Some(&server.token(repo, "read")));
    let dir = server.data.join(format!("repos/{repo}.git"));
    let git_dir = dir.to_str().unwrap();
    let listing = git.git(
        git.home.path(),
        &["--git-dir", git_dir, "ls-tree", "-r", "--name-only", "main"],
    );
    assert_eq!(listing.lines().count(), count + 1);
    let log = git.git(
        git.home.path(),
        &["--git-dir", git_dir, "log", "--format=%s", "main"],
    );
    let mut subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects.pop(), Some("initial commit"), "{log}");
    assert_eq!(subjects.pop(), Some("many files"), "{log}");
    // The client's later batches, newest first: parts 2, 3, ... in order.
    for (i, subject) in subjects.iter().rev().enumerate() {
        assert_eq!(*subject, format!("many files (part {})", i + 2), "{log}");
    }
    // The commit upload_folder answered with is the branch's head.
    let head = git.git(
        git.home.path(),
        &["--git-dir", git_dir, "rev-parse", "main"],
    );
    assert_eq!(summary["commit"].as_str(), Some(head.trim()), "{summary}");
}

#[test]
fn hub_hf_cli_uploads_and_downloads_as_a_user_would() {
    let Some(python) = hub_python() else {
        return;
    };
    let hf = python.with_file_name("hf");
    assert!(
        hf.is_file(),
        "{} has no hf CLI next to it",
        python.display()
    );
    let server = TestServer::start();
    let repo = "org/cli";
    let scratch = tempfile::tempdir().unwrap();
    let folder = scratch.path().join("model");
    let mut files = BTreeMap::new();
    for (path, data) in [
        ("model.safetensors", random_bytes(2_500_000, 341)),
        ("config.json", b"{\"layers\": 2}\n".to_vec()),
        ("tokenizer/vocab.txt", b"a\nb\n".to_vec()),
    ] {
        write_file(&folder.join(path), &data);
        files.insert(path.to_string(), folder.join(path));
    }
    let token = server.token(repo, "write");
    let run = |args: &[&str]| {
        let out = Command::new(&hf)
            .args(args)
            .current_dir(scratch.path())
            .env("HF_ENDPOINT", server.url.trim_end_matches('/'))
            .env("HF_TOKEN", &token)
            .env("HF_HOME", scratch.path().join("hf-home"))
            .env("HF_HUB_DISABLE_TELEMETRY", "1")
            .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            .env_remove("HF_HUB_DISABLE_XET")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hf {args:?}: {}\n{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            server.log_text()
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // `hf upload` creates the repository, then commits the folder (the large file via hf_xet).
    let folder_arg = folder.to_str().unwrap();
    run(&[
        "upload",
        repo,
        folder_arg,
        ".",
        "--commit-message",
        "from the CLI",
    ]);
    assert!(server.metric("git_xet_xorb_bytes_received_total") > 2_000_000.0);
    let local = scratch.path().join("download");
    run(&["download", repo, "--local-dir", local.to_str().unwrap()]);
    for (path, want) in &files {
        let got = std::fs::read(local.join(path)).unwrap();
        assert!(
            got == std::fs::read(want).unwrap(),
            "{path}: different bytes"
        );
    }
    // One file into the cache: the CLI prints its path (`  path: ...`, among other lines).
    let printed = run(&["download", repo, "config.json"]);
    let line = printed.lines().find_map(|l| l.trim().strip_prefix("path:"));
    let cached = PathBuf::from(line.unwrap_or_else(|| panic!("{printed}")).trim());
    assert_eq!(std::fs::read(cached).unwrap(), b"{\"layers\": 2}\n");
    // git sees the CLI's commit.
    let git = GitEnv::new(Some(&server.token(repo, "read")));
    let files = serde_json::to_value(&files).unwrap();
    clone_matches(&git, &server, repo, &files);
    let log = git.git(
        &git.home.path().join("clone"),
        &["log", "-1", "--format=%s"],
    );
    assert_eq!(log.trim(), "from the CLI");
}

/// The figures of docs/benchmarks.md ("Local storage and dedup"): printed with
/// `--nocapture`.
#[test]
fn hub_an_edited_large_file_moves_only_its_changed_chunks() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let repo = "org/big";
    let scratch = tempfile::tempdir().unwrap();
    const MIB: usize = 1 << 20;
    let v1 = random_bytes(64 * MIB, 342);
    let mut v2 = v1.clone();
    v2[32 * MIB..33 * MIB].copy_from_slice(&random_bytes(MIB, 343));
    let (p1, p2) = (scratch.path().join("v1.bin"), scratch.path().join("v2.bin"));
    write_file(&p1, &v1);
    write_file(&p2, &v2);
    let spec = serde_json::json!({
        "repo": repo, "v1": p1, "v2": p2, "token": server.token(repo, "write"),
    });
    let out = hub_py(&python, &server, scratch.path(), "figures", &spec, &[]);
    let f: serde_json::Value = serde_json::from_str(&out).unwrap();
    eprintln!("hub figures (bytes of xorbs, seconds): {f:#}");
    let mib = |key: &str| f[key].as_f64().unwrap() / MIB as f64;
    assert!(mib("upload_v1_bytes") > 60.0, "{f}");
    assert!(mib("download_v1_bytes") > 60.0, "{f}");
    // The edit: one MiB, and the chunks around its two ends.
    assert!(mib("upload_v2_bytes") < 4.0, "{f}");
    // hf_xet 1.8.0 downloads the second version whole: its downloads get no chunk cache
    // (the hook exists, every caller passes none; HF_XET_CHUNK_CACHE_SIZE_BYTES is read and
    // unused) and it reuses no local file; docs/benchmarks.md says where in its source.
    assert!(mib("download_v2_bytes") > 60.0, "{f}");
}
