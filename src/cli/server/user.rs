//! `git xet server user add`: the authorized_keys line giving a user's ssh key git and LFS
//! access through `git xet shell`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::data_dir;
use crate::server::auth::Scope;
use crate::server::deployment::IndexLocation;
use crate::server::ssh::access::Grant;
use crate::server::ssh::authorized_keys::{self, PublicKey, ShellCommand};

#[derive(clap::Subcommand, Debug)]
pub(super) enum UserCommand {
    /// Write (with --authorized-keys) or print the authorized_keys line of a user's key:
    /// its forced command `git xet shell` serves git and git-lfs on the repositories named
    /// here, and nothing else (no shell, no forwarding).
    Add(UserAddArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct UserAddArgs {
    /// The user's name.
    name: String,
    /// The public key, as in the user's `.pub` file: `ssh-ed25519 AAAA... comment`.
    #[arg(long)]
    key: String,
    /// A repository the key may use, `org/name` or `org/*` (every repository of the
    /// organization), optionally with `:read`/`:write`; repeat for more.
    #[arg(long = "repo", value_name = "ORG/NAME[:SCOPE]", required = true)]
    repos: Vec<String>,
    /// Scope of the --repo arguments that name none.
    #[arg(long, value_parser = ["read", "write"], default_value = "read")]
    scope: String,
    /// Append the line to this authorized_keys file (created with mode 0600) instead of
    /// printing it.
    #[arg(long)]
    authorized_keys: Option<PathBuf>,
    /// The server's data directory, written into the command.
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// The deployment's index (`postgres://USER@HOST/DB`), written into the command so that
    /// the shell reads the signing secret where the servers do. Without a password: give
    /// one to the shell through sshd's environment instead (see docs/server.md). Not read
    /// from GIT_XET_SERVER_INDEX: what goes into the line is spelled out here.
    #[arg(long, value_name = "URL")]
    index: Option<String>,
    /// Base URL git-lfs-authenticate hands out [default: the running server's].
    #[arg(long)]
    url: Option<String>,
    /// Refuse git-lfs-transfer for this key: git-lfs uses git-lfs-authenticate and HTTP.
    #[arg(long)]
    no_lfs_transfer: bool,
    /// The git-xet binary sshd runs [default: this one].
    #[arg(long)]
    program: Option<PathBuf>,
}

pub(super) fn run(command: UserCommand) -> anyhow::Result<ExitCode> {
    match command {
        UserCommand::Add(a) => add(a),
    }
}

fn add(args: UserAddArgs) -> anyhow::Result<ExitCode> {
    let scope = Scope::parse(&args.scope)
        .filter(|s| *s <= Scope::Write)
        .context("scope must be read or write")?;
    let grants = args
        .repos
        .iter()
        .map(|spec| Grant::parse(spec, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let key = PublicKey::parse(&args.key)?;
    let index = args
        .index
        .as_deref()
        .map(IndexLocation::parse)
        .transpose()?;
    let data = data_dir(args.data)?;
    let data = std::path::absolute(&data).unwrap_or(data);
    let program = match args.program {
        Some(p) => std::path::absolute(&p).unwrap_or(p),
        None => std::env::current_exe()
            .and_then(|exe| exe.canonicalize())
            .context("finding this program's path; pass --program")?,
    };
    let line = authorized_keys::line(
        &ShellCommand {
            program: &program,
            user: &args.name,
            data_dir: &data,
            grants: &grants,
            public_url: args.url.as_deref(),
            no_lfs_transfer: args.no_lfs_transfer,
            index: index.as_ref(),
        },
        &key,
    )?;
    match args.authorized_keys {
        Some(path) => {
            authorized_keys::append(&path, &line)
                .with_context(|| format!("appending to {}", path.display()))?;
            eprintln!("added {}'s key to {}", args.name, path.display());
        }
        None => println!("{line}"),
    }
    Ok(ExitCode::SUCCESS)
}
