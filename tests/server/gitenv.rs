//! An isolated git + git-lfs environment: its own HOME and global config (user, git-lfs
//! filters, a credential helper answering with a server token), nothing from the machine.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct GitEnv {
    pub home: tempfile::TempDir,
    config: PathBuf,
}

impl GitEnv {
    /// With `token`, git and git-lfs authenticate with it (HTTP Basic password).
    pub fn new(token: Option<&str>) -> GitEnv {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("gitconfig");
        std::fs::write(
            &config,
            "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        let env = GitEnv { home, config };
        let out = env
            .cmd("git", env.home.path())
            .args(["lfs", "install", "--skip-repo"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git lfs install: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(token) = token {
            env.set_token(token);
        }
        env
    }

    /// Makes the credential helper answer with `token`.
    pub fn set_token(&self, token: &str) {
        let helper = format!("!f() {{ echo username=tester; echo password={token}; }}; f");
        let out = self
            .cmd("git", self.home.path())
            .args([
                "config",
                "--global",
                "--replace-all",
                "credential.helper",
                &helper,
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
    }

    pub fn cmd(&self, program: &str, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_GLOBAL", &self.config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "/bin/false")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        cmd
    }

    /// Runs git and returns its output, whatever the status.
    pub fn git_output(&self, dir: &Path, args: &[&str]) -> Output {
        self.cmd("git", dir).args(args).output().unwrap()
    }

    /// Runs git and asserts success; returns stdout.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_output(dir, args);
        assert!(
            out.status.success(),
            "git {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs git, asserts failure; returns stderr.
    pub fn git_fails(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_output(dir, args);
        assert!(
            !out.status.success(),
            "git {} should have failed",
            args.join(" ")
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A new working repository tracking `*.bin` with LFS.
    pub fn new_repo(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        self.git(dir, &["init", "-q", "-b", "main"]);
        self.git(dir, &["lfs", "track", "*.bin"]);
    }
}
