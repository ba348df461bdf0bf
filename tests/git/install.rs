//! `git xet install` / `uninstall` at each scope, with real git and git-lfs.

use crate::env::{stderr, stdout, GitEnv};

fn lfs_env_value(env: &GitEnv, dir: &std::path::Path, key: &str) -> String {
    let out = env
        .command("git", dir)
        .args(["lfs", "env"])
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn global_install_registers_the_agent_and_uninstall_restores_the_config() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    let before = env.config_list(&repo, "--global");

    let out = env.xet(&repo, &["install"]);
    assert!(out.contains("installed (global config)"), "{out}");
    let exe = crate::support::git_xet_bin().canonicalize().unwrap();
    let get = |key: &str| env.git(&repo, &["config", "--global", "--get", key]);
    assert_eq!(get("lfs.customtransfer.xet.path"), exe.to_string_lossy());
    assert_eq!(get("lfs.customtransfer.xet.args"), "transfer");
    assert_eq!(get("lfs.customtransfer.xet.concurrent"), "true");
    // More agents than git-lfs's 8: small uploads of a push share a session.
    assert_eq!(get("lfs.concurrenttransfers"), "50");
    // git-lfs filters were missing, so install ran `git lfs install` globally, then made
    // git-xet the filter process (git-lfs's single-file clean/smudge stay as they were)...
    assert_eq!(
        get("filter.lfs.process"),
        format!("{} filter-process", exe.display())
    );
    assert_eq!(get("filter.lfs.smudge"), "git-lfs smudge -- %f");
    // ...without touching the repository it ran in (--skip-repo).
    assert!(!repo.join(".git/hooks/pre-push").exists());
    // git-lfs itself sees the agent.
    assert!(lfs_env_value(&env, &repo, "UploadTransfers").contains("xet"));
    assert!(lfs_env_value(&env, &repo, "DownloadTransfers").contains("xet"));

    // Idempotent: a second install changes nothing.
    let installed = std::fs::read(&env.global_config).unwrap();
    let out = env.xet(&repo, &["install", "--global"]);
    assert!(out.contains("already set"), "{out}");
    assert_eq!(std::fs::read(&env.global_config).unwrap(), installed);

    env.xet(&repo, &["uninstall"]);
    assert_eq!(env.config_list(&repo, "--global"), before);
    let text = std::fs::read_to_string(&env.global_config).unwrap();
    assert!(
        !text.contains("lfs") && !text.contains("xet"),
        "leftover sections:\n{text}"
    );
    // A second uninstall has nothing to do and does not fail.
    assert!(env
        .xet(&repo, &["uninstall"])
        .contains("nothing to uninstall"));
}

#[test]
fn uninstall_keeps_what_the_user_had_and_restores_overwritten_values() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    env.git(&repo, &["lfs", "install", "--skip-repo"]);
    env.git(
        &repo,
        &[
            "config",
            "--global",
            "lfs.customtransfer.xet.concurrent",
            "false",
        ],
    );
    env.git(&repo, &["config", "--global", "lfs.locksverify", "false"]);
    let before = env.config_list(&repo, "--global");

    let out = env.xet(&repo, &["install", "--concurrency", "4"]);
    assert!(
        !out.contains("git lfs install"),
        "filters were present: {out}"
    );
    assert_eq!(
        env.git(
            &repo,
            &["config", "--global", "lfs.customtransfer.xet.concurrent"]
        ),
        "true"
    );
    assert_eq!(
        env.git(&repo, &["config", "--global", "lfs.concurrenttransfers"]),
        "4"
    );

    // A value the user changes after install is theirs: uninstall leaves it.
    env.git(
        &repo,
        &[
            "config",
            "--global",
            "lfs.customtransfer.xet.args",
            "transfer --custom",
        ],
    );
    let out = env.xet(&repo, &["uninstall", "--global"]);
    assert!(out.contains("kept lfs.customtransfer.xet.args"), "{out}");
    assert!(
        out.contains("restored lfs.customtransfer.xet.concurrent = false"),
        "{out}"
    );
    let mut expected = before.clone();
    expected.push("lfs.customtransfer.xet.args=transfer --custom".into());
    expected.sort();
    assert_eq!(env.config_list(&repo, "--global"), expected);
    // git-lfs's own filters stay: install did not add them.
    assert_eq!(
        env.git(&repo, &["config", "--global", "filter.lfs.process"]),
        "git-lfs filter-process"
    );
}

