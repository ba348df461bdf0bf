//! `git xet server repo`: hosted repositories.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::deployment::DeploymentArgs;
use super::upkeep::open_existing;
use git_xet_index::RepoName;

#[derive(clap::Subcommand, Debug)]
pub(super) enum RepoCommand {
    /// Delete a repository: its hosted git repository and which LFS objects it may see.
    /// Its xorbs stay until `git xet server gc` finds nothing else references them.
    Delete(RepoDeleteArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct RepoDeleteArgs {
    /// Repository, `name` or `org/name`.
    name: String,
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Where hosted git repositories live [default: DATA/repos].
    #[arg(long, env = "GIT_XET_SERVER_GIT_DIR", value_name = "DIR")]
    git_dir: Option<PathBuf>,
    /// Really delete (without it, nothing is changed).
    #[arg(long)]
    yes: bool,
}

pub(super) fn run(command: RepoCommand) -> anyhow::Result<ExitCode> {
    match command {
        RepoCommand::Delete(a) => delete(a),
    }
}

fn delete(args: RepoDeleteArgs) -> anyhow::Result<ExitCode> {
    let repo = RepoName::parse(&args.name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let git_root = match args.git_dir {
        Some(dir) => dir,
        None => args.deployment.data_dir()?.join("repos"),
    };
    let bare = repo.bare_dir(&git_root);
    if !args.yes {
        eprintln!(
            "this would delete repository {repo}: {} and its LFS object records; \
             pass --yes to do it",
            bare.display()
        );
        return Ok(ExitCode::from(2));
    }
    let deployment = open_existing(&args.deployment)?;
    let had_git = bare.exists();
    if had_git {
        std::fs::remove_dir_all(&bare).with_context(|| format!("deleting {}", bare.display()))?;
    }
    let objects = deployment.index.delete_repo_files(&repo)?;
    anyhow::ensure!(
        had_git || objects > 0,
        "repository {repo} does not exist (no {} and no LFS objects)",
        bare.display()
    );
    println!(
        "deleted {repo}: git repository {}, {objects} LFS object records; run \
         `git xet server gc` to free their storage",
        if had_git { "removed" } else { "absent" }
    );
    Ok(ExitCode::SUCCESS)
}
