//! `git xet server`: run the server, or administer its data. One module per subcommand.

mod deployment;
mod import_lfs;
mod run;
mod token;
mod user;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServerArgs {
    #[command(subcommand)]
    command: Option<ServerCommand>,
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum ServerCommand {
    /// Manage access tokens.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Import a whole LFS object store into one repository (server-side, no client): every
    /// object converted to XET content (deduplicated against everything stored), its sha256
    /// checked against its name, granted to the repository. Resumable: a re-run skips what
    /// is done. Then `git push --mirror` the repository to the server.
    ImportLfs(import_lfs::ImportLfsArgs),
    /// ssh users: authorized_keys lines whose forced command is `git xet shell`.
    #[command(subcommand)]
    User(user::UserCommand),
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "git-xet")
        .context("cannot find a per-user data directory; pass --data DIR")?;
    Ok(dirs.data_dir().join("server"))
}

pub(crate) fn data_dir(arg: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match arg {
        Some(dir) => Ok(dir),
        None => default_data_dir(),
    }
}

pub fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(ServerCommand::Token(c)) => token::run(c),
        Some(ServerCommand::ImportLfs(a)) => import_lfs::run(a),
        Some(ServerCommand::User(c)) => user::run(c),
        None => run::serve(args.run),
    }
}
