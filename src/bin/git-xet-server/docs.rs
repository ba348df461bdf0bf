//! `git-xet-server generate-docs DIR` (hidden; install.sh runs it) and `--help` as a man
//! page: see crate::common::cli_docs. The pages are named as users type the commands, through
//! `git xet`: `git-xet-server`, `git-xet-shell`, `git-xet-pre-receive` and those below them.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::cli_docs;
use clap::CommandFactory;

use super::Cli;

#[derive(clap::Args, Debug)]
pub struct DocsArgs {
    /// Directory to write `man1/*.1` and `completions/{bash,zsh,fish}/` into.
    dir: PathBuf,
}

/// The definition with the root named `git-xet`, so that clap names each command by the words
/// `git xet ...` (the root itself has no page: `git-xet` documents the client's commands).
fn as_typed() -> clap::Command {
    Cli::command().name("git-xet").bin_name("git xet")
}

/// Writes the pages of `server`, `shell`, `pre-receive` and their subcommands, and the
/// completion scripts of `git-xet-server` (git-xet's own scripts hand those commands to it).
pub fn generate(args: DocsArgs) -> anyhow::Result<ExitCode> {
    let mut written = cli_docs::write_man_pages(as_typed(), false, &[], &args.dir)?;
    written.extend(cli_docs::write_completions(
        Cli::command(),
        "git-xet-server",
        "",
        &args.dir,
    )?);
    for path in written {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `git xet server ... --help` shows the command's man page when it is installed.
pub fn help_as_man_page() -> Option<ExitCode> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let code = cli_docs::show_man_page_for_help(as_typed, false, &args)?;
    Some(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
