//! `git xet server token`: access tokens.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::data_dir;
use crate::server::auth::{self, Scope};
use crate::server::keys::Keys;
use crate::server::repo_name::RepoName;

#[derive(clap::Subcommand, Debug)]
pub(super) enum TokenCommand {
    /// Print a new access token for one repository (no running server needed: the signing
    /// secret lives in the data directory). Use it as a Bearer token or as the HTTP Basic
    /// password (any user name) with git and git-lfs.
    Create(TokenCreateArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct TokenCreateArgs {
    /// Repository, `name` or `org/name`.
    #[arg(long)]
    repo: String,
    /// `read` (clone, fetch, downloads) or `write` (also push and uploads).
    #[arg(long, value_parser = ["read", "write"])]
    scope: String,
    /// Lifetime in seconds (at least 1).
    #[arg(long, default_value_t = 30 * 24 * 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    ttl: u64,
    /// The server's data directory.
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    data: Option<PathBuf>,
    /// Create the data directory's signing secret if it has none (otherwise that is an
    /// error: a token signed with a new secret is refused by a server using another).
    #[arg(long)]
    init: bool,
}

pub(super) fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::Create(a) => token_create(a),
    }
}

fn token_create(args: TokenCreateArgs) -> anyhow::Result<ExitCode> {
    let repo = RepoName::parse(&args.repo).map_err(|e| anyhow::anyhow!("{e}"))?;
    let scope = Scope::parse(&args.scope).context("scope must be read or write")?;
    let data = data_dir(args.data)?;
    let keys = if args.init {
        std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
        Keys::load_or_create(&data)
    } else {
        Keys::load(&data)
    };
    let keys = keys.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "{} has no server secret ({} is missing): pass the data directory the server \
             uses (--data or GIT_XET_SERVER_DATA), start the server once, or pass --init to \
             create a new secret there",
            data.display(),
            crate::server::keys::secret_path(&data).display()
        ),
        _ => anyhow::Error::new(e)
            .context(format!("loading the server secret in {}", data.display())),
    })?;
    let (token, _exp) = auth::issue(&keys, &repo, scope, args.ttl);
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}
