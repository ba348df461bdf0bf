//! `git xet server storage migrate --to LOCATION` (git_xet_upkeep::migrate): copy the
//! deployment's objects to another store while servers run; the switch-over is in
//! docs/server-operations.md, "Moving the object store".

use std::process::ExitCode;
use std::time::Instant;

use super::deployment::DeploymentArgs;
use super::upkeep::runtime;
use git_xet_deployment::{open_store, StoreLocation};
use git_xet_upkeep::migrate::migrate;

#[derive(clap::Subcommand, Debug)]
pub(super) enum StorageCommand {
    /// Copy every object of the deployment's store (--object-store, or the data directory)
    /// to LOCATION, verifying each, while servers run. Re-running copies only what is
    /// missing there. The source is not changed.
    Migrate(MigrateArgs),
}

#[derive(clap::Args, Debug)]
pub(super) struct MigrateArgs {
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// The new store: a directory, or `s3://BUCKET[/PREFIX]` (configured by the same AWS_*
    /// variables as --object-store).
    #[arg(long, value_name = "LOCATION")]
    to: String,
}

pub(super) fn run(command: StorageCommand) -> anyhow::Result<ExitCode> {
    crate::common::logging::init("warn");
    let StorageCommand::Migrate(args) = command;
    let config = args.deployment.config()?;
    let to = StoreLocation::parse(&args.to)?;
    anyhow::ensure!(
        to != config.object_store,
        "--to names the deployment's own object store"
    );
    if let StoreLocation::Dir(root) = &config.object_store {
        anyhow::ensure!(
            root.join("xorbs").is_dir(),
            "no object store in {}: pass the data directory the server uses (--data or \
             GIT_XET_SERVER_DATA), or its --object-store",
            root.display()
        );
    }
    let from = open_store(&config.object_store, &config.tmp_dir(), true)?;
    // A directory store stages on its own filesystem.
    let staging = match &to {
        StoreLocation::Dir(root) => root.join("tmp"),
        StoreLocation::S3 { .. } => config.tmp_dir(),
    };
    let dest = open_store(&to, &staging, true)?;
    let started = Instant::now();
    let report = runtime()?.block_on(migrate(&*from, &*dest, true))?;
    let secs = started.elapsed().as_secs_f64().max(0.001);
    println!("objects in the source: {}", report.objects);
    println!(
        "copied: {} ({} MB, {:.1} MB/s, {:.1} objects/s)",
        report.copied,
        report.bytes_copied / 1_000_000,
        report.bytes_copied as f64 / 1e6 / secs,
        report.copied as f64 / secs
    );
    println!("already there: {}", report.present);
    if report.other_layout > 0 {
        println!("there in another layout (kept): {}", report.other_layout);
    }
    if report.vanished > 0 {
        println!("deleted from the source meanwhile: {}", report.vanished);
    }
    println!("took {secs:.1} s");
    if report.problems.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &report.problems {
        eprintln!("problem: {problem}");
    }
    eprintln!(
        "{} objects failed verification in the source and were not copied (see `git xet \
         server check --read-data`)",
        report.problems.len()
    );
    Ok(ExitCode::FAILURE)
}
