//! The tree listing's pages with the real `huggingface_hub` (tests/interop/py/hub_listing.py):
//! `list_repo_files`, `list_repo_tree(recursive=True)` and `snapshot_download` of a
//! repository pushed with git, of 2,500 files in nested directories, get every file across
//! the pages the client follows.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::gitenv::GitEnv;
use crate::hub::hub_python;

const REPO: &str = "org/listed";

#[test]
fn hub_client_lists_a_repository_of_many_pages() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start();
    let env = GitEnv::new(Some(&server.token(REPO, "write")));
    let work = env.home.path().join("work");
    env.new_repo(&work);
    for i in 0..2500 {
        let path = format!("d{}/e{}/f{i:04}.txt", i % 5, i % 11);
        write_file(&work.join(path), format!("{i}\n").as_bytes());
    }
    for name in ["a-c", "a.txt", "a/b", "ab"] {
        write_file(&work.join(name), name.as_bytes());
    }
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "many"]);
    let remote = format!("{}/{REPO}.git", server.url);
    env.git(&work, &["push", "-q", &remote, "main"]);

    let ls = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["-c", "core.quotePath=false", "ls-tree", "--name-only", "-r"];
        all.extend(args);
        all.push("HEAD");
        env.git(&work, &all).lines().map(str::to_string).collect()
    };
    let (files, entries) = (ls(&[]), ls(&["-t"]));
    assert!(files.len() > 2500, "{}", files.len());
    let spec = serde_json::json!({ "repo": REPO, "files": files, "entries": entries });
    let home = env.home.path();
    let spec_path = home.join("listing-spec.json");
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py/hub_listing.py");
    let out = Command::new(&python)
        .arg("-W")
        .arg("ignore::DeprecationWarning")
        .arg(script)
        .arg(&spec_path)
        .env("HF_ENDPOINT", server.url.trim_end_matches('/'))
        .env("HF_TOKEN", server.token(REPO, "read"))
        .env("HF_HOME", home.join("hf-home"))
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "hub_listing.py failed:\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(figures["files"], files.len(), "{figures}");
    assert_eq!(figures["pages"], entries.len().div_ceil(1000), "{figures}");
}
