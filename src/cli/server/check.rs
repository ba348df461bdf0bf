//! `git xet server check`: every registered file rebuilds from stored xorbs.

use std::process::ExitCode;

use super::deployment::DeploymentArgs;
use super::upkeep::{open_existing, runtime};
use crate::client::stats::human_bytes;
use crate::server::check::check;

#[derive(clap::Args, Debug)]
pub(super) struct CheckArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Also read every stored xorb and verify its chunk hashes and xorb hash, rebuild every
    /// file and verify its file hash and every repository's sha256 for it.
    #[arg(long)]
    read_data: bool,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    crate::cli::logging::init("warn");
    let deployment = open_existing(&args.deployment)?;
    let report =
        runtime()?.block_on(check(&*deployment.store, &deployment.index, args.read_data))?;
    println!("files checked: {}", report.files);
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
