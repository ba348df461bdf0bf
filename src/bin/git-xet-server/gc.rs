//! `git xet server gc`: delete what no repository can reach.

use std::process::ExitCode;
use std::time::Duration;

use super::deployment::DeploymentArgs;
use super::upkeep::{open_existing, parse_duration, runtime};
use git_xet_io::human::human_bytes;
use git_xet_upkeep::gc::{gc, GcOptions};

#[derive(clap::Args, Debug)]
pub(super) struct GcArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Objects younger than this are kept even when unreferenced (an upload stores its
    /// xorbs before the shard that references them): `24h`, `30m`, `1h 30m`, `7d`, `1w`,
    /// or plain seconds (`0`: none).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    grace: Duration,
    /// Print what would be freed; delete nothing.
    #[arg(long)]
    dry_run: bool,
}

pub(super) fn run(args: GcArgs) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let deployment = open_existing(&args.deployment)?;
    let opts = GcOptions {
        grace: args.grace,
        dry_run: args.dry_run,
    };
    let report = runtime()?.block_on(gc(&*deployment.store, &deployment.index, &opts))?;
    let verb = if args.dry_run { "would free" } else { "freed" };
    println!(
        "files unregistered: {}{}",
        report.files_unregistered,
        if args.dry_run { " (would be)" } else { "" }
    );
    println!(
        "xorbs {verb}: {} ({} bytes, {})",
        report.xorbs,
        report.xorb_bytes,
        human_bytes(report.xorb_bytes)
    );
    println!(
        "shards {verb}: {} ({} bytes, {})",
        report.shards,
        report.shard_bytes,
        human_bytes(report.shard_bytes)
    );
    println!("xorbs kept: {}", report.xorbs_kept);
    Ok(ExitCode::SUCCESS)
}
