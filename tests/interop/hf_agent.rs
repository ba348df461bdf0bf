//! git-lfs with an agent that behaves as Hugging Face's `git-xet`: registered as the custom
//! transfer `xet` without a direction, upload-only. A push goes through it (XET, by hf-xet);
//! a clone must get `basic` from the server, or git-lfs would hand the downloads to an agent
//! that refuses them ("Clone succeeded, but checkout failed").

use std::path::Path;

use crate::common::*;
use crate::gitenv::GitEnv;

#[test]
fn hf_agent_users_push_through_xet_and_clone_through_basic() {
    let Some(python) = python() else { return };
    let server = TestServer::start();
    let repo = "org/hf-agent";
    let env = GitEnv::new(Some(&server.token(repo, "write")));
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py/hf_like_agent.py");
    let log = env.home.path().join("agent.log");
    // As `git xet install` of xet-core writes it: path, args, concurrent; no direction.
    for (key, value) in [
        ("lfs.customtransfer.xet.path", python.to_str().unwrap()),
        (
            "lfs.customtransfer.xet.args",
            &format!("-W ignore::DeprecationWarning {}", agent.display()),
        ),
        ("lfs.customtransfer.xet.concurrent", "true"),
    ] {
        env.git(env.home.path(), &["config", "--global", key, value]);
    }
    let lfs_env = env.git(env.home.path(), &["lfs", "env"]);
    // git-lfs offers it for downloads (this version lists `ssh` too).
    let downloads = lfs_env
        .lines()
        .find_map(|l| l.strip_prefix("DownloadTransfers="))
        .unwrap_or_default();
    assert!(downloads.split(',').any(|t| t == "xet"), "{lfs_env}");
    assert!(!downloads.contains("xet-download"), "{lfs_env}");

    let work = env.home.path().join("work");
    env.new_repo(&work);
    let weights = random_bytes(3_000_000, 30);
    let corpus = text(1_000_000);
    write_file(&work.join("weights.bin"), &weights);
    write_file(&work.join("corpus.bin"), &corpus);
    env.git(&work, &["add", "."]);
    env.git(&work, &["commit", "-q", "-m", "first"]);
    let remote = format!("{}/{repo}.git", server.url);
    env.git(&work, &["remote", "add", "origin", &remote]);
    let mut push = env.cmd("git", &work);
    push.args(["push", "-q", "-u", "origin", "main"])
        .env("HF_LIKE_AGENT_LOG", &log)
        .env("HF_HOME", env.home.path().join("hf-home"));
    let out = push.output().unwrap();
    assert!(
        out.status.success(),
        "push: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    // The objects went as XET through the agent, none as basic uploads.
    assert!(server.metric("git_xet_xorb_bytes_received_total") > 0.0);
    assert_eq!(server.metric("git_xet_lfs_basic_bytes_received_total"), 0.0);
    assert_eq!(server.metric("git_xet_registered_files"), 2.0);

    let clone = env.home.path().join("clone");
    let mut cmd = env.cmd("git", env.home.path());
    cmd.args(["clone", "-q", &remote, clone.to_str().unwrap()])
        .env("HF_LIKE_AGENT_LOG", &log);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "clone: {stderr}");
    assert!(!stderr.contains("checkout failed"), "{stderr}");
    assert!(std::fs::read(clone.join("weights.bin")).unwrap() == weights);
    assert!(std::fs::read(clone.join("corpus.bin")).unwrap() == corpus);
    env.git(&clone, &["lfs", "fsck"]);
    // Through basic, and the agent was never asked to download.
    assert_eq!(
        server.metric("git_xet_lfs_basic_bytes_served_total"),
        (weights.len() + corpus.len()) as f64
    );
    let inits = std::fs::read_to_string(&log).unwrap();
    assert!(inits.lines().all(|op| op == "upload"), "{inits}");
    assert!(inits.contains("upload"), "{inits}");
}
