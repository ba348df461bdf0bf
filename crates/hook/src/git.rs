//! The check's git processes: always in the pushed-to repository (the hook's working
//! directory, or a test's), never prompting.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::HookError;

#[derive(Clone, Debug, Default)]
pub struct Git {
    dir: Option<PathBuf>,
    /// Set for every git run (the Hub API's quarantined objects: hub/quarantine.rs).
    env: Vec<(OsString, OsString)>,
}

impl Git {
    /// git in the current directory (where git runs its hooks: the bare repository).
    pub fn new() -> Git {
        Git::default()
    }

    pub fn in_dir(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: Some(dir.into()),
            env: Vec::new(),
        }
    }

    /// This git with `vars` set for every command it runs.
    pub fn with_env(mut self, vars: impl IntoIterator<Item = (OsString, OsString)>) -> Git {
        self.env.extend(vars);
        self
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn command<I, S>(&self, args: I) -> (Command, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        let mut shown = String::from("git");
        for a in args {
            shown.push(' ');
            shown.push_str(&a.as_ref().to_string_lossy());
            cmd.arg(a);
        }
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        (cmd, shown)
    }

    /// Runs git, returning stdout (trailing newline removed) or an error with its stderr.
    pub fn run<I, S>(&self, args: I) -> Result<String, HookError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut out = self.run_bytes(args, None)?;
        if out.last() == Some(&b'\n') {
            out.pop();
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Runs git with optional stdin, returning stdout as bytes.
    pub fn run_bytes<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, HookError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        use git_xet_io::platform::process::{self, RunError};
        let (mut cmd, shown) = self.command(args);
        let out = process::run_with_input(&mut cmd, input).map_err(|e| match e {
            RunError::Spawn(e) => HookError::Spawn(e),
            RunError::Wait(e) => HookError::io(format!("waiting for `{shown}`"), e),
        })?;
        if !out.status.success() {
            return Err(HookError::Command {
                stderr: process::failure_text(&out),
                command: shown,
            });
        }
        Ok(out.stdout)
    }

    /// Runs git; exit status 1 means `None` (`git config --get` of an absent key), not an
    /// error.
    pub fn try_run<I, S>(&self, args: I) -> Result<Option<String>, HookError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, shown) = self.command(args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().map_err(HookError::Spawn)?;
        match out.status.code() {
            Some(0) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                if text.ends_with('\n') {
                    text.pop();
                }
                Ok(Some(text))
            }
            Some(1) => Ok(None),
            _ => Err(HookError::Command {
                command: shown,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// Starts git with `stdin`, stdout piped to the caller and stderr passed through: for
    /// output too large to hold, read as it comes (`cat-file --batch` on a big push).
    pub fn spawn<I, S>(&self, args: I, stdin: Stdio) -> Result<std::process::Child, HookError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, _) = self.command(args);
        cmd.stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(HookError::Spawn)
    }
}