#[test]
fn local_install_touches_only_the_repository() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    let global_before = std::fs::read(&env.global_config).unwrap();
    let local_before = env.config_list(&repo, "--local");

    env.xet(&repo, &["install", "--local", "--concurrency", "1"]);
    assert_eq!(std::fs::read(&env.global_config).unwrap(), global_before);
    assert_eq!(
        env.git(
            &repo,
            &["config", "--local", "lfs.customtransfer.xet.concurrent"]
        ),
        "false"
    );
    assert!(env
        .git(&repo, &["config", "--local", "filter.lfs.process"])
        .ends_with("git-xet filter-process"),);
    assert!(
        repo.join(".git/hooks/pre-push").exists(),
        "git lfs install --local installs hooks"
    );
    // Works from a subdirectory too.
    let sub = repo.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    env.xet(&sub, &["install", "--local", "--concurrency", "1"]);

    env.xet(&sub, &["uninstall", "--local"]);
    // git-lfs records its repository format in every repository it runs in; that key is
    // git-lfs's own bookkeeping, not something install added.
    let mut after = env.config_list(&repo, "--local");
    after.retain(|l| l != "lfs.repositoryformatversion=0");
    assert_eq!(after, local_before);
    assert!(!repo.join(".git/hooks/pre-push").exists());
    assert_eq!(std::fs::read(&env.global_config).unwrap(), global_before);
}

#[test]
fn no_filter_keeps_the_git_lfs_filter() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    env.git(&repo, &["lfs", "install", "--skip-repo"]);
    let out = env.xet(&repo, &["install", "--no-filter"]);
    assert!(!out.contains("filter.lfs.process"), "{out}");
    assert_eq!(
        env.git(&repo, &["config", "--global", "filter.lfs.process"]),
        "git-lfs filter-process"
    );
    assert!(env
        .xet(&repo, &["status", "--offline"])
        .contains("git-lfs filter-process"));
    // A later install with the filter records the value it overwrote, and uninstall puts it
    // back.
    env.xet(&repo, &["install"]);
    assert!(env
        .xet(&repo, &["status", "--offline"])
        .contains("filter:         git-xet filter-process"));
    let out = env.xet(&repo, &["uninstall"]);
    assert!(
        out.contains("restored filter.lfs.process = git-lfs filter-process"),
        "{out}"
    );
}

#[test]
fn system_install_writes_the_system_config() {
    let env = GitEnv::new();
    let dir = env.dir("anywhere");
    env.xet(&dir, &["install", "--system"]);
    let text = std::fs::read_to_string(&env.system_config).unwrap();
    assert!(
        text.contains("customtransfer") && text.contains("filter \"lfs\""),
        "{text}"
    );
    env.xet(&dir, &["uninstall", "--system"]);
    assert_eq!(
        std::fs::read_to_string(&env.system_config).unwrap().trim(),
        ""
    );
}

#[test]
fn install_errors_are_clear() {
    let env = GitEnv::new();
    let dir = env.dir("not-a-repo");
    let out = env.xet_output(&dir, &["install", "--local"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not inside a git repository"),
        "{}",
        stderr(&out)
    );
    let out = env.xet_output(&dir, &["install", "--concurrency", "0"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("at least 1"), "{}", stderr(&out));
    let out = env.xet_output(&dir, &["install", "--local", "--global"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "conflicting scopes are a usage error"
    );
}

/// Without `--concurrency`, a `lfs.concurrenttransfers` the user set (at any scope) stays.
#[test]
fn a_new_install_moves_the_agent_count_an_earlier_install_set_but_not_one_the_user_chose() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    env.xet(&repo, &["install"]);
    // As an earlier version left it (34 agents, recorded as added by install).
    env.git(
        &repo,
        &["config", "--global", "lfs.concurrenttransfers", "34"],
    );
    env.xet(&repo, &["install"]);
    assert_eq!(env.git(&repo, &["config", "lfs.concurrenttransfers"]), "50");
    // A value the user chose since is theirs.
    env.git(
        &repo,
        &["config", "--global", "lfs.concurrenttransfers", "16"],
    );
    env.xet(&repo, &["install"]);
    assert_eq!(env.git(&repo, &["config", "lfs.concurrenttransfers"]), "16");
    // uninstall still removes it (recorded once).
    env.xet(&repo, &["uninstall"]);
    let left = env.git_output(&repo, &["config", "--global", "lfs.concurrenttransfers"]);
    assert!(!left.status.success(), "uninstall left the agent count");
}

#[test]
fn install_keeps_the_users_concurrent_transfers() {
    let env = GitEnv::new();
    let repo = env.init_repo("repo");
    env.git(
        &repo,
        &["config", "--local", "lfs.concurrenttransfers", "3"],
    );
    env.xet(&repo, &["install"]);
    assert_eq!(env.git(&repo, &["config", "lfs.concurrenttransfers"]), "3");
    let global = env.git_output(&repo, &["config", "--global", "lfs.concurrenttransfers"]);
    assert!(!global.status.success(), "set globally as well");
}
