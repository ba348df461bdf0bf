//! `git xet server token`: access tokens.

use std::process::ExitCode;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use crate::server::auth::{self, Scope};
use crate::server::deployment;
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
    /// Where the server's secret lives: its data directory or, with a PostgreSQL index,
    /// the index (where the first server or command creates it).
    #[command(flatten)]
    deployment: DeploymentArgs,
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
    let keys = deployment::open_keys(&args.deployment.config()?, args.init)?;
    let (token, _exp) = auth::issue(&keys, &repo, scope, args.ttl);
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}
