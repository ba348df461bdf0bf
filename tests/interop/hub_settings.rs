//! `update_repo_settings` and uploads with xet off (`HF_HUB_DISABLE_XET=1`), with the real
//! `huggingface_hub` through tests/interop/py/hub.py ("settings").

use crate::common::*;
use crate::gitenv::GitEnv;
use crate::hub::{clone_matches, hub_py, hub_python};

/// Visibility changed after creation is what anonymous readers see; the client's LFS
/// basic upload (its PUT carries no action header: the href's grant authorizes it) lands
/// as a commit git clones bit for bit.
#[test]
fn hub_settings_change_visibility_and_uploads_without_xet_go_through_lfs_basic() {
    let Some(python) = hub_python() else {
        return;
    };
    let server = TestServer::start_with(&["--anonymous-read"]);
    let repo = "org/settings";
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("big.bin");
    write_file(&big, &random_bytes(3_000_000, 350));
    let spec = serde_json::json!({
        "repo": repo,
        "big": big,
        "token": server.token(repo, "admin"),
        "write_token": server.token(repo, "write"),
    });
    let env = [("HF_HUB_DISABLE_XET", "1")];
    hub_py(&python, &server, scratch.path(), "settings", &spec, &env);
    // Through the LFS Batch API with basic, not through hf_xet.
    assert!(server.metric("git_xet_lfs_basic_bytes_received_total") >= 3_000_000.0);
    assert_eq!(server.metric("git_xet_xorb_bytes_received_total"), 0.0);
    let git = GitEnv::new(Some(&server.token(repo, "read")));
    clone_matches(&git, &server, repo, &serde_json::json!({ "big.bin": big }));
}
