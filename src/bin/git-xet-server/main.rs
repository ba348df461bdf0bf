//! The command line of `git-xet-server`, the program behind `git xet server`, `git xet shell`
//! and `git xet pre-receive` (the `git-xet` binary execs it for those three, so that the
//! agent and the filter git starts for every transfer do not carry the server). Its
//! top-level commands are those three names; below `server`, one module per subcommand.

mod backup;
mod check;
#[path = "../../common/mod.rs"]
mod common;
mod dedup_scope;
mod deployment;
mod docs;
mod gc;
mod import_lfs;
mod index_rebuild;
mod pre_receive;
mod repo;
mod run;
mod shell;
mod storage_migrate;
mod token;
mod upkeep;
mod user;

use dedup_scope::DedupScopeArg;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "git-xet-server",
    bin_name = "git xet",
    version,
    about = "The XET server of git-xet and its server-side commands",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the XET server (CAS API, git-lfs Batch API, git over HTTP), or manage its data.
    // Boxed: the server's options are many, the other commands' few.
    Server(Box<ServerArgs>),
    /// The pre-receive check of a push, built in: a bare repository's pre-receive hook runs it
    /// (`git xet server` installs that hook in the repositories it hosts; other git servers
    /// use the pre-receive hook shipped with git-xet).
    PreReceive(pre_receive::PreReceiveArgs),
    /// The forced command of an ssh key (authorized_keys `command="git xet shell ..."`):
    /// serves git-upload-pack, git-receive-pack, git-lfs-authenticate and git-lfs-transfer
    /// on the repositories its --repo arguments allow. See `git xet server user add`.
    Shell(shell::ShellArgs),
    /// Write the man pages and shell completions into DIR (install.sh runs it).
    #[command(hide = true)]
    GenerateDocs(docs::DocsArgs),
}

/// Entry point of `git-xet-server`; errors are reported as `git-xet` reports them.
fn main() -> ExitCode {
    // Its threads tell the server's process apart from the client's in /proc.
    git_xet_io::runtime::name_threads(git_xet_io::runtime::SERVER_THREAD_NAME);
    if let Some(code) = docs::help_as_man_page() {
        return code;
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(a) => run(*a),
        Command::PreReceive(a) => pre_receive::run(a),
        Command::Shell(a) => shell::shell(a),
        Command::GenerateDocs(a) => docs::generate(a),
    };
    // What the commands left running on the process's runtime gets a moment to end.
    git_xet_io::runtime::shutdown(std::time::Duration::from_secs(10));
    match result {
        Ok(code) => code,
        Err(err) => {
            crate::common::logging::report_error(err.as_ref());
            ExitCode::FAILURE
        }
    }
}

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
    /// Delete files, xorbs and shards no repository can reach (e.g. after `repo delete`),
    /// older than the grace period. Safe while servers run; prints what it frees.
    Gc(gc::GcArgs),
    /// Check that every registered file rebuilds from stored xorbs (`--read-data`: and
    /// verify every byte). Exits non-zero listing what is wrong.
    Check(check::CheckArgs),
    /// Manage hosted repositories.
    #[command(subcommand)]
    Repo(repo::RepoCommand),
    /// Rebuild a lost index from the object store and the git repositories, or compare the
    /// live index with such a rebuild.
    #[command(subcommand)]
    Index(index_rebuild::IndexCommand),
    /// Move the object store to another directory or bucket while servers run.
    #[command(subcommand)]
    Storage(storage_migrate::StorageCommand),
    /// Back the whole deployment up (online, consistent, incremental) into a directory or
    /// `s3://BUCKET[/PREFIX]`: index, new objects, git repositories, secret. `backup verify`
    /// checks a backup.
    Backup(Box<backup::BackupArgs>),
    /// Restore a backup into an empty deployment (embedded, or PostgreSQL and S3).
    Restore(backup::RestoreArgs),
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
        Some(ServerCommand::Gc(a)) => gc::run(a),
        Some(ServerCommand::Check(a)) => check::run(a),
        Some(ServerCommand::Repo(c)) => repo::run(c),
        Some(ServerCommand::Index(c)) => index_rebuild::run(c),
        Some(ServerCommand::Storage(c)) => storage_migrate::run(c),
        Some(ServerCommand::Backup(a)) => backup::run_backup(*a),
        Some(ServerCommand::Restore(a)) => backup::run_restore(a),
        None => run::serve(args.run),
    }
}
