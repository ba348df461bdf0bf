//! `git xet server check`: every registered file rebuilds from stored xorbs; no hosted git
//! repository holds a stale lock file.

use std::path::PathBuf;
use std::process::ExitCode;

use super::deployment::DeploymentArgs;
use super::upkeep::{open_existing, runtime};
use git_xet_io::human::human_bytes;
use git_xet_upkeep::check::{check, git_locks};

#[derive(clap::Args, Debug)]
pub(super) struct CheckArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Also read every stored xorb and verify its chunk hashes and xorb hash, rebuild every
    /// file and verify its file hash and every repository's sha256 for it.
    #[arg(long)]
    read_data: bool,
    /// Where hosted git repositories live [default: the running server's, else DATA/repos].
    #[arg(long, env = "GIT_XET_SERVER_GIT_DIR", value_name = "DIR")]
    git_dir: Option<PathBuf>,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let deployment = open_existing(&args.deployment)?;
    let mut report =
        runtime()?.block_on(check(&*deployment.store, &deployment.index, args.read_data))?;
    let git_root = match args.git_dir {
        Some(dir) => dir,
        None => git_xet_deployment::running::repos_dir(&args.deployment.data_dir()?),
    };
    let (repos, stale) = git_locks(&git_root)?;
    report.problems.extend(stale);
    println!("files checked: {}", report.files);
    println!("git repositories checked: {repos}");
    println!("xorbs indexed: {}", report.xorbs);
    if args.read_data {
        println!(
            "xorbs read: {} ({})",
            report.xorbs_read,
            human_bytes(report.bytes_read)
        );
    }
    if report.problems.is_empty() {
        println!("no problems found");
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &report.problems {
        eprintln!("problem: {problem}");
    }
    eprintln!("{} problems found", report.problems.len());
    Ok(ExitCode::FAILURE)
}
