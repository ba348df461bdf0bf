//! `git xet server`, `git xet shell` and `git xet pre-receive` are served by the
//! `git-xet-server` program: this binary, which git and git-lfs start for every transfer
//! and checkout, carries none of the server (its HTTP stack, SQLite, PostgreSQL, S3). The
//! three commands exec `git-xet-server <command> ARGS...`, so the pid, the standard streams
//! and signals stay those of the process the user or sshd started.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{anyhow, bail};

/// The program's name, installed next to `git-xet` (install.sh, `cargo install`).
const SERVER_PROGRAM: &str = "git-xet-server";

/// Everything after the command word, handed over untouched (`--help` included).
#[derive(clap::Args, Debug)]
pub struct Forwarded {
    /// Arguments of the command (see its `--help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// Runs `git-xet-server <command> ARGS...` in place of this process.
pub fn to_server(command: &str, forwarded: Forwarded) -> anyhow::Result<ExitCode> {
    let program = server_program()?;
    let mut cmd = Command::new(&program);
    cmd.arg(command).args(&forwarded.args);
    let err = git_xet_io::platform::process::exec(&mut cmd);
    Err(anyhow!("cannot run {}: {err}", program.display()))
}

/// `GIT_XET_SERVER_PROGRAM` when set, else `git-xet-server` next to this binary (the pair
/// installed together), else on PATH.
pub(super) fn server_program() -> anyhow::Result<PathBuf> {
    if let Some(program) = std::env::var_os("GIT_XET_SERVER_PROGRAM").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(program));
    }
    let exe = std::env::current_exe().ok();
    let exe = exe.map(|e| e.canonicalize().unwrap_or(e));
    if let Some(sibling) = exe.as_ref().map(|e| e.with_file_name(SERVER_PROGRAM)) {
        if sibling.is_file() {
            return Ok(sibling);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = std::env::split_paths(&path)
        .map(|dir| dir.join(SERVER_PROGRAM))
        .find(|candidate| candidate.is_file())
    {
        return Ok(found);
    }
    bail!(
        "this command is served by the {SERVER_PROGRAM} program, which is not installed: it is \
         neither next to {} nor on PATH (install.sh installs both programs; with cargo: \
         `cargo install --path . --bins`)",
        exe.map(|e| e.display().to_string())
            .unwrap_or_else(|| "git-xet".into())
    )
}
