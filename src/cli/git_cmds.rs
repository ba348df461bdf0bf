//! git integration commands: transfer, install, uninstall, migrate, status, quickstart,
//! pre-receive.
//! Argument parsing and output only; the work is in `git::` and `lfs::`.

use std::process::ExitCode;

use anyhow::Context;

use git_xet_git::config::Scope;
use git_xet_git::install::{self, InstallOptions};
use git_xet_io::logging;

#[derive(clap::Args, Debug)]
pub struct TransferArgs {}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").args(["global", "local", "system"])))]
pub struct InstallArgs {
    /// In the user's git config (~/.gitconfig); the default.
    #[arg(long)]
    global: bool,
    /// In the current repository's .git/config only.
    #[arg(long)]
    local: bool,
    /// In the machine's git config (/etc/gitconfig).
    #[arg(long)]
    system: bool,
    /// Parallel transfers: 1 runs a single agent process; more sets lfs.concurrenttransfers.
    #[arg(long, value_name = "N")]
    concurrency: Option<u32>,
    /// Keep git-lfs's own clean/smudge filter instead of `git xet filter-process`.
    #[arg(long)]
    no_filter: bool,
}

impl InstallArgs {
    fn scope(&self) -> Scope {
        if self.local {
            Scope::Local
        } else if self.system {
            Scope::System
        } else {
            Scope::Global
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// The remote whose LFS server receives the objects (default: the current branch's
    /// remote, else origin).
    remote: Option<String>,
    /// Do not download every object back through XET afterwards.
    #[arg(long)]
    skip_verify: bool,
    /// The XET server's LFS endpoint to move the objects to (default: REMOTE's own,
    /// `remote.<name>.lfsurl` or derived from its URL; never `lfs.url`, which names where
    /// they are now).
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// Afterwards, commit a `.lfsconfig` whose `lfs.url` names the new endpoint (or none,
    /// when REMOTE's URL derives it) on the current branch. History is not rewritten.
    #[arg(long)]
    update_lfsconfig: bool,
    /// Objects uploaded at once (each holds at most one 64 MiB xorb in memory).
    #[arg(long, value_name = "N", default_value_t = git_xet_git::migrate::DEFAULT_JOBS)]
    jobs: usize,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The remote to check (default: the current branch's remote, else origin).
    #[arg(long)]
    remote: Option<String>,
    /// Do not contact the LFS server.
    #[arg(long)]
    offline: bool,
}

#[derive(clap::Args, Debug)]
pub struct QuickstartArgs {
    /// Size of the demo file in MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    size_mib: u64,
    /// Work in this directory (kept afterwards) instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// The program git-lfs should run: this very binary.
fn agent_program() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot find the path of the git-xet binary")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    exe.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("the path of the git-xet binary {p:?} is not UTF-8"))
}

pub fn transfer(_args: TransferArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_git::transfer::run_stdio()
}

pub fn filter_process() -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_git::filter::run_stdio()
}

pub fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let scope = args.scope();
    let cwd = std::env::current_dir()?;
    let config = install::config_for(scope, &cwd)?;
    let opts = InstallOptions {
        scope,
        concurrency: args.concurrency,
        program: agent_program()?,
        filter: !args.no_filter,
    };
    let changes = install::install(&config, &opts)?;
    for c in &changes {
        println!("  {c}");
    }
    println!(
        "git-xet is installed ({} config): git-lfs uses it when the LFS server offers `xet`",
        scope.name()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn uninstall(args: InstallArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let scope = args.scope();
    let cwd = std::env::current_dir()?;
    let config = install::config_for(scope, &cwd)?;
    let changes = install::uninstall(&config, scope, &agent_program()?)?;
    if changes.is_empty() {
        println!("nothing to uninstall in the {} config", scope.name());
    }
    for c in &changes {
        println!("  {c}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    logging::init("info");
    let opts = git_xet_git::migrate::Options {
        remote: args.remote,
        to: args.to,
        verify: !args.skip_verify,
        update_lfsconfig: args.update_lfsconfig,
        jobs: args.jobs,
    };
    git_xet_git::migrate::run(&opts)?;
    Ok(ExitCode::SUCCESS)
}

pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_git::status::run(args.remote.as_deref(), args.offline)?;
    Ok(ExitCode::SUCCESS)
}

pub fn quickstart(args: QuickstartArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let opts = git_xet_git::quickstart::Options {
        size_mib: args.size_mib,
        dir: args.dir,
        program: agent_program()?,
    };
    git_xet_git::quickstart::run(&opts)?;
    Ok(ExitCode::SUCCESS)
}
